"""The controller's process-tree handling: real trees, really ended.

An interrupted run (myriad.runner) must leave no process behind: ansible-playbook's own group
is killed by ansible-runner, and Myriad ends the rest, found by parentage (psutil) before
their parents die, such as Mitogen's workers, which run in sessions of their own. A command
of the image build (myriad.provision.node_image) runs in a session of its own, which a
timeout kills whole.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from myriad import runner
from myriad.errors import NodeImageError
from myriad.provision import node_image

# A child that starts a grandchild in a session of its own (as Mitogen starts its workers),
# prints the grandchild's PID, and sleeps.
TREE = """
import subprocess, sys, time
worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"],
                          start_new_session=True)
print(worker.pid, flush=True)
time.sleep(120)
"""
STUBBORN = """
import signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("ready", flush=True)
time.sleep(120)
"""


@pytest.fixture
def tree() -> Iterator[tuple[subprocess.Popen[str], int]]:
    child = subprocess.Popen([sys.executable, "-c", TREE], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    worker = int(child.stdout.readline())
    try:
        yield child, worker
    finally:
        for pid in (worker, child.pid):  # whatever a failing test left
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        child.wait(timeout=10)


def test_the_tree_below_a_process_is_found_sessions_of_their_own_included(
    tree: tuple[subprocess.Popen[str], int],
) -> None:
    child, worker = tree
    assert runner.descendants(child.pid) == [worker]
    assert {child.pid, worker} <= set(runner.descendants(os.getpid()))
    assert os.getsid(worker) != os.getsid(child.pid)  # not reached by killing a group


def test_ending_the_tree_leaves_nothing_running(tree: tuple[subprocess.Popen[str], int]) -> None:
    child, worker = tree
    started = time.monotonic()
    runner.end_processes([worker, child.pid])
    assert time.monotonic() - started < 3  # both go on SIGTERM: no wait for the grace
    assert not runner._alive(worker) and not runner._alive(child.pid)


def test_a_process_that_ignores_sigterm_is_killed_after_the_grace() -> None:
    stubborn = subprocess.Popen([sys.executable, "-c", STUBBORN], stdout=subprocess.PIPE, text=True)
    assert stubborn.stdout is not None and stubborn.stdout.readline() == "ready\n"
    started = time.monotonic()
    runner.end_processes([stubborn.pid], grace_s=0.5)
    assert 0.5 <= time.monotonic() - started < 3  # it outlived the SIGTERM
    assert not runner._alive(stubborn.pid)


def test_a_process_that_is_gone_already_is_passed_over() -> None:
    done = subprocess.Popen([sys.executable, "-c", "pass"])
    taken = psutil.Process(done.pid)  # taken while it lived, as an interrupt takes workers
    done.wait(timeout=10)
    started = time.monotonic()
    runner.end_processes([taken, done.pid, -1])
    assert time.monotonic() - started < 1


def test_a_zombie_is_not_alive_and_a_child_zombie_is_reaped() -> None:
    exited = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 10
    while psutil.Process(exited.pid).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert not runner._alive(exited.pid)
    with pytest.raises(ChildProcessError):
        os.waitpid(exited.pid, os.WNOHANG)  # reaped by _alive


def test_an_interrupt_ends_every_process_started_during_the_run(
    tree: tuple[subprocess.Popen[str], int],
) -> None:
    child, worker = tree
    with runner._interruptible() as stop:
        os.kill(os.getpid(), signal.SIGTERM)  # routed to the run, not ending pytest
        assert stop.requested()
    assert stop.workers is not None and {child.pid, worker} <= {p.pid for p in stop.workers}
    assert not runner._alive(worker) and not runner._alive(child.pid)
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_a_command_past_its_timeout_is_killed_with_what_it_started(tmp_path: Path) -> None:
    """The image build's commands (debootstrap runs dpkg below it): the whole session goes,
    a grandchild whose parent has already exited included."""
    pid_file = tmp_path / "grandchild.pid"
    script = f"(sleep 120 & echo $! > {pid_file}) ; sleep 120"  # the subshell exits at once
    started = time.monotonic()
    with pytest.raises(NodeImageError, match=r"did not finish in 1s"):
        node_image._run(["sh", "-c", script], timeout=1)
    assert time.monotonic() - started < 5
    grandchild = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while runner._alive(grandchild):  # SIGKILLed; init reaps it
        assert time.monotonic() < deadline, "the grandchild outlived the timeout"
        time.sleep(0.05)
