"""`myriad report SPEC --out DIR`: one offline HTML page with the plan, the fabric picture and
the last validation (a heat map of islands by check subject).

The page is rendered by headless Chromium (Debian's package; scripts/bootstrap installs it):
it must load with no console error and every section on the page. Without Chromium the
rendering test is skipped here and fails under CI."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from headless_chromium import headless_chromium, screenshot
from myriad.cli import main
from myriad.health import report as health
from myriad.node.checks import CheckResult
from myriad.plan.pipeline import plan_spec
from myriad.validate.report import ValidationReport, keep_last
from myriad.views.floor_svg import floor_picture
from myriad.views.rack_svg import rack_picture

ROOT = Path(__file__).resolve().parents[1]
ROCE = ROOT / "inventories" / "roce-10k" / "cluster.yaml"
META = ROOT / "tests" / "plan" / "specs" / "meta-24k-roce.yaml"
SECTIONS = (
    "summary",
    "bom",
    "power",
    "compute",
    "findings",
    "racks",
    "fabric",
    "validation",
    "health",
)


def _validation(tmp_path: Path) -> Path:
    results = (
        CheckResult("gpu0001", "gpu.count", "pass", "8", "8", "profiles.a800-node.gpu"),
        CheckResult("gpu0001", "roce.qos", "fail", "trust dscp", "trust pcp", "network.roce"),
        CheckResult("gpu0129", "gpu.count", "pass", "8", "8", "profiles.a800-node.gpu"),
        CheckResult("ctl01", "gpu.count", "not-applicable", "", "no GPUs", "profiles.cpu.gpu"),
    )
    report = ValidationReport("roce-10k", str(ROCE), results, gather_seconds=1.0)
    path = tmp_path / "validation.json"
    path.write_text(json.dumps(report.to_dict()))
    return path


def _report(tmp_path: Path, *extra: str) -> str:
    out = tmp_path / "report"
    assert main(["report", str(ROCE), "--out", str(out), *extra]) == 0
    return (out / "index.html").read_text()


def test_every_section_and_nothing_fetched(tmp_path: Path) -> None:
    page = _report(tmp_path, "--validation", str(_validation(tmp_path)))
    for section in SECTIONS:
        assert f'<section id="{section}">' in page, section
    assert "<svg" in page
    assert "<script" not in page
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    # The BOM from the plan: 1,250 GPU servers, 40 leaves (hand count in tests/plan).
    assert "1,250" in page and "SN5600-200G" in page


def test_the_rack_picture_draws_each_kind_of_rack_once(tmp_path: Path) -> None:
    racks = _report(tmp_path).split('<section id="racks">', 1)[1].split("</section>", 1)[0]
    times = "\N{MULTIPLICATION SIGN}"
    # roce-10k, 40 kW and 42 U a rack: an A800 server is 6.5 kW and 6 U, so floor(40 / 6.5)
    # = 6 fit by power (7 by space); 1,250 = 208 x 6 + 2. The 7 controllers and logins
    # (1 kW, 2 U) share one rack; the fabric's switches fill 4 (the plan's switch racks).
    assert f"{times} 208 racks" in racks and f"6 {times} 6 U, 39.0 of 40 kW" in racks
    assert f"2 {times} 6 U, 13.0 of 40 kW" in racks and f"7 {times} 2 U" in racks
    drawn = [int(n.replace(",", "")) for n in re.findall(rf"{times} ([\d,]+) racks?<", racks)]
    # 1 + 208 + 1 + 4: the plan's 214 racks, each kind drawn once.
    assert sorted(drawn) == [1, 1, 4, 208]
    # The legend names the colours drawn: no ToR leaf in this design.
    assert ">compute</text>" in racks and "ToR leaf" not in racks
    # The elevations and the floor: one picture each.
    assert racks.count("<svg") == 2


def test_a_tor_design_draws_its_leaf_in_the_server_rack() -> None:
    # Meta's 24K cluster: two 8 U, 10.2 kW servers and their 1 kW RTSW a rack (20.4 + 1 =
    # 21.4 kW); the switch racks hold the 144 CTSW and 7 ATSW only, not the 1,536 RTSW.
    plan = plan_spec(META).to_dict()["plan"]
    racks = rack_picture(plan["power"], plan["fabric"])
    times = "\N{MULTIPLICATION SIGN}"
    assert f"2 {times} 8 U + 1 ToR, 21.4 of 40 kW" in racks
    assert "<title>1 ToR leaf switch</title>" in racks
    assert "144 spines, 7 core" in racks and "leaves" not in racks
    assert ">ToR leaf</text>" in racks


def test_the_floor_draws_rows_alike_once() -> None:
    # Meta's 24K: 1,536 RTSW racks and 1 controller rack fill 96 rows of 16 and one rack
    # (R01-R96, R97); the 151 switch racks start row 98: 9 rows of 16 and 7 racks.
    plan = plan_spec(META).to_dict()["plan"]
    floor = floor_picture(plan["power"])
    times = "\N{MULTIPLICATION SIGN}"
    rows = re.findall(r"class='t'>(R[\d-]+R?\d*)</text>", floor)
    assert rows == ["R01-R96", "R97", "R98-R106", "R107"]
    assert f"{times} 96 rows alike" in floor and f"{times} 9 rows alike" in floor
    assert floor.count("<title>switches</title>") == 16 + 7
    assert [
        label
        for label in ("grand-teton", "cpu-server", "switches", "storage")
        if f">{label}</text>" in floor
    ] == ["grand-teton", "cpu-server", "switches"]


def test_the_heat_map_groups_nodes_by_island(tmp_path: Path) -> None:
    page = _report(tmp_path, "--validation", str(_validation(tmp_path)))
    heat = page.split("<table class='heat'>", 1)[1].split("</table>", 1)[0]
    # gpu0001 is in island 0, gpu0129 in island 1 (islands of 128); ctl01 ran nothing.
    assert "<th>island 0</th>" in heat and "<th>island 1</th>" in heat
    assert "title='1 of 1 failed'>1/1" in heat
    assert "controllers" not in heat


def test_the_last_kept_validation_is_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MYRIAD_STATE_DIR", str(tmp_path / "state"))
    assert "Not validated from this machine yet" in _report(tmp_path)
    document = json.loads(_validation(tmp_path).read_text())
    results = tuple(CheckResult(**r) for r in document["results"])
    report = ValidationReport("roce-10k", str(ROCE), results, gather_seconds=1.0)
    keep_last(report, tmp_path / "state" / "roce-10k")
    assert "roce.qos" in _report(tmp_path)


def test_the_last_kept_health_is_shown(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MYRIAD_STATE_DIR", str(tmp_path / "state"))
    assert "No node health from this machine yet" in _report(tmp_path)
    nodes = (
        health.NodeHealth("gpu0001", True, False, None, None, None, 1000.0, False),
        health.NodeHealth(
            "gpu0002",
            True,
            True,
            "myriad-health",
            "gpu.xid expected no draining XID",
            990.0,
            1000.0,
            False,
            failing=["gpu.xid"],
        ),
        health.NodeHealth("gpu0003", False, None, None, None, None, None, True),
    )
    kept = health.HealthReport("roce-10k", 1001.0, 900, nodes)
    (tmp_path / "state" / "roce-10k").mkdir(parents=True)
    health.keep_last(kept, tmp_path / "state" / "roce-10k")
    section = _report(tmp_path).split('<section id="health">', 1)[1].split("</section>", 1)[0]
    assert (
        "1 of 3 compute nodes healthy; 1 drained (1 by myriad-health, 0 by someone else)" in section
    )
    assert "gpu0002" in section and "gpu.xid expected no draining XID" in section
    assert "unreachable" in section and "stale" in section
    assert "gpu0001" not in section


def test_a_validation_file_of_another_kind_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = tmp_path / "plan.json"
    other.write_text('{"plan": {}}')
    assert (
        main(["report", str(ROCE), "--out", str(tmp_path / "r"), "--validation", str(other)]) == 2
    )
    assert "not `myriad validate --json`" in capsys.readouterr().err


def test_chromium_renders_it_without_console_errors(tmp_path: Path) -> None:
    common = headless_chromium(tmp_path / "profile")
    _report(tmp_path, "--validation", str(_validation(tmp_path)))
    page = tmp_path / "report" / "index.html"
    dom = subprocess.run(
        [*common, "--enable-logging=stderr", "--v=0", "--dump-dom", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert dom.returncode == 0, dom.stderr[-2000:]
    for section in SECTIONS:
        assert f'id="{section}"' in dom.stdout, section
    assert "CONSOLE" not in dom.stderr, dom.stderr[-2000:]
    # A page with tables and pictures, not a blank one.
    assert screenshot(common, page, tmp_path / "report.png", 1400, 2400) > 20_000
