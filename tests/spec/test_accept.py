"""The spec's `accept:` section: defaults, the DCGM level per acceptance level, its rules."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from myriad.plan import acceptance
from myriad.spec.accept import DEFAULT_MARGIN, Accept


def test_defaults_are_the_gate_validate_uses() -> None:
    accept = Accept()
    # validate --perf passes at >= 0.9 x the planned figure: a margin of 0.10.
    assert accept.margin == pytest.approx(1 - 0.9)
    assert acceptance.DEFAULT_MARGIN is DEFAULT_MARGIN
    assert accept.burn_in_s == 14_400
    assert accept.reservation_prefix == "myriad-accept"


def test_each_level_names_its_dcgm_run_level() -> None:
    accept = Accept(quick_dcgm_level=1, full_dcgm_level=3, burn_in_dcgm_level=4)
    assert [accept.dcgm_level(lv) for lv in ("quick", "full", "burn-in")] == [1, 3, 4]
    with pytest.raises(KeyError):
        accept.dcgm_level("soak")


def test_burn_in_may_not_be_shallower_than_full() -> None:
    with pytest.raises(ValidationError, match="burn_in_dcgm_level 3 is below full_dcgm_level 4"):
        Accept(full_dcgm_level=4, burn_in_dcgm_level=3)
    assert Accept(full_dcgm_level=4, burn_in_dcgm_level=4).burn_in_dcgm_level == 4
