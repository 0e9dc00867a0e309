"""The spec's `monitoring:` section: defaults, the schema, and what the examples turn on.
(Bad values are in the bad-spec corpus: tests/spec/bad/98-*, 99-*.)"""

from __future__ import annotations

import json

import pytest

from myriad.cli import main
from myriad.spec.monitoring import Monitoring

from spec_builder import ROOT, load_example

EXAMPLES = ROOT / "inventories"


def test_monitoring_is_off_by_default_and_on_in_every_example() -> None:
    assert Monitoring().enabled is False
    for example in sorted(p.parent.name for p in EXAMPLES.glob("*/cluster.yaml")):
        assert load_example(example).spec.monitoring.enabled, example
    local = load_example("local").spec.monitoring
    assert local.enabled is True
    assert local.servers == ()
    assert (local.scrape_interval_seconds, local.alert_for_seconds) == (30, 300)


def test_the_schema_documents_the_section(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert "monitoring" in schema["properties"]
    section = schema["$defs"]["Monitoring"]["properties"]
    assert section["gpu_temperature_max_c"]["default"] == 85
    assert "catalog has no temperature" in section["gpu_temperature_max_c"]["description"]
    assert section["power_margin"]["maximum"] == 1.0
