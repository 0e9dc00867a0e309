"""`myriad image build` for AWS: the kit Image Builder applies, written once per content hash
and read back by the stack (no AWS, no Docker: the kit is a file)."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest
import yaml

from myriad.cli import main
from myriad.spec import load_spec
from stacks.aws_images import load_kits

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "inventories" / "aws-dev" / "cluster.yaml"


def test_the_kit_carries_ansible_the_roles_and_a_local_build_inventory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MYRIAD_STATE_DIR", str(tmp_path))
    monkeypatch.setenv("COLUMNS", "200")
    spec = tmp_path / "aws-dev.yaml"
    spec.write_text(SPEC.read_text() + "bringup: {mode: image}\n")
    assert main(["image", "build", str(spec), "--profile", "p5-node"]) == 0
    assert "built" in capsys.readouterr().out
    images = tmp_path / "aws-dev" / "images"
    kits = load_kits(load_spec(spec).spec, images)
    assert list(kits) == ["p5-node"]
    kit = kits["p5-node"].kit
    assert kit is not None
    with tarfile.open(images / kit.file) as archive:
        names = set(archive.getnames())
        hosts = archive.extractfile("opt/myriad/image-build/hosts.yml")
        assert hosts is not None
        build_hosts = yaml.safe_load(hosts.read())
    assert {
        "opt/myriad/playbooks/image.yml",
        "opt/myriad/playbooks/site.yml",
        "opt/myriad/roles/slurm/tasks/main.yml",
        "opt/myriad/lib/ansible/cli/playbook.py",
        "usr/local/sbin/myriad-converge",
        "etc/systemd/system/myriad-converge.service",
    } <= names
    assert "image-build" in build_hosts["all"]["children"]["compute"]["hosts"]
    build_vars = (tmp_path / "aws-dev" / "runs").glob("*-image-p5-node/build-inventory")
    [folder] = list(build_vars)
    host = yaml.safe_load((folder / "host_vars" / "image-build.json").read_text())
    assert host["ansible_connection"] == "local" and host["myriad_image_build"] is True
    # Nothing changed: the same kit, not written again.
    assert main(["image", "build", str(spec), "--profile", "p5-node"]) == 0
    assert "current, not rebuilt" in capsys.readouterr().out
    assert len(list(images.glob("*.kit.tar.gz"))) == 1


def test_a_profile_no_pool_uses_is_refused_naming_those_in_use(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MYRIAD_STATE_DIR", str(tmp_path))
    assert main(["image", "build", str(SPEC), "--profile", "p4-node"]) == 2
    assert "profiles in use: head, p5-node" in capsys.readouterr().err
    assert not (tmp_path / "aws-dev" / "images").exists()
