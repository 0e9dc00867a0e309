"""Every error Myriad reports to a user, in one place at the bottom of the layers.

`MyriadError` is the base: the command line prints its message (no traceback) and exits with
its `exit_code` (1: the cluster or its environment has a problem; 2: the input is unusable).
Each stage raises its own subclass, so a caller can tell them apart without importing the
stage. A spec's problems (`Problem`) carry their place, what is wrong and what would be right.
"""

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


class LocatedError(MyriadError):
    """A file Myriad reads cannot be used: every problem with its file:line:column, in file
    order, under a head naming what the file is (`subject`)."""

    exit_code = 2
    subject = "the file"

    def __init__(self, problems: Iterable[Problem]) -> None:
        self.problems: Sequence[Problem] = sorted(
            problems, key=lambda p: (p.file, p.line, p.column, format_path(p.path))
        )
        super().__init__(self.render())

    def render(self) -> str:
        count = len(self.problems)
        head = f"{count} problem{'s' if count != 1 else ''} in {self.subject}:"
        return "\n".join([head, *(p.render() for p in self.problems)])


class SpecError(LocatedError):
    """The spec cannot be used: every problem of the file, in file order."""

    subject = "the spec"


class ProjectNotFound(MyriadError):
    """Myriad's roles and playbooks are nowhere to be found; the message says what to set."""

    exit_code = 2


# --- spec and plan ----------------------------------------------------------------------


class PlanError(MyriadError):
    """The spec loads but its plan has lint errors, so nothing can be built from it."""

    exit_code = 1


class FabricError(MyriadError, ValueError):
    """The compute fabric cannot be built from these switches at this size."""


class AddressError(MyriadError):
    """A network of the spec has too few addresses for its nodes."""

    exit_code = 2


# --- provision --------------------------------------------------------------------------


class StackOutputsError(MyriadError):
    """The stack outputs are missing, unreadable or disagree with the spec."""

    exit_code = 2


class LocalClusterError(MyriadError):
    """Docker could not make or read the local cluster's containers."""

    exit_code = 1


class NodesLeftTheSpec(LocalClusterError):
    """Containers of nodes the spec no longer names: `up` never removes a node (its jobs
    would die with it); `myriad remove` drains it and waits for them."""

    exit_code = 2


class NodeImageError(MyriadError, RuntimeError):
    """The local cluster's node image could not be built or found."""

    exit_code = 1


class RedfishError(MyriadError):
    """A BMC did not do what was asked."""


class RedfishTimeout(RedfishError):
    """A BMC, or a node behind it, did not answer in time."""


class RedfishHttpError(RedfishError):
    """A BMC answered with an HTTP error status."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class NodeUnreachable(RedfishTimeout):
    """A node did not answer on SSH within its deadline."""


class UnsafeOperation(RedfishError):
    """Asked for what would disturb a running node, or wipe one without its reimage token."""


class PxeStateError(MyriadError):
    """The PXE server's folder lacks something, or a node's install record is not as expected."""


class WaitError(MyriadError):
    """`myriad provision wait` cannot run: its inputs are missing or inconsistent."""

    exit_code = 2


# --- running Ansible, bring-up, validation ----------------------------------------------


class RunnerError(MyriadError):
    """ansible-runner could not start a playbook."""

    exit_code = 1


class FlowError(MyriadError):
    """A bring-up verb cannot go on (wrong provider, nothing to retry, damaged state)."""

    exit_code = 1


class ValidateError(MyriadError):
    """Validation cannot run as asked (bad --limit, no inventory, too few nodes for --perf)."""

    exit_code = 1


class FabricInputError(MyriadError):
    """Discovered-fabric input (`validate --fabric --from FILE`) that cannot be read."""

    exit_code = 2


# --- day-2 operations ---------------------------------------------------------------------


class OpsError(MyriadError):
    """A day-2 operation cannot go on: Slurm refused, a node is held by the health runner,
    a roll's saved state is missing or damaged."""

    exit_code = 1


class OpsInputError(OpsError):
    """A day-2 command's arguments are unusable (an unknown node, a malformed --batch)."""

    exit_code = 2


class ActionMapError(LocatedError):
    """Node health's action map (which action each finding gets) has bad entries: every
    problem with its file:line:column."""

    subject = "the action map"


# --- runs that tell the truth (issue #13) ---------------------------------------------------


class ClusterBusy(FlowError):
    """Another run holds the cluster's lock; the message names it and since when."""

    exit_code = 1


class StateError(FlowError):
    """The cluster's state folder is damaged or cannot be written; nothing was changed."""

    exit_code = 1


class BadArguments(MyriadError):
    """A command-line value that cannot be used: it names nothing (an unknown --tags tag or
    role) or a path that cannot be written as asked."""

    exit_code = 2


class RunInterrupted(MyriadError):
    """Ctrl-C or SIGTERM stopped a run; Ansible and its workers were stopped with it."""

    exit_code = 130
