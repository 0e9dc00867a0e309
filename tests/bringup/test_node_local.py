"""Image mode's converge: the node-side program against a stand-in Ansible, and the
controller's folding of nodes' results into the runner's RunResult."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
import tarfile
import textwrap
from pathlib import Path
from typing import Any

import pytest

from myriad.bringup.flow import ClusterState
from myriad.bringup.node_local import (
    NodeResult,
    Transport,
    adopt_live_munge_key,
    archive_digest,
    converge_nodes,
    fold,
    munge_key,
    munge_key_host,
)
from myriad.node import converge
from myriad.render.inventory import Inventory

PROGRAM = Path(converge.__file__)


def fake_ansible(home: Path, report: dict[str, object], code: int = 0) -> None:
    """`python -m ansible.cli.playbook` that prints the json callback's document."""
    cli = home / "lib" / "ansible" / "cli"
    cli.mkdir(parents=True)
    (home / "lib" / "ansible" / "__init__.py").write_text("")
    (cli / "__init__.py").write_text("")
    (cli / "playbook.py").write_text(
        textwrap.dedent(
            f"""
            import json, os, sys
            print("[WARNING]: a warning before the document", file=sys.stderr)
            assert os.environ["ANSIBLE_STDOUT_CALLBACK"] == "ansible.posix.json"
            assert "-i" in sys.argv and sys.argv[-1] == "@" + {str(home)!r} + "/seed/extravars.json"
            print(json.dumps({report!r}))
            sys.exit({code})
            """
        )
    )


def seed(home: Path) -> Path:
    folder = home / "seed"
    (folder / "inventory").mkdir(parents=True)
    (folder / "inventory" / "hosts.yml").write_text("all: {}\n")
    (folder / "seed.json").write_text(json.dumps({"node": "node07", "digest": "d1"}))
    return folder


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path


def test_a_clean_play_reports_its_counts_seed_and_cpu(home: Path) -> None:
    stats = {"node07": {"ok": 40, "changed": 0, "failures": 0, "unreachable": 0, "skipped": 9}}
    fake_ansible(home, {"plays": [], "stats": stats})
    seed(home)
    (home / "seed" / "run.id").write_text("r1\n")
    code, result = run_program_with_extra(home)
    assert code == 0
    assert result["status"] == "successful" and result["seed_digest"] == "d1"
    assert result["run"] == "r1"
    assert result["stats"] == stats["node07"]
    assert result["failures"] == []
    assert isinstance(result["cpu_seconds"], float) and result["cpu_seconds"] >= 0


def test_a_failed_task_comes_back_with_its_name_and_message(home: Path) -> None:
    failed = {"failed": True, "msg": "No package matching 'slurmd' is available"}
    report = {
        "plays": [{"tasks": [{"task": {"name": "slurm : Install"}, "hosts": {"node07": failed}}]}],
        "stats": {"node07": {"ok": 3, "changed": 1, "failures": 1, "unreachable": 0}},
    }
    fake_ansible(home, report, code=2)
    seed(home)
    code, result = run_program_with_extra(home)
    assert code == 1 and result["status"] == "failed"
    assert result["failures"] == [
        {"task": "slurm : Install", "message": failed["msg"], "unreachable": False}
    ]


def test_no_seed_is_a_failure_that_says_where_it_looked(home: Path) -> None:
    fake_ansible(home, {})
    result = home / "r.json"
    done = subprocess.run(
        [sys.executable, str(PROGRAM), "--home", str(home), "--seed", str(home / "none"),
         "--result", str(result)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert "no seed at" in json.loads(result.read_text())["failures"][0]["message"]


def run_program_with_extra(home: Path) -> tuple[int, dict[str, object]]:
    # myriad.node.converge passes `-e @<seed>/extravars.json` last when it exists.
    (home / "seed" / "extravars.json").write_text("{}")
    result = home / "out" / "result.json"
    done = subprocess.run(
        [sys.executable, str(PROGRAM), "--home", str(home), "--seed", str(home / "seed"),
         "--result", str(result)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    return done.returncode, json.loads(result.read_text())


def seed_archive_with(digest: str) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        data = json.dumps({"node": "n", "digest": digest}).encode()
        info = tarfile.TarInfo("seed.json")
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def seeds_on_disk(folder: Path, archives: dict[str, bytes]) -> dict[str, Path]:
    """As write_seeds leaves them: one file per node."""
    folder.mkdir(exist_ok=True)
    for node, archive in archives.items():
        (folder / f"{node}.tar.gz").write_bytes(archive)
    return {node: folder / f"{node}.tar.gz" for node in archives}


def test_results_fold_into_the_runners_result(tmp_path: Path) -> None:
    archives = {n: seed_archive_with(f"seed-{n}") for n in ("n1", "n2", "n3", "n4")}
    assert archive_digest(archives["n2"]) == "seed-n2"
    replies = {
        "n1": {"status": "successful", "seed_digest": "seed-n1", "cpu_seconds": 5.0,
               "stats": {"ok": 50, "changed": 0, "failures": 0, "unreachable": 0}},
        "n2": {"status": "failed", "seed_digest": "seed-n2",
               "stats": {"ok": 20, "changed": 2, "failures": 1, "unreachable": 0},
               "failures": [{"task": "slurm : Start slurmd", "message": "exit 1\nmore"}]},
        # A result of an earlier seed: the unit never ran this one.
        "n3": {"status": "successful", "seed_digest": "seed-old", "stats": {}},
    }  # fmt: skip

    def transport(node: str, script: str, stdin: bytes, timeout: float) -> tuple[int, str, str]:
        run = re.match(r"MYRIAD_RUN=([0-9a-f]{32}); ", script)
        assert run is not None and stdin == archives[node]
        if node == "n4":
            return 1, "", "Error response from daemon: container is paused"
        # n1 answers for an earlier run of the same seed first: that result is not this run's.
        return 0, json.dumps({**replies[node], "run": run[1]}), ""

    outcome = converge_nodes(
        seeds_on_disk(tmp_path / "seeds", archives), transport, tmp_path, timeout_s=60
    )
    assert outcome.status == "failed"
    assert outcome.stats["n1"] == {"ok": 50, "changed": 0, "failures": 0, "dark": 0}
    failures = {f.host: f for f in outcome.failures}
    assert set(failures) == {"n2", "n3", "n4"}
    assert (failures["n2"].task, failures["n2"].message) == ("slurm : Start slurmd", "exit 1")
    assert "did not run this seed" in failures["n3"].message and failures["n3"].unreachable
    assert "container is paused" in failures["n4"].message and failures["n4"].unreachable
    assert outcome.changed_hosts == ("n2",)
    assert json.loads((tmp_path / "results.json").read_text())["n1"]["cpu_seconds"] == 5.0


def test_a_clean_fold_is_successful() -> None:
    ok = {"status": "successful", "stats": {"ok": 1, "changed": 1, "unreachable": 0}}
    outcome = fold([NodeResult("a", ok)], Path("/x"), 1.0)
    assert outcome.ok and outcome.changed_hosts == ("a",)


def test_the_munge_key_is_made_once_and_kept_private(tmp_path: Path) -> None:
    state = ClusterState(tmp_path / "c")
    key = munge_key(state)
    assert len(key) == 1024 and munge_key(state) == key
    assert (tmp_path / "c" / "secrets" / "munge.key").stat().st_mode & 0o777 == 0o600


def test_a_result_of_an_earlier_run_of_the_same_seed_is_not_taken(tmp_path: Path) -> None:
    archives = {"n1": seed_archive_with("same")}
    earlier = {"status": "successful", "seed_digest": "same", "run": "0" * 32, "stats": {}}

    def transport(node: str, script: str, stdin: bytes, timeout: float) -> tuple[int, str, str]:
        return 0, json.dumps(earlier), ""

    outcome = converge_nodes(
        seeds_on_disk(tmp_path / "seeds", archives), transport, tmp_path, timeout_s=60
    )
    assert [f.host for f in outcome.failures] == ["n1"]
    assert "did not run this seed" in outcome.failures[0].message


def _key_host_answers(code: int, out: str) -> tuple[list[str], Transport]:
    asked: list[str] = []

    def transport(node: str, script: str, stdin: bytes, timeout: float) -> tuple[int, str, str]:
        asked.append(f"{node}: {script}")
        return code, out, "" if code == 0 else "base64: /etc/munge/munge.key: No such file"

    return asked, transport


def test_a_rotated_key_on_the_key_host_becomes_the_kept_copy(tmp_path: Path) -> None:
    """After playbooks/slurm-munge-rotate.yml the nodes hold a new key: seeds made from the
    older kept copy would put the replaced key back on every node they converge."""
    import base64

    state = ClusterState(tmp_path / "c")
    old = munge_key(state)
    rotated = bytes(range(256)) * 4
    asked, transport = _key_host_answers(0, base64.b64encode(rotated).decode() + "\n")
    assert adopt_live_munge_key(state, transport, "ctl01") is True
    assert asked == ["ctl01: base64 -w0 /etc/munge/munge.key"]
    assert munge_key(state) == rotated != old
    assert (tmp_path / "c" / "secrets" / "munge.key").stat().st_mode & 0o777 == 0o600
    assert adopt_live_munge_key(state, transport, "ctl01") is False


@pytest.mark.parametrize(
    ("code", "out"),
    [(1, ""), (0, "not base64!"), (0, "c2hvcnQ=")],
    ids=["no-key-yet", "garbled", "too-short-for-munge"],
)
def test_a_key_host_without_a_readable_key_leaves_the_kept_copy(
    tmp_path: Path, code: int, out: str
) -> None:
    state = ClusterState(tmp_path / "c")
    kept = munge_key(state)
    _asked, transport = _key_host_answers(code, out)
    assert adopt_live_munge_key(state, transport, "ctl01") is False
    assert munge_key(state) == kept


def test_the_key_host_is_the_slurm_roles(tmp_path: Path) -> None:
    def inventory(everyone: dict[str, Any]) -> Inventory:
        return Inventory(cluster="c", groups={}, group_vars={"all": everyone}, host_vars={})

    controllers = [{"name": "ctl01", "address": "10.0.0.1"}, {"name": "ctl02", "address": "x"}]
    assert munge_key_host(inventory({"slurm_controllers": controllers})) == "ctl01"
    chosen = {"slurm_controllers": controllers, "slurm_munge_key_host": "login01"}
    assert munge_key_host(inventory(chosen)) == "login01"
    assert munge_key_host(inventory({})) is None
