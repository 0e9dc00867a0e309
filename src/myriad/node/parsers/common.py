"""Pieces every fact parser shares: the one exception they raise and small readers.

A parser is a pure function from a tool's text output to frozen dataclasses. Validation
reads thousands of nodes in one pass, so one node's odd output must become a finding
about that node and never stop the run: every parser raises ParseFailure, and only
ParseFailure, for output it cannot read.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

__all__ = [
    "INTERNAL_ERROR",
    "ParseFailure",
    "first_line",
    "guarded",
    "load_json",
    "normalize_guid",
    "require_text",
    "to_int",
]

# Reasons starting with this mark a parser bug rather than bad input; tests assert that
# no input ever produces one.
INTERNAL_ERROR = "internal parser error"

_REASON_LIMIT = 240

P = ParamSpec("P")
R = TypeVar("R")


class ParseFailure(ValueError):
    """The output of `tool` could not be read as that tool's documented format."""

    tool: str
    reason: str

    def __init__(self, tool: str, reason: str) -> None:
        # Reports print one line per finding; output quoted into a reason may hold newlines.
        one_line = " ".join(str(reason).split())
        if len(one_line) > _REASON_LIMIT:
            one_line = one_line[: _REASON_LIMIT - 3] + "..."
        super().__init__(f"{tool}: {one_line}")
        self.tool = tool
        self.reason = one_line

    def __reduce__(self) -> tuple[type[ParseFailure], tuple[str, str]]:
        # Facts may be parsed in worker processes; the default pickling would lose `reason`.
        return (ParseFailure, (self.tool, self.reason))


def guarded(tool: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Make a parser raise ParseFailure for every failure, whatever went wrong inside."""

    def decorate(parse: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(parse)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            try:
                return parse(*args, **kwargs)
            except ParseFailure:
                raise
            except RecursionError:
                raise ParseFailure(tool, "input is nested too deeply") from None
            except Exception as exc:
                raise ParseFailure(tool, f"{INTERNAL_ERROR}: {type(exc).__name__}: {exc}") from exc

        return wrapper

    return decorate


def require_text(tool: str, text: object) -> str:
    """Return `text` if it is a non-blank string; the gatherer may hand over anything."""
    if not isinstance(text, str):
        raise ParseFailure(tool, f"expected the output as text, got {type(text).__name__}")
    if not text.strip():
        raise ParseFailure(tool, "empty output")
    return text


def load_json(tool: str, text: object) -> Any:
    """Decode JSON output, turning every decoding problem into ParseFailure."""
    body = require_text(tool, text)
    try:
        return json.loads(body)
    except json.JSONDecodeError as exc:
        raise ParseFailure(
            tool, f"not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
        ) from None


def first_line(text: str) -> str:
    """The first non-blank line, to quote tool error messages in a reason."""
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


_INT = re.compile(r"[+-]?\d+")


def to_int(tool: str, value: str, what: str) -> int:
    """Parse a decimal integer; an empty or partial value is a failure, never a guess."""
    stripped = value.strip()
    if not _INT.fullmatch(stripped):
        raise ParseFailure(tool, f"{what}: expected an integer, got {stripped!r}")
    return int(stripped)


def normalize_guid(tool: str, value: str) -> str | None:
    """Write a 64-bit GUID as ibstat does (0x + 16 hex digits) whichever tool printed it.

    ibstat prints 0x58a2e10300a7820e, sysfs and ibv_devinfo print 58a2:e103:00a7:820e;
    checks compare GUIDs across tools, so they need one spelling. A GUID of another
    length is output cut short, not a GUID to pad.
    """
    stripped = value.strip().lower()
    if not stripped:
        return None
    if re.fullmatch(r"0x[0-9a-f]{16}", stripped):
        return stripped
    if re.fullmatch(r"[0-9a-f]{4}(:[0-9a-f]{4}){3}", stripped):
        return "0x" + stripped.replace(":", "")
    raise ParseFailure(tool, f"not a 64-bit GUID: {value.strip()!r}")
