"""`myriad init`: a first spec from a few choices that plans with no error, or nothing written.

Every GPU with a server layout in the catalog x fabric x OS x scheduler x a range of sizes is
scaffolded and planned; each either plans clean or is one the plan refuses (and then init says
why and writes nothing)."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from myriad.cli import main
from myriad.plan.pipeline import plan_loaded
from myriad.spec.loader import load_spec, load_spec_text, shipped_catalog
from myriad.spec.scaffold import (
    FABRICS,
    ORCHESTRATORS,
    OS_CHOICES,
    Choices,
    ask_missing,
    default_name,
    gpu_models,
    scaffold,
)

CATALOG = shipped_catalog()
MATRIX = list(
    itertools.product(gpu_models(CATALOG), FABRICS, OS_CHOICES, ORCHESTRATORS, (1, 64, 600))
)


def _errors(choices: Choices) -> list[str]:
    result = plan_loaded(load_spec_text(scaffold(choices, CATALOG), "cluster.yaml"))
    return [f.id for f in result.findings if f.severity == "error"]


def test_every_combination_plans_clean_but_the_ones_the_os_cannot_run() -> None:
    refused = set()
    for gpu, fabric, os, orchestrator, nodes in MATRIX:
        errors = _errors(
            Choices(gpu=gpu, fabric=fabric, os=os, orchestrator=orchestrator, nodes=nodes)
        )
        if errors:
            refused.add((os, orchestrator, tuple(errors)))
    # Ubuntu 22.04's Slurm 21.08 has no cgroup/v2 (the OS capability table); nothing else fails.
    assert refused == {("ubuntu-22.04", "slurm", ("slurm-os-cgroup",))}


def test_figures_come_from_the_catalogs_server_layout() -> None:
    text = scaffold(Choices(gpu="A800-SXM4-80GB", nodes=16, fabric="roce"), CATALOG)
    spec = load_spec_text(text, "cluster.yaml").spec
    profile = spec.profiles["gpu-node"]
    assert profile.server == "A800-8GPU-4NIC"
    assert profile.nics.compute is not None
    assert (profile.nics.compute.model, profile.nics.compute.count) == ("ConnectX-6", 4)
    assert spec.network.topology.switch == "SN5600-200G"  # 200 Gb/s NICs, 200 GbE leaves


def test_the_storage_server_is_not_a_nodes_address() -> None:
    # Node addresses start at the 10th of each network (plan/addresses.py).
    spec = load_spec_text(scaffold(Choices(nodes=200), CATALOG), "cluster.yaml").spec
    assert spec.storage.server == "10.20.0.2"
    assert spec.network.addressing.storage == "10.20.0.0/24"


def test_init_writes_a_spec_that_plans(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "lab" / "cluster.yaml"
    target.parent.mkdir()
    assert main(["init", str(target), "--nodes", "8", "--yes"]) == 0
    assert f"wrote {target}: 8 GPU nodes, 64 GPUs" in capsys.readouterr().out
    assert load_spec(target).spec.metadata.name == "lab"
    assert main(["plan", str(target)]) == 0


def test_init_never_overwrites(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "cluster.yaml"
    target.write_text("mine\n")
    assert main(["init", str(target), "--yes"]) == 2
    assert "exists: name a new file" in capsys.readouterr().err
    assert target.read_text() == "mine\n"


def test_choices_that_do_not_plan_write_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "cluster.yaml"
    assert main(["init", str(target), "--os", "ubuntu-22.04", "--yes"]) == 2
    err = capsys.readouterr().err
    assert "these choices do not plan, nothing written" in err
    assert "slurm-os-cgroup" in err
    assert not target.exists()


def test_an_unknown_gpu_suggests_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["init", str(tmp_path / "c.yaml"), "--gpu", "H200", "--yes"]) == 2
    assert "did you mean 'H200-SXM-141GB'?" in capsys.readouterr().err


def test_missing_choices_are_asked_with_their_defaults() -> None:
    questions: list[str] = []
    replies = iter(["", "16", "roce", "", ""])

    def ask(question: str) -> str:
        questions.append(question)
        return next(replies)

    given = {"name": "lab", "gpu": None, "nodes": None, "fabric": None, "os": None}
    answers = ask_missing({**given, "orchestrator": "kubernetes"}, ["H100-SXM5-80GB"], ask)
    assert answers == {**given, "nodes": 16, "fabric": "roce", "orchestrator": "kubernetes"}
    assert questions[0] == "GPU model, one of H100-SXM5-80GB [H100-SXM5-80GB]: "
    assert len(questions) == 4  # the scheduler was given


def test_the_default_name_is_the_folders() -> None:
    assert default_name(Path("inventories/lab-a/cluster.yaml")) == "lab-a"
    assert default_name(Path("/tmp/Weird_Name/cluster.yaml")) == "my-cluster"
