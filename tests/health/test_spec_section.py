"""The spec's health section: its defaults are the ones the README shows, and the section is
optional (absent: node health off)."""

from __future__ import annotations

from pathlib import Path

import yaml

from myriad.spec.health import Health

README = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")


def readme_health_block() -> dict[str, object]:
    section = README[README.index("## Keeping nodes healthy") :]
    start = section.index("```yaml\n") + len("```yaml\n")
    block: dict[str, object] = yaml.safe_load(section[start : section.index("```", start)])
    return block


def test_the_readme_shows_the_defaults() -> None:
    shown = readme_health_block()["health"]
    defaults = Health().model_dump()
    assert shown == {**defaults, "drain": list(defaults["drain"])}


def test_hand_worked_defaults() -> None:
    health = Health()
    assert health.interval_s == 300
    assert health.stale_s == 900  # three intervals
    assert Health(interval_s=10, stale_after_s=120).stale_s == 120
    assert "gpu.xid" in health.drain and "nccl.conf" not in health.drain
