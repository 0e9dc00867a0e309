"""The reference an operator reads is generated from the code and stays true to it.

Every field of the spec's JSON Schema (the catalog's entries included) says what it means;
docs/spec-reference.md and docs/lint-rules.md are what `python -m myriad.spec.reference`
writes from the models and the lint rules today.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from myriad.spec.models import Cluster
from myriad.spec.reference import (
    REGENERATE,
    lint_rules_markdown,
    main,
    model_sections,
    spec_reference_markdown,
)
from myriad.spec.rules import RULES

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
SRC = ROOT / "src"


def _schema() -> dict[str, Any]:
    return Cluster.model_json_schema(by_alias=True)


def _undescribed(schema: dict[str, Any]) -> list[str]:
    models = {**schema.get("$defs", {}), schema["title"]: schema}
    return [
        f"{name}.{field}"
        for name, model in models.items()
        for field, prop in model.get("properties", {}).items()
        if not str(prop.get("description", "")).strip()
    ]


def test_every_spec_field_has_a_description() -> None:
    missing = _undescribed(_schema())
    assert not missing, (
        f"{len(missing)} spec fields have no description (add Field(description=...)): "
        + ", ".join(missing)
    )


def test_the_check_names_a_field_without_a_description() -> None:
    schema = {
        "title": "Root",
        "properties": {"a": {"type": "string", "description": "said"}},
        "$defs": {"Leaf": {"properties": {"b": {"type": "integer"}, "c": {"description": " "}}}},
    }
    assert _undescribed(schema) == ["Leaf.b", "Leaf.c"]


def test_every_model_of_the_schema_has_a_section() -> None:
    schema = _schema()
    documented = {section.model for section in model_sections(schema)}
    assert documented == {*schema["$defs"], schema["title"]}


@pytest.mark.parametrize(
    ("name", "render"),
    [("spec-reference.md", spec_reference_markdown), ("lint-rules.md", lint_rules_markdown)],
)
def test_committed_reference_is_what_the_code_generates(name: str, render: Any) -> None:
    committed = (DOCS / name).read_text(encoding="utf-8")
    assert committed == render(), f"docs/{name} is out of date: run `{REGENERATE}`"


def test_the_spec_reference_shows_type_default_choices_and_description() -> None:
    text = spec_reference_markdown()
    row = next(line for line in text.splitlines() if line.startswith("| `market` |"))
    assert '`"on-demand"`' in row  # the default
    assert '`"capacity-block"`' in row  # an allowed value
    assert "Capacity Block" in row  # the description
    assert "## `provider.capacity`" in text
    assert "`catalog.nics.<name>`" in text  # catalog entries are part of the reference


def test_every_rule_is_in_the_lint_reference_with_why_and_fix() -> None:
    text = lint_rules_markdown()
    for rule in RULES.values():
        section = text.split(f"### `{rule.id}`\n", 1)[1].split("\n### ", 1)[0]
        assert rule.why in section and rule.fix in section
        accepted = "can be accepted" if rule.acceptable else "never accepted"
        assert accepted in section


def test_main_writes_both_files(tmp_path: Path) -> None:
    assert main(["--out", str(tmp_path)]) == 0
    assert (tmp_path / "spec-reference.md").read_text() == spec_reference_markdown()
    assert (tmp_path / "lint-rules.md").read_text() == lint_rules_markdown()
