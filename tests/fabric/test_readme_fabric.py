"""The README's fabric section shows what the commands print: the cabling CSV's first
lines and the miswire report (from the ibsim capture test_ibsim.py rebuilds); the pictures
it links are the ones test_fabric_svg.py regenerates."""

from __future__ import annotations

from pathlib import Path

import pytest

from myriad.cli import main

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
HEAD_COMMAND = "$ head -5 cabling.csv"
REPORT_COMMAND = (
    "$ myriad validate inventories/starter-64/cluster.yaml --fabric "
    "--from tests/fabric/starter-64-miswired.ibnetdiscover --speed-cap HDR"
)


def _block(command: str) -> list[str]:
    start = README.index(command)
    return README[start : README.index("\n```", start)].splitlines()[1:]


def test_the_cabling_block_is_the_csvs_first_lines(tmp_path: Path) -> None:
    out = tmp_path / "cabling.csv"
    assert (
        main(["plan", str(ROOT / "inventories/starter-64/cluster.yaml"), "--cabling", str(out)])
        == 0
    )
    assert _block(HEAD_COMMAND) == out.read_text().splitlines()[:5]


def test_the_miswire_report_is_what_validate_prints(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    code = main(REPORT_COMMAND.removeprefix("$ myriad ").split())
    assert code == 1
    assert _block(REPORT_COMMAND) == capsys.readouterr().out.splitlines()


def test_the_pictures_the_readme_shows_exist() -> None:
    for name in ("docs/fabric-starter-64.svg", "docs/fabric-h100-100k.svg"):
        assert f"]({name})" in README and (ROOT / name).is_file()
