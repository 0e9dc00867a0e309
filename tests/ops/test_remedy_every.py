"""`myriad remedy --every S`: remediation that keeps going, pass after pass, until stopped.

The loop is driven by a stop event the test sets; the command end to end gets a real SIGTERM
from inside its second pass, as systemd stops a service, and finishes that pass first. The
cluster is test_remedy_verb.py's: the local example with node02 drained by XID 79, Slurm
and the nodes recorded fakes.
"""

from __future__ import annotations

import json
import os
import signal
import threading
from pathlib import Path
from typing import Any

import pytest
from test_remedy_verb import node02_drained, spec  # noqa: F401 (fixtures)

from fake_slurm import RecordedController
from myriad.cli import main
from myriad.errors import ClusterBusy, OpsError, OpsInputError
from myriad.ops import remedy as ops


class CountedStop(threading.Event):
    """Set after `waits` waits; records each wait's timeout instead of sleeping."""

    def __init__(self, waits: int) -> None:
        super().__init__()
        self.waits = waits
        self.timeouts: list[float | None] = []

    def wait(self, timeout: float | None = None) -> bool:
        self.timeouts.append(timeout)
        if len(self.timeouts) >= self.waits:
            self.set()
        return self.is_set()


def test_passes_go_on_through_a_busy_cluster_and_an_unreachable_one() -> None:
    answers: list[Any] = [
        "pass 1",
        ClusterBusy("the cluster is busy: roll by ops holds run.lock"),
        OpsError("could not reach ctl01"),
        "pass 4",
    ]

    def run_pass() -> Any:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    reported: list[Any] = []
    stop = CountedStop(4)
    assert ops.remedy_every(run_pass, 300, reported.append, stop) == 4
    assert reported == [
        "pass 1",
        "pass skipped: the cluster is busy: roll by ops holds run.lock",
        "pass skipped: could not reach ctl01",
        "pass 4",
    ]
    assert stop.timeouts == [300, 300, 300, 300]


def test_a_spec_error_ends_the_loop() -> None:
    def run_pass() -> Any:
        raise OpsInputError("cluster.yaml: health.remediation is not set")

    with pytest.raises(OpsInputError, match="remediation is not set"):
        ops.remedy_every(run_pass, 300, print, CountedStop(9))


def test_every_below_a_minute_is_refused(
    spec: Path,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["remedy", str(spec), "--every", "10"]) == 2
    assert "--every 10: at least 60 s between passes" in capsys.readouterr().err


def test_sigterm_ends_the_command_after_the_pass_in_progress(
    spec: Path,  # noqa: F811
    node02_drained: RecordedController,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    controller = node02_drained
    one_pass = ops.remedy
    calls = []

    def counted(*args: Any, **kwargs: Any) -> ops.RemedyResult:
        calls.append(1)
        if len(calls) == 2:
            os.kill(os.getpid(), signal.SIGTERM)  # systemctl stop, mid-pass
        return one_pass(*args, **kwargs)

    monkeypatch.setattr(ops, "remedy", counted)
    monkeypatch.setattr(ops, "MIN_EVERY_S", 1)
    before = signal.getsignal(signal.SIGTERM)
    assert main(["remedy", str(spec), "--every", "1", "--json"]) == 0
    captured = capsys.readouterr()
    documents = [json.loads(line) for line in captured.out.splitlines()]
    assert len(documents) == 2  # the second pass ran to its end
    assert [(o["node"], o["action"]) for o in documents[0]["outcomes"]] == [("node02", "reboot")]
    assert "stopped after 2 passes" in captured.err
    assert signal.getsignal(signal.SIGTERM) == before
    # One reboot: the second pass saw it in progress and left node02 alone.
    assert [c[:2] for c in controller.commands if c[0] == "scontrol"] == [("scontrol", "reboot")]
