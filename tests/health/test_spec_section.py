"""The spec's health section: its defaults are the ones the README shows, and the section is
optional (absent: node health off)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from myriad.plan.pipeline import plan_loaded
from myriad.render.inventory import build_inventory
from myriad.spec import load_spec_text
from myriad.spec.health import Health, Remediation

from spec_builder import example_text

README = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")


def readme_health_block() -> dict[str, object]:
    section = README[README.index("## Keeping nodes healthy") :]
    start = section.index("```yaml\n") + len("```yaml\n")
    block: dict[str, object] = yaml.safe_load(section[start : section.index("```", start)])
    return block


def test_the_readme_shows_the_defaults() -> None:
    shown = dict(readme_health_block()["health"])  # type: ignore[call-overload]
    defaults = Health().model_dump()
    # remediation is off by default (null); where the README shows the section, it shows
    # the section's own defaults.
    remediation = shown.pop("remediation", None)
    defaults.pop("remediation")
    assert shown == {**defaults, "drain": list(defaults["drain"])}
    assert remediation in (None, Remediation().model_dump())


def test_remediation_is_off_unless_declared_and_declared_alone_has_the_defaults() -> None:
    assert Health().remediation is None
    section = Health.model_validate({"remediation": {}}).remediation
    assert section == Remediation()
    assert (section.max_nodes, section.breaker_nodes, section.breaker_window_s) == (4, 8, 900)
    assert (section.escalation_window_s, section.power_cycle_grace_s) == (86_400, 900)
    assert (section.max_island_share, section.rack_share, section.hook) == (0.05, 0.5, None)


def test_hand_worked_defaults() -> None:
    health = Health()
    assert health.interval_s == 300
    assert health.stale_s == 900  # three intervals
    assert Health(interval_s=10, stale_after_s=120).stale_s == 120
    assert "gpu.xid" in health.drain and "nccl.conf" not in health.drain


def test_requeue_exit_codes_reach_the_slurm_role_once_each() -> None:
    assert Remediation().requeue_exit == ()
    with pytest.raises(ValidationError, match="lists exit code 75 more than once"):
        Remediation.model_validate({"requeue_exit": (75, 99, 75)})
    with pytest.raises(ValidationError):
        Remediation.model_validate({"requeue_exit": (0,)})  # 0 is success: never a requeue

    def variables(health: str) -> dict[str, object]:
        text = example_text("starter-64", without=("health",)) + health
        result = plan_loaded(load_spec_text(text))
        assert result.plan is not None
        spec, catalog = result.loaded.spec, result.loaded.catalog
        return dict(build_inventory(spec, catalog, result.plan).group_vars["all"])

    assert "slurm_requeue_exit" not in variables("health: {remediation: {}}\n")
    got = variables("health: {remediation: {requeue_exit: [75, 99]}}\n")
    assert got["slurm_requeue_exit"] == [75, 99]


def test_the_readme_shows_the_remediation_defaults() -> None:
    section = README[README.index("**`myriad remedy SPEC`**") :]
    start = section.index("```yaml\n") + len("```yaml\n")
    shown = yaml.safe_load(section[start : section.index("```", start)])["health"]["remediation"]
    defaults = Remediation().model_dump()
    assert shown == {**defaults, "requeue_exit": list(defaults["requeue_exit"])}
