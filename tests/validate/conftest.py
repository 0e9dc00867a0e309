"""Shared fixtures for the fact parser tests: real captures, own fixtures, truncation checks.

The real captures live in `tests/samples/<tool>/`, with their sources in
`tests/samples/SOURCES.md`. Their absence is a broken checkout, not a reason to skip: a
parser suite that silently skips its real-data tests proves nothing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from myriad.node.parsers.common import INTERNAL_ERROR, ParseFailure

REPO_ROOT = Path(__file__).resolve().parents[2]
SAMPLES_DIR = REPO_ROOT / "tests" / "samples"
FIXTURES_DIR = Path(__file__).resolve().parent / "fixtures"

# Mid-line cuts are tried at every offset of small captures; bigger ones are sampled.
_EXHAUSTIVE_LIMIT = 6000
_SAMPLED_CUTS = 600


@pytest.fixture(scope="session")
def samples_dir() -> Path:
    if not SAMPLES_DIR.is_dir():
        pytest.fail(
            f"real tool captures not found at {SAMPLES_DIR}: the parser tests need "
            "tests/samples/<tool>/ from the repository",
            pytrace=False,
        )
    return SAMPLES_DIR


@pytest.fixture(scope="session")
def sample(samples_dir: Path) -> Callable[[str], str]:
    """Read a capture by its path under tests/samples, bytes kept as they are."""

    def read(relative: str) -> str:
        path = samples_dir / relative
        if not path.is_file():
            pytest.fail(f"capture {relative} is missing from {samples_dir}", pytrace=False)
        return path.read_text(encoding="utf-8")

    return read


@pytest.fixture(scope="session")
def fixture_text() -> Callable[[str], str]:
    def read(name: str) -> str:
        return (FIXTURES_DIR / name).read_text(encoding="utf-8")

    return read


def is_partial_of(part: Any, full: Any, *, lenient: bool) -> bool:
    """True if `part` says nothing that the complete result contradicts.

    Missing values (None), shorter tuples and fewer dict keys are allowed. Every tuple
    element but the last must be equal; the last may itself be partial. With
    `lenient`, for cuts inside a line, a text or number may be a prefix of the full
    value: a value cut at the very end of the input cannot be told from a shorter one.
    """
    if part is None:
        return True
    if dataclasses.is_dataclass(part) and not isinstance(part, type):
        return type(part) is type(full) and all(
            is_partial_of(getattr(part, f.name), getattr(full, f.name), lenient=lenient)
            for f in dataclasses.fields(part)
        )
    if isinstance(part, tuple):
        if not isinstance(full, tuple) or len(part) > len(full):
            return False
        if not part:
            return True
        return part[:-1] == full[: len(part) - 1] and is_partial_of(
            part[-1], full[len(part) - 1], lenient=lenient
        )
    if isinstance(part, dict):
        return isinstance(full, dict) and all(
            key in full and is_partial_of(value, full[key], lenient=lenient)
            for key, value in part.items()
        )
    if isinstance(part, bool) or not lenient:
        return bool(part == full)
    if isinstance(part, str | int | float):
        return str(full).startswith(str(part))
    return bool(part == full)


def _line_ends(text: str) -> Iterator[int]:
    for i, char in enumerate(text):
        if char == "\n":
            yield i
            yield i + 1


def _mid_line_cuts(text: str) -> Iterator[int]:
    if len(text) <= _EXHAUSTIVE_LIMIT:
        yield from range(1, len(text))
        return
    step = max(1, len(text) // _SAMPLED_CUTS)
    yield from range(1, len(text), step)


def outcome(parse: Callable[[str], Any], text: str) -> Any:
    """Parse, turning ParseFailure into None; fail the test on any other exception."""
    try:
        return parse(text)
    except ParseFailure as failure:
        assert not failure.reason.startswith(INTERNAL_ERROR), failure
        return None


@pytest.fixture(scope="session")
def check_truncations() -> Callable[[Callable[[str], Any], str], int]:
    """Cut `text` everywhere it matters; each cut must fail cleanly or parse to a part.

    Cuts at line ends must give exactly a prefix of the complete result; cuts inside a
    line may also shorten the one value they cut. Returns how many cuts parsed, so a
    test can check that partial results were really exercised.
    """

    def check(parse: Callable[[str], Any], text: str) -> int:
        full = parse(text)
        parsed = 0
        line_ends = set(_line_ends(text))
        for cut in sorted(line_ends | set(_mid_line_cuts(text))):
            part = outcome(parse, text[:cut])
            if part is None:
                continue
            parsed += 1
            lenient = cut not in line_ends
            assert is_partial_of(part, full, lenient=lenient), (
                f"cut at {cut} ({text[max(0, cut - 40) : cut]!r}) gave {part!r}"
            )
        return parsed

    return check


GARBAGE = [
    "",
    " ",
    "\n\n\t\n",
    "garbage",
    "\x00\x01\x02",
    "Error: command not found",
    "{}",
    "[]",
    "null",
    "<xml/>",
    "=== === ===",
    "Key=Value",
    "a: b\nc: d\n",
    "\ufeff",
    "💥" * 10,
]


@pytest.fixture(scope="session")
def garbage() -> list[str]:
    return list(GARBAGE)
