"""YAML reading: YAML 1.2 scalars, locations, and the refusals that keep specs unambiguous."""

from __future__ import annotations

import math

import pytest

from myriad.errors import SpecError
from myriad.spec.yaml_source import Mark, parse_document, resolve_plain


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("yes", "yes"),
        ("on", "on"),
        ("NO", "NO"),
        ("true", True),
        ("False", False),
        ("~", None),
        ("null", None),
        ("", None),
        ("42", 42),
        ("-7", -7),
        ("0o17", 15),
        ("0x1f", 31),
        ("0755", 755),
        ("1.5", 1.5),
        ("1e3", 1000.0),
        ("550.127.05", "550.127.05"),
        ("12:30", "12:30"),
        ("2026-11-30", "2026-11-30"),
    ],
)
def test_plain_scalars_follow_the_yaml_1_2_core_schema(text: str, value: object) -> None:
    assert resolve_plain(text) == value
    assert type(resolve_plain(text)) is type(value)


def test_infinity_and_nan() -> None:
    assert resolve_plain("-.inf") == -math.inf
    assert math.isnan(resolve_plain(".nan"))


def test_quoted_and_block_scalars_stay_strings() -> None:
    doc = parse_document("a: \"550\"\nb: 'true'\nc: |\n  12\n", "t.yaml")
    assert doc.data == {"a": "550", "b": "true", "c": "12\n"}


def test_every_key_and_value_keeps_its_line_and_column() -> None:
    doc = parse_document("top:\n  list:\n    - {x: 1}\n    - y: 2\n", "t.yaml")
    assert doc.source.keys[("top",)] == Mark(1, 1)
    assert doc.source.keys[("top", "list")] == Mark(2, 3)
    assert doc.source.keys[("top", "list", 0, "x")] == Mark(3, 8)
    assert doc.source.values[("top", "list", 0, "x")] == Mark(3, 11)
    assert doc.source.keys[("top", "list", 1, "y")] == Mark(4, 7)


def test_a_missing_path_is_placed_at_its_nearest_parent() -> None:
    doc = parse_document("top:\n  inner: {a: 1}\n", "t.yaml")
    assert doc.source.mark_for(("top", "inner", "missing")) == Mark(2, 3)


def test_anchors_and_aliases_of_modest_size_are_allowed() -> None:
    doc = parse_document("a: &cpu {sockets: 2}\nb: *cpu\n", "t.yaml")
    assert doc.data == {"a": {"sockets": 2}, "b": {"sockets": 2}}


def test_a_recursive_alias_is_refused() -> None:
    with pytest.raises(SpecError) as caught:
        parse_document("a: &loop\n  - *loop\n", "t.yaml")
    assert "refers to the anchor that contains it" in caught.value.render()


def test_all_duplicate_keys_are_reported_together() -> None:
    with pytest.raises(SpecError) as caught:
        parse_document("a: 1\nb: 2\na: 3\nb: 4\n", "t.yaml")
    lines = [(p.line, p.message) for p in caught.value.problems]
    assert lines == [
        (3, "duplicate key 'a' (first at line 1)"),
        (4, "duplicate key 'b' (first at line 2)"),
    ]


def test_numeric_and_null_keys_are_ambiguous() -> None:
    with pytest.raises(SpecError) as caught:
        parse_document("1: x\nnull: y\n", "t.yaml")
    assert len(caught.value.problems) == 2
    assert all("ambiguous" in p.message for p in caught.value.problems)


def test_a_tab_inside_a_value_is_fine_but_not_in_indentation() -> None:
    assert parse_document('a: "x\ty"\n', "t.yaml").data == {"a": "x\ty"}
    with pytest.raises(SpecError):
        parse_document("a:\n\tb: 1\n", "t.yaml")
