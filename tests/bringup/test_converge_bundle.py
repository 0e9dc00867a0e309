"""What a baked image carries to converge itself: the bundle under /opt/myriad."""

from __future__ import annotations

import io
import re
import shutil
import tarfile
from pathlib import Path

import pytest

from myriad.bringup.images import image_variables
from myriad.node import artefact
from myriad.provision import converge_bundle

ROOT = Path(__file__).resolve().parents[2]
FQCN = re.compile(r"^\s*-?\s*(?:[a-z_]+: )?([a-z_]+)\.([a-z_]+)\.[a-z_]+:\s*$", re.MULTILINE)


def test_every_collection_a_role_names_is_in_the_bundle() -> None:
    """The node's ansible-playbook loads every role of site.yml when it starts, also those no
    node of the image runs: a module of a missing collection stops the play on every node."""
    used = set()
    for path in [*ROOT.glob("roles/*/tasks/*.yml"), *ROOT.glob("roles/*/handlers/*.yml")]:
        for namespace, name in FQCN.findall(path.read_text()):
            if namespace != "ansible" or name != "builtin":
                used.add(f"ansible_collections/{namespace}/{name}")
    assert used, "no collection found: the pattern no longer matches the roles"
    assert used <= set(converge_bundle.LIBRARY), used - set(converge_bundle.LIBRARY)


def test_the_bundle_holds_ansible_its_metadata_the_project_and_the_converge_unit() -> None:
    buffer = io.BytesIO()
    converge_bundle.write_bundle(buffer)
    buffer.seek(0)
    with tarfile.open(fileobj=buffer) as archive:
        names = set(archive.getnames())
        program = archive.getmember("usr/local/sbin/myriad-converge")
        wrapper = archive.extractfile(program)
        shipped = archive.extractfile("opt/myriad/myriad-node.pyz")
        assert wrapper is not None and shipped is not None
        wrapper_text, shipped_bytes = wrapper.read().decode(), shipped.read()
    assert {
        "opt/myriad/lib/ansible/cli/playbook.py",
        "opt/myriad/playbooks/site.yml",
        "opt/myriad/roles/slurm/tasks/main.yml",
        "etc/systemd/system/myriad-converge.service",
    } <= names
    # ansible-core asks importlib.metadata for its dependencies' versions when it starts.
    assert any(n.startswith("opt/myriad/lib/jinja2-") and ".dist-info/" in n for n in names)
    assert not any("__pycache__" in n or "/molecule/" in n for n in names)
    assert program.mode == 0o755
    # The node's code is the one artefact the health role and the facts playbook ship too,
    # and myriad-converge runs from it; no source tree comes along.
    assert shipped_bytes == artefact.build()
    assert not any(n.startswith("opt/myriad/src/") for n in names)
    assert "/opt/myriad/myriad-node.pyz converge" in wrapper_text


def test_a_change_to_the_node_package_changes_the_bundle_digest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    before = converge_bundle.bundle_digest()
    monkeypatch.setattr(artefact, "build", lambda node_dir=None: b"other node code")
    assert converge_bundle.bundle_digest() != before


def test_a_role_change_changes_the_bundle_digest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for folder in ("roles", "playbooks"):
        shutil.copytree(ROOT / folder, tmp_path / folder)
    monkeypatch.setenv("MYRIAD_HOME", str(tmp_path))
    before = converge_bundle.bundle_digest()
    assert converge_bundle.bundle_digest() == before
    defaults = tmp_path / "roles" / "common" / "defaults" / "main.yml"
    defaults.write_text(defaults.read_text() + "# a comment is a change too\n")
    assert converge_bundle.bundle_digest() != before


def test_the_image_reads_the_variables_its_steps_declare_and_no_table() -> None:
    variables = image_variables()
    assert {"common_packages_extra", "container_runtime_engine", "myriad_gpu"} <= variables
    assert "monitoring_enabled" in variables  # the layer sort reads it
    assert not {"common_hosts", "slurm_nodes", "myriad_image", "nccl_conf_overrides"} & variables
