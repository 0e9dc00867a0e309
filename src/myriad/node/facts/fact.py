"""A fact: what became of one thing read from a node, and its value when it was read.

- `ok`: the tool answered and its output was read (`value` holds the parsed result);
- `missing`: the tool or file is not on the node (a fail where the spec expects it);
- `failed`: the tool ran and reported a problem (exit status, message in `detail`);
- `unreadable`: the output could not be read (a parser's ParseFailure) or the tool timed
  out: the check's result is `error`, never a guess;
- `not-gathered`: the probe was not run on this node (controller-only probes elsewhere).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

T = TypeVar("T")
U = TypeVar("U")
FactState = Literal["ok", "missing", "failed", "unreadable", "not-gathered"]


@dataclass(frozen=True, slots=True)
class Fact(Generic[T]):
    state: FactState
    value: T | None = None
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.state == "ok"

    def get(self) -> T:
        """The value of an `ok` fact; checks call it only after testing `ok`."""
        if self.state != "ok":
            raise ValueError(f"fact is {self.state}: {self.detail}")
        return self.value  # type: ignore[return-value]

    def map(self, function: Callable[[T], U]) -> Fact[U]:
        if self.state != "ok":
            return Fact(self.state, None, self.detail)
        return Fact("ok", function(self.value))  # type: ignore[arg-type]


def ok(value: T) -> Fact[T]:
    return Fact("ok", value)


NOT_GATHERED: Fact[Any] = Fact("not-gathered", detail="not gathered on this node")
