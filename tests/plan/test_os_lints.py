"""`myriad plan` against the OS capability table: Slurm's cgroup plugin on each software.os.

Ubuntu 22.04 ships Slurm 21.08.5, which has no cgroup/v2 plugin (SchedMD tag slurm-21-08-5-1),
and boots the unified hierarchy: slurmd cannot start there unless the nodes boot the legacy one.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from myriad.plan.lints import Finding
from myriad.plan.pipeline import plan_loaded
from myriad.spec import LoadedSpec, SpecError, load_spec_text

ROOT = Path(__file__).resolve().parents[2]
STARTER = (ROOT / "inventories" / "starter-64" / "cluster.yaml").read_text()


def _starter(*changes: tuple[str, str]) -> str:
    text = STARTER
    for old, new in changes:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    return text


def _findings(text: str, prefix: str = "slurm-") -> list[Finding]:
    loaded: LoadedSpec = load_spec_text(text, file="cluster.yaml")
    return [f for f in plan_loaded(loaded).findings if f.id.startswith(prefix)]


JAMMY = ("  os: ubuntu-24.04", "  os: ubuntu-22.04")
LEGACY = ("    no_containers: true\n", "    no_containers: true\n    legacy_cgroup: true\n")


def test_slurm_on_ubuntu_22_04_is_refused_at_the_os_line() -> None:
    text = _starter(JAMMY)
    [finding] = _findings(text, "slurm-os-cgroup")
    assert finding.severity == "error"
    assert "Slurm 21.08.5 has no cgroup/v2 plugin" in finding.message
    assert "ubuntu-24.04" in finding.suggestion and "legacy_cgroup" in finding.suggestion
    assert finding.path == ("software", "os")
    line = next(i for i, t in enumerate(text.splitlines(), 1) if t.startswith("  os: ubuntu-22"))
    assert finding.location(load_spec_text(text, file="cluster.yaml")) == f"cluster.yaml:{line}:3"


def test_the_legacy_hierarchy_is_an_explicit_warned_choice() -> None:
    found = _findings(_starter(JAMMY, LEGACY))
    assert [(f.id, f.severity) for f in found] == [("slurm-legacy-cgroup", "warning")]
    assert "systemd.unified_cgroup_hierarchy=0" in found[0].message


@pytest.mark.parametrize("os_name", ["ubuntu-24.04", "debian-12"])
def test_an_os_whose_slurm_has_cgroup_v2_needs_no_choice(os_name: str) -> None:
    text = _starter(("  os: ubuntu-24.04", f"  os: {os_name}"))
    assert _findings(text) == []
    # Asking for the legacy hierarchy there would reboot nodes for nothing.
    [finding] = _findings(_starter(("  os: ubuntu-24.04", f"  os: {os_name}"), LEGACY))
    assert (finding.id, finding.severity) == ("slurm-legacy-cgroup", "warning")


def test_kubernetes_clusters_are_not_judged_by_slurm() -> None:
    text = (ROOT / "inventories" / "h100-100k" / "cluster.yaml").read_text()
    text = text.replace("  os: ubuntu-24.04\n", "  os: ubuntu-22.04\n", 1)
    assert _findings(text, "slurm-os") == []


def test_containers_and_no_containers_together_are_refused() -> None:
    checksum = "sha256:" + "0" * 64
    text = _starter(
        (
            "    no_containers: true\n",
            "    no_containers: true\n"
            f"    containers: {{enroot_checksums: {{a.deb: '{checksum}'}}, "
            f"pyxis_checksum: '{checksum}'}}\n",
        )
    )
    with pytest.raises(SpecError, match="no_containers is true but containers are given"):
        load_spec_text(text, file="cluster.yaml")


def test_myriad_plan_says_where_and_fails(tmp_path: Path) -> None:
    spec = tmp_path / "cluster.yaml"
    spec.write_text(_starter(JAMMY))
    myriad = str(Path(sys.executable).parent / "myriad")
    result = subprocess.run(
        [myriad, "plan", str(spec), "--json"], capture_output=True, text=True, check=False
    )
    assert result.returncode == 1, result.stderr
    [error] = [f for f in json.loads(result.stdout)["findings"] if f["severity"] == "error"]
    assert error["id"] == "slurm-os-cgroup"
    assert error["location"].startswith(f"{spec}:")
    # render, which builds the inventory, refuses it too, with no traceback.
    rendered = subprocess.run(
        [myriad, "render", str(spec), "--out", str(tmp_path / "inventory")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert rendered.returncode == 1, rendered.stdout + rendered.stderr
    assert "Traceback" not in rendered.stderr
    assert "slurmd cannot start on ubuntu-22.04" in rendered.stderr
