"""`storage.kind: fsx-lustre`: the aws stack's `storage` output becomes the storage_net role's
Lustre mount of `<dns_name>@tcp:/<mount_name>` at the spec's `storage.mount`.

Exercised: reading the output (from a saved `pulumi stack output --json`), checking it against
the spec, the rendered role variables and their validation by the role's argument spec
(ansible-core's validator), and the refusals when the output is missing or malformed. Not
exercised: a real FSx file system, AWS's client repository or a Lustre mount (no AWS here);
the role's FSx tasks are linted by tests/roles/test_lint.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from myriad.cli import main
from myriad.errors import StackOutputsError
from myriad.plan.machines import StackStorage
from myriad.plan.pipeline import plan_loaded
from myriad.provision.resolve import resolve_cluster
from myriad.provision.stack_outputs import parse_storage
from myriad.render.inventory import build_inventory
from myriad.spec import load_spec_text

ROOT = Path(__file__).resolve().parents[2]
AWS_DEV = ROOT / "inventories/aws-dev/cluster.yaml"
FSX_STORAGE = """storage:
  kind: fsx-lustre
  mount: /fsx
  fsx: {capacity_gib: 4800, throughput_mbps_per_tib: 500}
"""
DNS_NAME = "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com"
OUTPUT = {"kind": "fsx-lustre", "dns_name": DNS_NAME, "mount_name": "abcdef01", "mount": "/fsx"}


def fsx_spec(tmp_path: Path) -> tuple[Path, int]:
    """aws-dev with FSx for Lustre storage, and the line of its `kind: fsx-lustre`."""
    text = AWS_DEV.read_text()
    assert "storage:\n  kind: none\n" in text  # aws-dev itself mounts nothing
    text = text.replace("storage:\n  kind: none\n", FSX_STORAGE)
    path = tmp_path / "cluster.yaml"
    path.write_text(text)
    return path, text.splitlines().index("  kind: fsx-lustre") + 1


def saved_outputs(tmp_path: Path, storage: Any = OUTPUT, **more: Any) -> Path:
    document: dict[str, Any] = {"nodes": [], "network": {"vpc_id": "vpc-1"}, **more}
    if storage is not None:
        document["storage"] = storage
    path = tmp_path / "outputs.json"
    path.write_text(json.dumps(document))
    return path


def storage_net_spec() -> dict[str, Any]:
    document = yaml.safe_load((ROOT / "roles/storage_net/meta/argument_specs.yml").read_text())
    options: dict[str, Any] = document["argument_specs"]["main"]["options"]
    return options


def test_stack_storage_becomes_the_lustre_mount(tmp_path: Path) -> None:
    spec, _ = fsx_spec(tmp_path)
    cluster = resolve_cluster(spec, stack_outputs=saved_outputs(tmp_path))
    assert cluster.storage == StackStorage("fsx-lustre", DNS_NAME, "abcdef01", "/fsx")
    everything = cluster.inventory.group_vars["all"]
    mount = {k: v for k, v in everything.items() if k.startswith("storage_net_")}
    assert mount == {
        "storage_net_mount_kind": "lustre",
        "storage_net_mount_path": "/fsx",
        "storage_net_lustre_mgs_nids": f"{DNS_NAME}@tcp",
        "storage_net_lustre_fsname": "abcdef01",
        "storage_net_lustre_source": "fsx",
        "storage_net_lustre_lnet_networks": "",
    }
    # The role's fstab source, from these two variables, is AWS's documented mount source.
    source = f"{mount['storage_net_lustre_mgs_nids']}:/{mount['storage_net_lustre_fsname']}"
    assert source == cluster.storage.source == f"{DNS_NAME}@tcp:/abcdef01"
    # Every one of them is declared by the role and passes its argument spec unchanged.
    options = storage_net_spec()
    result = ArgumentSpecValidator(options).validate(mount, validate_role_argument_spec=True)
    assert result.error_messages == []
    assert {k: result.validated_parameters[k] for k in mount} == mount


def test_render_writes_the_mount_from_saved_outputs(tmp_path: Path) -> None:
    spec, _ = fsx_spec(tmp_path)
    out = tmp_path / "inv"
    outputs = saved_outputs(tmp_path)
    assert main(["render", str(spec), "--out", str(out), "--stack-outputs", str(outputs)]) == 0
    written = yaml.safe_load((out / "group_vars" / "all.yml").read_text())
    assert written["storage_net_lustre_mgs_nids"] == f"{DNS_NAME}@tcp"
    assert written["storage_net_mount_path"] == "/fsx"


def test_without_a_stack_render_points_at_storage_kind(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec, line = fsx_spec(tmp_path)
    assert main(["render", str(spec), "--out", str(tmp_path / "inv")]) == 2
    err = capsys.readouterr().err
    assert f"{spec}:{line}:" in err
    assert "storage.kind" in err and "<dns_name>@tcp:/<mount_name>" in err
    assert "--stack" in err and "Traceback" not in err
    assert not (tmp_path / "inv").exists()
    # `myriad plan` needs no stack: the file system's address is a render-time fact.
    assert main(["plan", str(spec)]) == 0


def test_a_stack_without_storage_output_is_refused(tmp_path: Path) -> None:
    spec, line = fsx_spec(tmp_path)
    outputs = saved_outputs(tmp_path, storage=None)
    with pytest.raises(StackOutputsError) as error:
        resolve_cluster(spec, stack_outputs=outputs)
    assert f"{spec}:{line}:" in str(error.value)
    assert f"{outputs} has no `storage` output" in str(error.value)


def test_render_layer_refuses_fsx_without_the_stack_storage(tmp_path: Path) -> None:
    spec, _ = fsx_spec(tmp_path)
    result = plan_loaded(load_spec_text(spec.read_text(), str(spec)))
    assert result.plan is not None
    with pytest.raises(StackOutputsError, match="--stack-outputs"):
        build_inventory(result.loaded.spec, result.loaded.catalog, result.plan)


@pytest.mark.parametrize(
    ("storage", "message"),
    [
        ("[secret]", "storage is marked secret"),
        (["fs"], "storage: expected an object, not list"),
        ({**OUTPUT, "size": 1}, "unknown keys size"),
        ({"kind": "fsx-lustre", "dns_name": DNS_NAME}, "missing keys mount_name, mount"),
        ({**OUTPUT, "kind": "efs"}, "storage.kind: 'efs' is not one of fsx-lustre"),
        ({**OUTPUT, "dns_name": "fs 1.example"}, "storage.dns_name: expected the file system's"),
        ({**OUTPUT, "dns_name": None}, "storage.dns_name: expected"),
        ({**OUTPUT, "mount_name": "ABC/1"}, "storage.mount_name: expected the FSx mount name"),
        ({**OUTPUT, "mount": "fsx"}, "storage.mount: expected an absolute path"),
    ],
)
def test_malformed_storage_output_is_located(tmp_path: Path, storage: Any, message: str) -> None:
    spec, _ = fsx_spec(tmp_path)
    outputs = saved_outputs(tmp_path, storage=storage)
    with pytest.raises(StackOutputsError) as error:
        resolve_cluster(spec, stack_outputs=outputs)
    assert str(error.value).startswith(f"{outputs}: storage")
    assert message in str(error.value)


def test_storage_output_must_match_the_spec(tmp_path: Path) -> None:
    spec, _ = fsx_spec(tmp_path)
    moved = saved_outputs(tmp_path, storage={**OUTPUT, "mount": "/scratch"})
    with pytest.raises(StackOutputsError, match="'/scratch' in the stack, '/fsx' in the spec"):
        resolve_cluster(spec, stack_outputs=moved)
    # aws-dev mounts nothing: a stack that made a file system disagrees with it.
    with pytest.raises(StackOutputsError, match=r"spec.s storage\.kind is none"):
        resolve_cluster(AWS_DEV, stack_outputs=saved_outputs(tmp_path))


def test_no_storage_output_is_none_and_aws_dev_renders_without_it(tmp_path: Path) -> None:
    assert parse_storage({"nodes": []}) is None
    cluster = resolve_cluster(AWS_DEV, stack_outputs=saved_outputs(tmp_path, storage=None))
    assert cluster.storage is None
    assert cluster.inventory.group_vars["all"]["storage_net_mount_kind"] == "none"
