"""`--json --cabling` streams its cables: the text is exactly `json.dumps(indent=2)`'s for
the list made whole, the items are made while the text is written, and a file written from
pieces is whole or not there."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from myriad.cli import main
from myriad.fsutil import atomic_write_lines
from myriad.views.json_stream import Streamed, json_chunks

ROOT = Path(__file__).resolve().parents[1]
STARTER = ROOT / "inventories" / "starter-64" / "cluster.yaml"
# Flat dicts of every scalar JSON has (written by json_stream's own encoder) and one that is
# not flat (written by json.dumps): the text must be json.dumps's either way.
ITEMS = [
    {"cable": n, "label": f'#{n} "R01-01" \u00b5\n', "length_m": n / 3, "cage": None, "ok": n > 1}
    for n in (1, 2, 3)
] + [{"nested": {"a": [1, 2.5e-7]}}, {"big": 10**20, "tiny": 1e-300, "neg": -0.0}]


@pytest.mark.parametrize("items", [ITEMS, []], ids=["three", "none"])
def test_the_text_is_what_json_dumps_gives_for_the_whole_list(items: list[dict]) -> None:
    whole = {"format": 1, "plan": {"a": [1, 2]}, "cabling": {"totals": {"n": 3}, "cables": items}}
    streamed = {**whole, "cabling": {"totals": {"n": 3}, "cables": Streamed(lambda: iter(items))}}
    assert "".join(json_chunks(streamed)) == json.dumps(whole, indent=2) + "\n"


def test_a_document_with_nothing_streamed_is_written_as_is() -> None:
    document = {"format": 1, "x": [{"y": 1}]}
    assert "".join(json_chunks(document)) == json.dumps(document, indent=2) + "\n"


def test_each_item_is_written_before_the_next_is_made() -> None:
    written: list[str] = []

    def items() -> Iterator[dict]:
        for n in range(1, 4):
            # Item n-1 is already in the text when item n is asked for.
            assert n == 1 or f'"cable": {n - 1}' in "".join(written)
            yield {"cable": n}

    for chunk in json_chunks({"cables": Streamed(items)}):
        written.append(chunk)
    assert json.loads("".join(written)) == {"cables": [{"cable": n} for n in range(1, 4)]}


def test_a_file_written_in_pieces_is_whole_or_not_there(tmp_path: Path) -> None:
    target = tmp_path / "cabling.csv"
    target.write_text("the old sheet\n")

    def pieces() -> Iterator[str]:
        yield "cable,tier\n"
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space"):
        atomic_write_lines(target, pieces())
    assert target.read_text() == "the old sheet\n"
    assert [p.name for p in tmp_path.iterdir()] == ["cabling.csv"]
    atomic_write_lines(target, iter(["a\n", "b\n"]))
    assert target.read_text() == "a\nb\n"


def test_plan_json_carries_every_cable_of_the_sheet(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sheet = tmp_path / "cabling.csv"
    assert main(["plan", str(STARTER), "--json", "--cabling", str(sheet)]) == 0
    cabling = json.loads(capsys.readouterr().out)["cabling"]
    rows = sheet.read_text().splitlines()
    assert len(cabling["cables"]) == len(rows) - 1 == cabling["totals"]["node_links"] == 64
    assert cabling["cables"][0]["label"] == rows[1].rsplit(",", 1)[1]
    assert cabling["hall"]["row_pitch_mm"] == 2400
