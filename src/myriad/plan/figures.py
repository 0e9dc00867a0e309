"""Plan figures as JSON carries them: rounded, and never Infinity."""

from __future__ import annotations

import math
from typing import Any

# Every figure is an estimate from catalog values with two or three digits: six significant
# digits keep all of them and drop the binary noise of their sums (85.19999999999999 kW).
SIGNIFICANT_DIGITS = 6


def rounded(value: float) -> float | None:
    """The figure to six significant digits; None where it is infinite (a stall never ends)."""
    return float(f"{value:.{SIGNIFICANT_DIGITS}g}") if math.isfinite(value) else None


def json_figures(value: Any) -> Any:
    """A document with every float in it rounded (JSON has no Infinity: those become null)."""
    if isinstance(value, float):
        return rounded(value)
    if isinstance(value, dict):
        return {key: json_figures(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_figures(item) for item in value]
    return value
