"""Where `validate --fabric` runs ibnetdiscover, and reading its output from the run."""

from __future__ import annotations

from pathlib import Path

import pytest

from myriad.errors import ValidateError
from myriad.plan.pipeline import plan_spec
from myriad.validate.fabric_service import DISCOVER_TASK, discover_host, discovered_text

ROOT = Path(__file__).resolve().parents[2]


def test_the_first_compute_node_when_no_node_runs_opensm() -> None:
    # starter-64's subnet manager runs on the switches: any HCA sees the subnet.
    assert discover_host(plan_spec(ROOT / "inventories" / "starter-64" / "cluster.yaml")) == "gpu01"


def _event(kind: str, host: str, res: dict[str, str]) -> dict[str, object]:
    return {"event": kind, "event_data": {"host": host, "task": DISCOVER_TASK, "res": res}}


def test_the_output_comes_from_the_hosts_ok_event() -> None:
    events = [_event("runner_on_ok", "gpu01", {"stdout": "Switch ..."})]
    assert discovered_text(events, "gpu01") == "Switch ..."


def test_a_failed_or_silent_run_says_so() -> None:
    failed = [_event("runner_on_failed", "gpu01", {"msg": "ibnetdiscover: not found"})]
    with pytest.raises(ValidateError, match="ibnetdiscover on gpu01: ibnetdiscover: not found"):
        discovered_text(failed, "gpu01")
    with pytest.raises(ValidateError, match="reported nothing"):
        discovered_text([], "gpu01")
