"""The README's table of which fault gets which action is the action map's word, row by row:
a change to src/myriad/health/actions.yaml that moves a fault to another action fails here
until the README says so too."""

from __future__ import annotations

import re
from pathlib import Path

from myriad.health.actions import ActionMap, load_action_map

README = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
HEADER = "| Finding | Action | Why |"


def readme_rows() -> list[tuple[list[str], str]]:
    start = README.index(HEADER)
    rows = []
    for line in README[start:].splitlines()[2:]:
        if not line.startswith("|"):
            break
        finding, action, _why = (cell.strip() for cell in line.strip("|").split("|"))
        rows.append((re.findall(r"`([^`]+)`", finding), action))
    return rows


def action_of(actions: ActionMap, name: str) -> str:
    entries = actions.explain(name)
    assert len(entries) == 1, f"{name} names {len(entries)} entries of the action map"
    return entries[0][1].action


def test_every_row_of_the_readme_table_is_the_action_maps_action() -> None:
    actions = load_action_map()
    rows = readme_rows()
    assert len(rows) == 11
    for names, action in rows:
        assert names, f"a row names no finding: {action}"
        for name in names:
            assert action_of(actions, name) == action, name


def test_the_table_shows_every_action_of_the_ladder() -> None:
    shown = {action for _names, action in readme_rows()}
    assert shown == {"none", "reset-gpu", "reboot", "power-cycle", "needs-hardware"}
