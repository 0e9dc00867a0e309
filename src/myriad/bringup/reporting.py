"""What a bring-up tells the person running it, as a protocol the views layer implements.

Bring-up decides *what* happens (phases, a playbook run, its recap); how that looks on a
terminal or in a CI log is the views' business (`myriad.views.progress.Phases`). Bring-up
sits below the views, so it names only this protocol and the command line hands it the
implementation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from myriad.runner import RunResult


class EventSink(Protocol):
    """Receives ansible-runner's events while a playbook runs."""

    def on_event(self, event: Mapping[str, Any]) -> None: ...


class Reporter(Protocol):
    def phase(self, name: str) -> AbstractContextManager[list[str]]:
        """A named step; notes appended to the list are shown when it finishes."""
        ...

    def playbook(self, title: str) -> AbstractContextManager[EventSink]:
        """A playbook run; the sink gets every event of it."""
        ...

    def recap(self, result: RunResult, hosts: Sequence[str]) -> None:
        """The outcome per host once the playbook has finished."""
        ...
