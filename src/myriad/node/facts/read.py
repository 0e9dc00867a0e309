"""One node's gathered document (myriad.node.gather's JSON) turned into typed NodeFacts,
every declared fact read by its own reader.

Nothing here raises for what a node sends: a malformed document makes every fact
unreadable, with the reason.
"""

from __future__ import annotations

import base64
import gzip
import json
import zlib
from collections.abc import Mapping
from typing import Any

from myriad.node.facts.declare import Reading
from myriad.node.facts.node import NodeFacts
from myriad.node.facts.registry import FACTS

SCHEMA = 1


def unreadable(host: str, reason: str) -> NodeFacts:
    """A node whose document could not be used at all: every fact says why."""
    return NodeFacts(host=host, **{name: d.unusable(reason) for name, d in FACTS.items()})


def decode(text: str) -> object:
    """The gatherer's stdout → its document, unwrapping --compress; ValueError if unusable."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"the gatherer's output is not JSON ({exc.msg})") from None
    if isinstance(document, dict) and document.get("encoding") == "gzip+base64":
        try:
            raw = gzip.decompress(base64.b64decode(str(document.get("data")), validate=True))
            return json.loads(raw)
        # binascii.Error, JSONDecodeError and UnicodeDecodeError are ValueErrors.
        except (ValueError, OSError, EOFError, zlib.error) as exc:
            raise ValueError(f"the gatherer's compressed output is damaged ({exc})") from None
    return document


def node_facts(host: str, document: object) -> NodeFacts:
    """Typed facts from one gathered document; never raises for what the node sent."""
    if not isinstance(document, Mapping):
        return unreadable(host, "the gatherer's output is not a JSON object")
    if document.get("schema") != SCHEMA:
        return unreadable(
            host, f"gatherer document schema {document.get('schema')!r}, expected {SCHEMA}"
        )
    probes = document.get("probes")
    if not isinstance(probes, Mapping):
        return unreadable(host, "the gatherer's document has no probes")
    args = document.get("args")
    reading = Reading(probes, args if isinstance(args, Mapping) else {})
    values: dict[str, Any] = {name: d.read(reading) for name, d in FACTS.items()}
    seconds = document.get("seconds")
    return NodeFacts(
        host=host, seconds=float(seconds) if isinstance(seconds, (int, float)) else None, **values
    )
