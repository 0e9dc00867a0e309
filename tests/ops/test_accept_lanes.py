"""Per-node steps side by side: `SlurmCommands.run_lanes` runs each node's steps in order,
the nodes at once, through one shell on the controller (here this machine: an empty
prefix). Stand-in: `srun` is a script on PATH that records when each step began and ended
and prints what it was asked; the shell, timeout(1), the scratch files and the read-back
are the real ones."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from myriad.ops.accept_cluster import SlurmCommands, lanes_script, read_lanes
from myriad.ops.slurm import Completed, Slurm

FAKE_SRUN = """#!/bin/sh
# srun stand-in: $1 the node, $2 seconds to take, $3 the exit status.
echo "start $1 $(date +%s.%N)" >>"$LOG"
sleep "$2"
printf 'out of %s\\nno newline at the end' "$1"
echo "err of $1" >&2
echo "end $1 $(date +%s.%N)" >>"$LOG"
exit "$3"
"""


@pytest.fixture
def commands(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SlurmCommands:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    srun = bin_dir / "srun"
    srun.write_text(FAKE_SRUN)
    srun.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("LOG", str(tmp_path / "log"))
    slurm = Slurm([], run=lambda argv: Completed(0, "", ""))
    return SlurmCommands([], slurm, step_timeout_s=30)


def _intervals(log: Path) -> dict[str, tuple[float, float]]:
    begun: dict[str, float] = {}
    spans: dict[str, tuple[float, float]] = {}
    for line in log.read_text().splitlines():
        what, name, at = line.split()
        if what == "start":
            begun[name] = float(at)
        else:
            spans[name] = (begun[name], float(at))
    return spans


def test_lanes_overlap_and_each_lanes_steps_follow_one_another(
    commands: SlurmCommands, tmp_path: Path
) -> None:
    lanes = [[["srun", f"n{i}a", "0.6", "0"], ["srun", f"n{i}b", "0.6", str(i)]] for i in range(3)]
    answers = commands.run_lanes(lanes)
    # Status 0: stdout alone; status i > 0: stderr after it, as `run` answers.
    assert answers == [
        [
            (0, f"out of n{i}a\nno newline at the end"),
            (i, f"out of n{i}b\nno newline at the end" + (f"err of n{i}b\n" if i else "")),
        ]
        for i in range(3)
    ]
    spans = _intervals(tmp_path / "log")
    # Each lane in order: its second step begins after its first ended.
    for i in range(3):
        assert spans[f"n{i}b"][0] >= spans[f"n{i}a"][1]
    # The lanes at once: the latest of the three first steps began before the earliest of
    # them ended (each takes 0.6 s; run one after another they would not meet).
    firsts = [spans[f"n{i}a"] for i in range(3)]
    assert max(start for start, _ in firsts) < min(end for _, end in firsts)
    # 3 lanes x 2 steps x 0.6 s is 3.6 s in a row; side by side the run spans about 1.2 s.
    assert max(e for _, e in spans.values()) - min(s for s, _ in spans.values()) < 3.0


def test_a_step_past_its_limit_reads_as_timed_out(commands: SlurmCommands) -> None:
    slow = SlurmCommands([], commands.slurm, step_timeout_s=1)
    answers = slow.run_lanes([[["srun", "n1", "5", "0"]], [["srun", "n2", "0", "0"]]])
    assert answers[0][0][0] == 124  # timeout(1)'s status
    assert answers[1] == [(0, "out of n2\nno newline at the end")]


def test_damaged_records_read_as_none() -> None:
    lanes = [[["srun", "a"]], [["srun", "b"]]]
    whole = b"myriad-step 0.0 0 2 0\nokmyriad-step 1.0 3 1 2\nxe\n"
    assert read_lanes(whole, lanes) == [[(0, "ok")], [(3, "xe\n")]]
    assert read_lanes(whole[:-4], lanes) is None  # cut inside the last output
    assert read_lanes(whole.replace(b"1.0", b"1.1"), lanes) is None  # another step's record
    assert read_lanes(b"", lanes) is None


def test_the_script_quotes_each_argument() -> None:
    script = lanes_script([[["srun", "--nodelist=n1", "x; rm -rf /"]]], 60.5)
    assert "timeout 60 srun --nodelist=n1 'x; rm -rf /' </dev/null" in script
