"""A JSON document with one list too long to hold, written piece by piece.

`myriad plan --json --cabling` at 1M GPUs carries millions of cables; as dicts in one
document they took 6 GB. The document is built with a `Streamed` where that list goes; its
items are made while the text is written, and the text is exactly what
`json.dumps(document, indent=2)` gives for the list made whole (a test holds it to that).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

INDENT = 2
# The C string encoder json.dumps uses (ensure_ascii), so strings come out the same.
_string = json.encoder.encode_basestring_ascii
# A value no document holds: the place the list's text goes.
_PLACE = "\x00streamed list\x00"


@dataclass(frozen=True)
class Streamed:
    """A list made on demand: `items()` gives a fresh iterator each time it is called."""

    items: Callable[[], Iterable[Any]]


def _placed(document: Any) -> tuple[Any, Streamed | None]:
    """The document with its one `Streamed` swapped for the placeholder, and that one."""
    if isinstance(document, Streamed):
        return _PLACE, document
    if isinstance(document, Mapping):
        found = None
        copy = {}
        for key, value in document.items():
            copy[key], inner = _placed(value)
            found = found or inner
        return copy, found
    return document, None


def _value(value: object) -> str | None:
    """A scalar's JSON text as json.dumps writes it; None for anything else."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, float) and math.isfinite(value):
        return float.__repr__(value)
    return None


def _flat(item: Any, inner: str) -> str | None:
    """A dict of scalars as `json.dumps(item, indent=2)` writes it at `inner`'s depth, or
    None for anything else. indent=2 sends json.dumps to its pure-Python encoder; a cable
    is a flat dict, and writing it here takes a third of the time."""
    if not isinstance(item, dict) or not item:
        return None
    fields = []
    for key, value in item.items():
        text = _value(value)
        if text is None or not isinstance(key, str):
            return None
        fields.append(f"{_string(key)}: {text}")
    pad = inner + " " * INDENT
    return "{\n" + pad + (",\n" + pad).join(fields) + "\n" + inner + "}"


def json_chunks(document: Mapping[str, Any]) -> Iterator[str]:
    """The document as `json.dumps(..., indent=2)` text plus a newline, in pieces."""
    plain, streamed = _placed(document)
    text = json.dumps(plain, indent=INDENT) + "\n"
    if streamed is None:
        yield text
        return
    quoted = json.dumps(_PLACE)
    before, after = text.split(quoted, 1)
    line_start = before.rfind("\n") + 1
    depth = len(before[line_start:]) - len(before[line_start:].lstrip(" "))
    # The list's own indent is its key's line's.
    yield before
    inner = " " * (depth + INDENT)
    first = True
    for item in streamed.items():
        lines = _flat(item, inner) or json.dumps(item, indent=INDENT).replace("\n", "\n" + inner)
        yield ("[\n" if first else ",\n") + inner + lines
        first = False
    yield "[]" if first else "\n" + " " * depth + "]"
    yield after
