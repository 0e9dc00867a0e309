"""The corpus of bad specs: each must fail with exactly the listed problems, located."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from myriad.errors import format_path
from myriad.spec import SpecError, load_spec

BAD = Path(__file__).parent / "bad"
EXPECTED: dict[str, list[dict[str, str]]] = yaml.safe_load((BAD / "expected.yaml").read_text())


def test_every_bad_spec_has_expectations() -> None:
    files = {path.name for path in BAD.glob("*.yaml")} - {"expected.yaml"}
    assert files == set(EXPECTED)
    assert len(files) >= 30


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_bad_spec_reports_each_problem_at_its_place(name: str) -> None:
    with pytest.raises(SpecError) as caught:
        load_spec(BAD / name)
    problems = caught.value.problems
    got = {(f"{p.line}:{p.column}", format_path(p.path)) for p in problems}
    want = {(e["at"], e["path"]) for e in EXPECTED[name]}
    assert got == want
    for expected in EXPECTED[name]:
        match = next(
            p
            for p in problems
            if (f"{p.line}:{p.column}", format_path(p.path)) == (expected["at"], expected["path"])
        )
        assert expected["message"] in match.message
        assert expected.get("hint", "") in match.hint
        assert match.file == str(BAD / name)


def test_rendered_problem_names_file_line_column_path_and_hint() -> None:
    with pytest.raises(SpecError) as caught:
        load_spec(BAD / "09-unknown-profile.yaml")
    text = caught.value.render()
    assert f"{BAD / '09-unknown-profile.yaml'}:17:17: pools[1].profile: unknown profile" in text
    assert "hint: did you mean 'gpu-node'?" in text
