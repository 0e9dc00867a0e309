"""Rack-scale Blackwell (GB200 / GB300 NVL72): NVLink domains, the scale-out fabric from the
trays' NICs, rack power and cooling, and training time at the generation's FP8 / FP4 rates.

Figures are derived by hand from NVIDIA's published numbers, each named where it is used
(the catalog entries in src/myriad/catalog/hardware.yaml carry the same sources):
- GB200 NVL72 / GB300 NVL72: 72 GPUs and 36 Grace CPUs per rack, one NVLink domain of
  130 TB/s; 18 compute trays of 4 GPUs and 9 NVLink switch trays (NVIDIA Mission Control
  manual, "NVLink Switch Integration": 9 NVLink switch trays per rack).
- GB200 NVL72 spec table: FP4 1,440, FP8/FP6 720, FP16/BF16 360 PFLOPS per rack, with
  sparsity (dense: half). GB300 NVL72: FP4 1,080 PFLOPS dense, FP8 720 with sparsity.
- NVIDIA DGX GB200 User Guide, "Hardware": 18 1RU compute trays (2 Grace, 4 GPUs, 4x
  ConnectX-7 400G each) and 9 1RU NVLink switch trays per rack.
- Rack power: GB300 NVL72 "up to 142 kW" (NVIDIA Enterprise RA, NVL72 AI Factory); GB200
  NVL72 120 kW (ServeTheHome at GTC 2024; no NVIDIA page read here gives one).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from myriad.cli import main
from myriad.plan.pipeline import plan_loaded
from myriad.spec import load_spec_text

from spec_builder import ROOT, example_text, load_example

ONE_RACK = "gb200-nvl72"
EIGHT_RACKS = "gb300-nvl72-8"


def _plan(text: str):  # type: ignore[no-untyped-def]
    return plan_loaded(load_spec_text(text, "cluster.yaml"))


def _with(environment: str, old: str, new: str) -> str:
    text = example_text(environment)
    assert text.count(old) == 1, old
    return text.replace(old, new)


def test_one_gb200_rack_is_one_nvlink_domain_of_72_gpus() -> None:
    result = plan_loaded(load_example(ONE_RACK))
    assert not result.has_errors, [f.message for f in result.findings]
    plan = result.plan
    assert plan is not None
    [domains] = plan.nvlink
    # 18 trays x 4 GPUs = 72 GPUs, 36 Grace CPUs, 9 switch trays, 130 TB/s: NVIDIA's figures.
    assert (domains.system, domains.domains, domains.partial_nodes) == ("GB200-NVL72", 1, 0)
    assert (domains.nodes_per_domain, domains.gpus_per_domain) == (18, 72)
    assert (domains.cpus_per_domain, domains.switch_trays_per_domain) == (36, 9)
    assert domains.domain_tbs == 130
    assert (domains.rack_kw, domains.cooling) == (120, "liquid")
    assert plan.gpus == 72


def test_the_scale_out_fabric_is_planned_from_the_trays_nics() -> None:
    plan = plan_loaded(load_example(ONE_RACK)).plan
    assert plan is not None and plan.fabric is not None
    # 18 trays x 4 ConnectX-7 = 72 endpoints at 400 Gb/s, one rail per GPU of a tray.
    assert (plan.fabric.endpoints, plan.fabric.endpoint_speed_gbps, plan.fabric.rails) == (
        72,
        400,
        4,
    )


def test_the_rack_counts_its_own_power_whole() -> None:
    plan = plan_loaded(load_example(ONE_RACK)).plan
    assert plan is not None
    # The 18 trays together draw the rack's 120 kW; the controller 1.2 kW.
    assert plan.power.server_kw == pytest.approx(120 + 1.2)
    [trays] = [f for f in plan.power.rack_fills if f.profile == "gb200-tray"]
    assert (trays.per_rack, trays.full, trays.rest, trays.over_budget) == (18, 1, 0, False)


def test_gb200_peaks_are_nvidias_rack_figures_without_sparsity() -> None:
    compute = plan_loaded(load_example(ONE_RACK)).plan.compute  # type: ignore[union-attr]
    # NVIDIA: FP16/BF16 360, FP8 720, FP4 1,440 PFLOPS per rack with sparsity; dense is half.
    assert compute.peak_bf16_pflops == pytest.approx(180)
    assert compute.peak_fp8_pflops == pytest.approx(360)
    assert compute.peak_fp4_pflops == pytest.approx(720)
    # 6 x 70e9 params x 15e12 tokens = 6.3e24 FLOPs at 360e15 x 0.40 FLOP/s = 4.375e7 s.
    assert compute.training_days == pytest.approx(4.375e7 / 86_400)


def test_eight_gb300_racks_are_eight_domains_on_an_xdr_fabric() -> None:
    result = plan_loaded(load_example(EIGHT_RACKS))
    assert not result.has_errors, [f.message for f in result.findings]
    plan = result.plan
    assert plan is not None and plan.fabric is not None
    [domains] = plan.nvlink
    assert (domains.system, domains.domains, domains.gpus_per_domain) == ("GB300-NVL72", 8, 72)
    assert plan.gpus == 576
    # 144 trays x 4 ConnectX-8 = 576 endpoints at 800 Gb/s (one per GPU) on 144-port Q3400s:
    # 4 rails of 144 each; a leaf gives half its ports (72) to trays, so 2 leaves per rail.
    assert (plan.fabric.endpoints, plan.fabric.endpoint_speed_gbps) == (576, 800)
    assert (plan.fabric.leaf_model, plan.fabric.radix, plan.fabric.leaves) == ("Q3400", 144, 8)
    # GB300 NVL72: 1,080 PFLOPS dense FP4 per rack (NVIDIA) x 8 racks.
    assert plan.compute.peak_fp4_pflops == pytest.approx(8 * 1080)
    # Eight racks at NVIDIA's "up to 142 kW" each, plus 3 head servers at 1.2 kW.
    assert plan.power.server_kw == pytest.approx(8 * 142 + 3 * 1.2)


def test_fp4_training_time_uses_the_fp4_rate() -> None:
    compute = plan_loaded(load_example(EIGHT_RACKS)).plan.compute  # type: ignore[union-attr]
    # 6 x 405e9 x 15e12 = 3.645e25 FLOPs at 8,640e15 x 0.40 FLOP/s.
    assert compute.precision == "fp4"
    assert compute.training_days == pytest.approx(3.645e25 / (8640e15 * 0.4) / 86_400)


def test_fp4_on_a_gpu_without_fp4_gives_no_time_and_says_so() -> None:
    text = example_text("starter-64").replace("mfu: 0.4}", "mfu: 0.4, precision: fp4}")
    result = _plan(text)
    assert result.plan is not None and result.plan.compute.training_days is None
    [finding] = [f for f in result.findings if f.id == "workload-precision"]
    assert "fp4 training on H100-SXM5-80GB" in finding.message


def test_an_nvl72_on_air_cooling_is_an_error_at_the_cooling_line() -> None:
    text = _with(ONE_RACK, "rack_kw: 130, cooling: liquid", "rack_kw: 130, cooling: air")
    result = _plan(text)
    [finding] = [f for f in result.findings if f.id == "rack-liquid-cooling"]
    assert finding.severity == "error"
    assert "one GB200-NVL72 rack (18 compute trays, 9 NVLink switch trays)" in finding.message
    assert "120 kW" in finding.message
    assert finding.path == ("facility", "cooling")


def test_a_rack_budget_below_the_racks_power_is_an_error_with_the_figure() -> None:
    text = _with(ONE_RACK, "rack_kw: 130, cooling: liquid", "rack_kw: 25, cooling: liquid")
    result = _plan(text)
    [finding] = [f for f in result.findings if f.id == "rack-power"]
    assert finding.severity == "error"
    assert "draws 120 kW, more than the 25 kW a rack may draw" in finding.message
    assert finding.numbers == {"rack_system_kw": 120, "rack_kw": 25}
    assert finding.path == ("pools", 1, "profile")
    # The rack is still one rack of 18 trays, not spread over racks of 25 kW.
    [trays] = [f for f in result.plan.power.rack_fills if f.profile == "gb200-tray"]  # type: ignore[union-attr]
    assert (trays.per_rack, trays.full) == (18, 1)


def test_a_pool_that_ends_in_part_of_a_rack_is_refused() -> None:
    text = _with(ONE_RACK, "profile: gb200-tray, count: 18", "profile: gb200-tray, count: 20")
    result = _plan(text)
    [finding] = [f for f in result.findings if f.id == "nvlink-domain-partial"]
    assert finding.severity == "error"
    # 20 = 18 + 2: one full rack and 2 trays in a rack short of 16.
    assert "1 full rack(s) of 18 and 2 in a rack short of 16" in finding.message
    assert "18 or 36" in finding.suggestion
    assert finding.path == ("pools", 1, "count")
    [domains] = result.plan.nvlink  # type: ignore[union-attr]
    assert (domains.domains, domains.partial_nodes) == (2, 2)


@pytest.mark.parametrize(
    ("os_name", "slurm"), [("ubuntu-22.04", "21.08.5"), ("debian-12", "22.05.8")]
)
def test_slurm_without_topology_block_is_refused_from_the_os_table(
    os_name: str, slurm: str
) -> None:
    # src/myriad/catalog/os.yaml: topology/block only in Ubuntu 24.04's Slurm 23.11.4.
    text = _with(ONE_RACK, "os: ubuntu-24.04", f"os: {os_name}")
    result = _plan(text)
    [finding] = [f for f in result.findings if f.id == "slurm-os-topology"]
    assert finding.severity == "error"
    assert f"Slurm {slurm} on {os_name} has no such plugin" in finding.message
    assert "topology/tree" in finding.message
    assert finding.suggestion.endswith("ubuntu-24.04")
    assert finding.path == ("software", "os")
    loaded = load_spec_text(text, "cluster.yaml")
    line = (
        text.splitlines().index(
            f"  os: {os_name}  # Slurm 23.11: topology/block, one block per NVLink domain"
        )
        + 1
    )
    assert finding.location(loaded) == f"cluster.yaml:{line}:3"


def test_kubernetes_clusters_need_no_slurm_plugin() -> None:
    text = _with(ONE_RACK, "os: ubuntu-24.04", "os: debian-12")
    text = text.replace("orchestrator: slurm", "orchestrator: kubernetes")
    ids = {f.id for f in _plan(text).findings}
    assert "slurm-os-topology" not in ids


def test_hgx_servers_are_domains_of_their_own_gpus() -> None:
    plan = plan_loaded(load_example("starter-64")).plan
    assert plan is not None
    [domains] = plan.nvlink
    # 8 HGX H100 nodes: 8 domains of 8 GPUs at 900 GB/s each = 7.2 TB/s (H100 datasheet).
    assert (domains.system, domains.domains, domains.gpus_per_domain) == (None, 8, 8)
    assert domains.domain_tbs == pytest.approx(7.2)


def test_myriad_plan_shows_the_domains_the_fabric_and_the_rack(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Off a terminal the console is wide unless COLUMNS says otherwise (pytest-xdist's
    # workers have it at 80, which wraps the rack's name).
    monkeypatch.delenv("COLUMNS", raising=False)
    path = ROOT / "inventories" / ONE_RACK / "cluster.yaml"
    assert main(["plan", str(path)]) == 0
    out = capsys.readouterr().out
    for heading in ("NVLink domains", "GB200-NVL72", "Fabric", "Power and cost", "FP4"):
        assert heading in out, heading
    assert "120 kW, liquid, 9 sw" in out
    assert main(["plan", str(path), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    [domains] = document["plan"]["nvlink"]
    assert (domains["domains"], domains["gpus_per_domain"], domains["rack_kw"]) == (1, 72, 120)
    assert document["plan"]["fabric"]["endpoints"] == 72


def test_myriad_plan_refuses_an_nvl72_on_air_at_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = _with(ONE_RACK, "rack_kw: 130, cooling: liquid", "rack_kw: 25, cooling: air")
    path = tmp_path / "cluster.yaml"
    path.write_text(text)
    assert main(["plan", str(path), "--json"]) == 1
    findings = {f["id"]: f for f in json.loads(capsys.readouterr().out)["findings"]}
    line = next(i for i, t in enumerate(text.splitlines(), 1) if t.startswith("facility:"))
    # Both on the facility line: cooling (liquid-only rack on air) and the 25 kW budget
    # against the rack's 120 kW (rack-power points at the pool's profile).
    assert findings["rack-liquid-cooling"]["location"].startswith(f"{path}:{line}:")
    assert findings["rack-liquid-cooling"]["severity"] == "error"
    assert findings["rack-power"]["numbers"] == {"rack_system_kw": 120, "rack_kw": 25}


def test_servers_beside_the_racks_keep_the_tree_and_say_so() -> None:
    # One GB200 NVL72 rack and two HGX H100 servers: topology/block would need the H100s in a
    # block of 18 as well, so the plan warns at the H100 pool and no OS error follows.
    text = _with(
        ONE_RACK,
        "  - {name: gpu, profile: gb200-tray, count: 18, role: compute}\n",
        "  - {name: gpu, profile: gb200-tray, count: 18, role: compute}\n"
        "  - {name: hgx, profile: hgx, count: 2, role: compute}\n",
    )
    text = text.replace(
        "  head:\n",
        "  hgx:\n    server: HGX-H100-8GPU\n    gpu: {model: H100-SXM5-80GB, count: 8}\n"
        "    cpu: {sockets: 2, cores_per_socket: 48}\n    memory_gib: 2048\n"
        "    pcie: {gen: 5, switches: 4}\n    nvswitch: 4\n"
        "    nics:\n      compute: {model: ConnectX-7, count: 4}\n  head:\n",
    )
    result = _plan(text)
    [finding] = [f for f in result.findings if f.id == "slurm-blocks-mixed"]
    assert finding.severity == "warning"
    assert finding.path == ("pools", 2, "profile")
    assert "hgx" in finding.message
