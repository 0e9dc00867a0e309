"""The node package as one file (myriad.node.artefact): the same tree gives the same bytes,
it holds every module of the package and nothing else, and it runs on the standard library
alone, as the health role, the facts playbook, myriad-converge and the rdma role run it."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from myriad.node import artefact

SRC = Path(__file__).resolve().parents[2] / "src"


def copy_of_the_package(tmp_path: Path) -> Path:
    """src/myriad/__init__.py and src/myriad/node, copied: a second checkout of the tree."""
    root = tmp_path / "myriad"
    shutil.copytree(SRC / "myriad" / "node", root / "node")
    shutil.copy(SRC / "myriad" / "__init__.py", root / "__init__.py")
    return root / "node"


def test_the_same_tree_gives_the_same_bytes(tmp_path: Path) -> None:
    first = artefact.build()
    assert artefact.build() == first
    # Another checkout: other times on every file, compiled files beside the sources.
    node = copy_of_the_package(tmp_path)
    for path in node.parent.rglob("*"):
        os.utime(path, (1_700_000_000, 1_700_000_000))
    (node / "__pycache__").mkdir(exist_ok=True)
    (node / "__pycache__" / "facts.cpython-311.pyc").write_bytes(b"compiled")
    assert artefact.build(node) == first
    assert artefact.digest(artefact.build(node)) == artefact.digest()


def test_a_changed_module_changes_the_bytes(tmp_path: Path) -> None:
    node = copy_of_the_package(tmp_path)
    facts = node / "facts" / "read.py"
    facts.write_text(facts.read_text(encoding="utf-8") + "\n# changed\n", encoding="utf-8")
    assert artefact.build(node) != artefact.build()


def test_it_holds_every_module_of_the_package_sorted_with_fixed_times_and_modes() -> None:
    with zipfile.ZipFile(io.BytesIO(artefact.build())) as archive:
        infos = archive.infolist()
    names = [info.filename for info in infos]
    node = SRC / "myriad" / "node"
    modules = {
        f"myriad/node/{p.relative_to(node).as_posix()}"
        for p in node.rglob("*.py")
        if "__pycache__" not in p.parts
    }
    assert set(names) == {"__main__.py", "myriad/__init__.py", *modules}
    assert names[1:] == sorted(names[1:])
    assert {info.date_time for info in infos} == {artefact.EPOCH}
    assert {info.external_attr >> 16 for info in infos} == {artefact.MODE}
    assert not any(name.startswith(("myriad/validate", "myriad/spec")) for name in names)


def test_write_puts_the_bytes_in_place_whole(tmp_path: Path) -> None:
    dest = artefact.write(tmp_path / "health" / artefact.NAME)
    assert dest.read_bytes() == artefact.build()
    assert dest.stat().st_mode & 0o777 == artefact.MODE
    assert [p.name for p in dest.parent.iterdir()] == [artefact.NAME]


def _run(program: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # As the nodes run it: no site-packages, no environment, no current folder on the path.
    return subprocess.run(
        [sys.executable, "-I", "-S", str(program), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=program.parent,
        env={"PATH": "/usr/bin:/bin"},
    )


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return artefact.write(tmp_path_factory.mktemp("artefact") / artefact.NAME)


def test_gather_runs_from_it_and_prints_the_document(program: Path) -> None:
    done = _run(program, "gather", "--controller", "none", "--timeout", "5")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert document["args"]["controller"] == "none"
    assert document["probes"], "no probe ran"


def test_health_runs_from_it_and_says_it_cannot_judge_without_its_document(
    program: Path, tmp_path: Path
) -> None:
    done = _run(program, "health", "--config", str(tmp_path / "missing.json"))
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stdout.startswith("myriad-health: cannot judge:")


def test_an_unknown_command_is_refused_with_the_commands(program: Path) -> None:
    done = _run(program, "validate")
    assert done.returncode == 2
    assert "unknown command 'validate'" in done.stderr
    assert "gather, health, converge" in done.stderr


def test_hardware_runs_from_it_as_the_rdma_role_runs_it(program: Path, tmp_path: Path) -> None:
    # The rdma role's three calls (check, rules, map) on the DGX H100 tree: discovery is a
    # command of the one artefact, not a package copied file by file.
    from myriad.node.hardware.tree import materialise

    sysfs = tmp_path / "sys"
    tree = SRC.parent / "tests/samples/sysfs-tree/dgx-h100_table6_constructed.tree"
    materialise(tree.read_text(encoding="utf-8"), str(sysfs))
    expect = tmp_path / "expect.json"
    expect.write_text(json.dumps({"gpus": 8, "compute": {"count": 8}}), encoding="utf-8")
    common = ["--sysfs", str(sysfs), "--expect", str(expect), "--pinned"]
    check = _run(program, "hardware", "check", *common)
    assert check.returncode == 0, check.stdout + check.stderr
    rules = _run(program, "hardware", "rules", "--sysfs", str(sysfs))
    assert rules.returncode == 0, rules.stderr
    assert 'KERNELS=="0000:c0:00.0", PROGRAM="rdma_rename %k NAME_FIXED mlx5_9"' in rules.stdout
    mapped = _run(program, "hardware", "map", *common)
    assert mapped.returncode == 0, mapped.stderr
    assert len(json.loads(mapped.stdout)["assignment"]["compute"]) == 8
