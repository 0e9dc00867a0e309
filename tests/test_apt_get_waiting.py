"""scripts/apt-get-waiting: bootstrap and CI wait, bounded, for another apt process's lock.

The real apt-get is replaced by a stand-in on PATH that answers as apt 2.6 does when
/var/lib/apt/lists/lock is held (exit 100, "E: Could not get lock ..."), so the test never
touches this machine's package database."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "apt-get-waiting"
LOCKED = (
    "E: Could not get lock /var/lib/apt/lists/lock. It is held by process 4242 (apt-get)\n"
    "E: Unable to lock directory /var/lib/apt/lists/\n"
)


def _fake_apt(tmp_path: Path, locked_runs: int, final_rc: int = 0) -> Path:
    """An apt-get that reports the lock held `locked_runs` times, then exits `final_rc`."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    counter = tmp_path / "runs"
    counter.write_text("0")
    fake = bin_dir / "apt-get"
    fake.write_text(
        "#!/usr/bin/env bash\n"
        f'n=$(( $(cat {counter}) + 1 )); echo "$n" > {counter}\n'
        f'echo "$*" >> {tmp_path / "args"}\n'
        f'if [ "$n" -le {locked_runs} ]; then printf %s "{LOCKED}" >&2; exit 100; fi\n'
        f'[ {final_rc} -ne 0 ] && echo "E: Unable to locate package nosuch" >&2\n'
        f"exit {final_rc}\n"
    )
    fake.chmod(0o755)
    return bin_dir


def _run(bin_dir: Path, wait_s: int) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    env["APT_LOCK_WAIT_S"], env["APT_LOCK_RETRY_S"] = str(wait_s), "0.2"
    return subprocess.run(
        [str(SCRIPT), "update", "-qq"], env=env, capture_output=True, text=True, timeout=60
    )


def test_a_held_lock_is_waited_for_then_the_command_runs(tmp_path: Path) -> None:
    result = _run(_fake_apt(tmp_path, locked_runs=1), wait_s=30)
    assert result.returncode == 0
    assert "holds the lock; retrying" in result.stderr
    assert (tmp_path / "runs").read_text().strip() == "2"
    # dpkg's own lock wait is asked for as well (apt-get install honours it).
    assert "-o DPkg::Lock::Timeout=30 update -qq" in (tmp_path / "args").read_text()


def test_the_wait_is_bounded(tmp_path: Path) -> None:
    result = _run(_fake_apt(tmp_path, locked_runs=1000), wait_s=1)
    assert result.returncode == 100
    assert "held its lock for 1 s; giving up" in result.stderr


def test_another_failure_is_not_retried(tmp_path: Path) -> None:
    result = _run(_fake_apt(tmp_path, locked_runs=0, final_rc=100), wait_s=30)
    assert result.returncode == 100
    assert (tmp_path / "runs").read_text().strip() == "1"
    assert "retrying" not in result.stderr


def test_bootstrap_and_ci_install_through_it() -> None:
    for script in (ROOT / "scripts" / "bootstrap", ROOT / ".ci" / "docker.sh"):
        lines = [line for line in script.read_text().splitlines() if "apt-get" in line]
        calls = [line for line in lines if not line.lstrip().startswith(("#", "die", "echo"))]
        assert calls, script
        assert all("apt-get-waiting" in line or "apt_get" in line for line in calls), calls
