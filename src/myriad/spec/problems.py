"""Problems found in a spec file, each with its place, what is wrong and what would be right."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

Path = tuple[str | int, ...]


def format_path(path: Path) -> str:
    """`('pools', 1, 'count')` → `pools[1].count`, the way a reader navigates the file."""
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else part
    return text or "(document)"


@dataclass(frozen=True, slots=True)
class Problem:
    file: str
    line: int
    column: int
    path: Path
    message: str
    hint: str = ""

    def render(self) -> str:
        where = f"{self.file}:{self.line}:{self.column}"
        text = f"{where}: {format_path(self.path)}: {self.message}"
        return f"{text}\n    hint: {self.hint}" if self.hint else text


class MyriadError(Exception):
    """Base of the errors Myriad reports to a user; each maps to an exit code."""

    exit_code = 1


class SpecError(MyriadError):
    """The spec cannot be used: every problem of the file, in file order."""

    exit_code = 2

    def __init__(self, problems: Iterable[Problem]) -> None:
        self.problems: Sequence[Problem] = sorted(
            problems, key=lambda p: (p.file, p.line, p.column, format_path(p.path))
        )
        super().__init__(self.render())

    def render(self) -> str:
        count = len(self.problems)
        head = f"{count} problem{'s' if count != 1 else ''} in the spec:"
        return "\n".join([head, *(p.render() for p in self.problems)])
