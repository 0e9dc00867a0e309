"""A JSON document with one list too long to hold, written piece by piece.

`myriad plan --json --cabling` at 1M GPUs carries millions of cables; as dicts in one
document they took 6 GB. The document is built with a `Streamed` where that list goes; its
items are made while the text is written, and the text is exactly what
`json.dumps(document, indent=2)` gives for the list made whole (a test holds it to that).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

INDENT = 2
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
        lines = json.dumps(item, indent=INDENT).replace("\n", "\n" + inner)
        yield ("[\n" if first else ",\n") + inner + lines
        first = False
    yield "[]" if first else "\n" + " " * depth + "]"
    yield after
