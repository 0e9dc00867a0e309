"""The `accept:` section of the spec: how `myriad accept` judges nodes before production.

A measured figure passes at or above `expected x (1 - margin)` (`plan/acceptance.py` derives
the expected figures). `margin` defaults to 0.10: the expected figures already include the
efficiencies real runs reach, operators gate at 0.90-0.95 of the expected figure, and
`validate --perf` gates at 0.9, so 0.10 keeps one gate for both.

Each level runs DCGM's diagnostic (`dcgmi diag -r LEVEL`) at a run level the operator picks:
`quick` at 1 or 2 (seconds to minutes: deployment checks, then short PCIe, memory and
diagnostic tests), `full` at 3 (adds the targeted stress and power tests), `burn-in` at 3 or
4 (4 adds the extended memtest and pulse tests, the longest DCGM runs). A level may not run a
shallower diagnostic than the level below it.

The nodes under test sit in a Slurm reservation named `reservation_prefix` and the run's id,
so no user job lands on them mid-test and an operator sees whose reservation it is.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["DEFAULT_MARGIN", "Accept", "DcgmLevel"]

# The one statement of the default; plan/acceptance.py reads it from here.
DEFAULT_MARGIN = 0.10
# Hours, not minutes: the burn-in's point is what minutes do not show (heat soak, a memory
# or link error that comes after sustained load); four is long enough for a node to reach
# thermal steady state many times over and short enough to run overnight on a new rack.
DEFAULT_BURN_IN_S = 4 * 3600
DEFAULT_RESERVATION_PREFIX = "myriad-accept"

DcgmLevel = Literal[1, 2, 3, 4]


class Accept(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False)

    margin: float = Field(
        default=DEFAULT_MARGIN,
        ge=0,
        le=0.5,
        description="A figure passes at or above expected x (1 - margin); 0.10 is the gate "
        "validate --perf uses, operators gate at 0.90-0.95 of the expected figure",
    )
    quick_dcgm_level: Literal[1, 2] = Field(
        default=2, description="dcgmi diag run level of `accept --level quick`"
    )
    full_dcgm_level: Literal[3, 4] = Field(
        default=3, description="dcgmi diag run level of `accept --level full`"
    )
    burn_in_dcgm_level: Literal[3, 4] = Field(
        default=4, description="dcgmi diag run level of `accept --level burn-in`"
    )
    burn_in_s: int = Field(
        default=DEFAULT_BURN_IN_S,
        ge=600,
        le=7 * 86_400,
        description="Seconds of sustained GPU stress and NCCL traffic at `--level burn-in`",
    )
    reservation_prefix: str = Field(
        default=DEFAULT_RESERVATION_PREFIX,
        pattern=r"^[A-Za-z][A-Za-z0-9_-]{0,31}$",
        description="The Slurm reservation on the nodes under test is this and the run's id",
    )

    @model_validator(mode="after")
    def _levels_deepen(self) -> Accept:
        if self.burn_in_dcgm_level < self.full_dcgm_level:
            raise ValueError(
                f"burn_in_dcgm_level {self.burn_in_dcgm_level} is below full_dcgm_level "
                f"{self.full_dcgm_level}: the burn-in would run a shallower diagnostic"
            )
        return self

    def dcgm_level(self, level: str) -> int:
        """The dcgmi diag run level of an acceptance level (quick, full, burn-in)."""
        return {
            "quick": self.quick_dcgm_level,
            "full": self.full_dcgm_level,
            "burn-in": self.burn_in_dcgm_level,
        }[level]
