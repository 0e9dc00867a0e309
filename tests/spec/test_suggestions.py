"""Suggestions for an unknown catalog name weigh every entry: a model number the operator
typed (H200) outranks a closer spelling of another model (HGX-H100-8GPU)."""

from __future__ import annotations

from pathlib import Path

import pytest

from myriad.errors import SpecError
from myriad.spec.loader import load_spec_text
from myriad.spec.references import close_names

ROOT = Path(__file__).resolve().parents[2]
SERVERS = ["DGX-A100", "DGX-H100", "DGX-H200", "HGX-H100-8GPU", "A800-8GPU-4NIC", "DGX-B200"]


def test_the_typed_model_number_is_suggested_before_a_closer_spelling() -> None:
    assert close_names("HGX-H200-8GPU", SERVERS) == ["DGX-H200", "HGX-H100-8GPU"]


def test_a_close_spelling_that_keeps_the_model_number_stands_alone() -> None:
    assert close_names("DGX-H20O", SERVERS) == ["DGX-H200"]
    assert close_names("hgx-h100-8gpus", SERVERS) == ["HGX-H100-8GPU"]


def test_nothing_close_suggests_nothing() -> None:
    assert close_names("zzz", SERVERS) == []


def test_the_spec_error_names_both(tmp_path: Path) -> None:
    text = (ROOT / "inventories" / "starter-64" / "cluster.yaml").read_text()
    assert "server: HGX-H100-8GPU" in text
    with pytest.raises(SpecError) as caught:
        load_spec_text(text.replace("server: HGX-H100-8GPU", "server: HGX-H200-8GPU", 1), "c.yaml")
    assert "did you mean 'DGX-H200' or 'HGX-H100-8GPU'?" in caught.value.render()
