"""Counter growth between runs (myriad.node.health.counter_growth), as properties: growth is
never negative, the first reading is a baseline, a counter that only rises grows in total
by exactly its rise, a reset counter (perfquery -R, a reboot) grew by what it reads now,
and a counter the port does not report is never claimed to be quiet."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from myriad.node.facts import Fact, ok
from myriad.node.health import counter_growth

COUNTERS = ("link_downed", "symbol_error", "port_rcv_errors", "link_error_recovery")
values = st.integers(min_value=0, max_value=2**64 - 1)
reading = st.dictionaries(st.sampled_from(COUNTERS), values, min_size=1)


def grow(
    current: dict[str, int | None], previous: dict[str, Any]
) -> tuple[dict[str, int], dict[str, Any]]:
    growth, kept = counter_growth(ok({"mlx5_0": current}), {"mlx5_0": previous} if previous else {})
    return dict(growth.get()["mlx5_0"]), kept["mlx5_0"]


@given(reading)
def test_the_first_reading_is_a_baseline(first: dict[str, int]) -> None:
    growth, kept = grow(dict(first), {})
    assert growth == dict.fromkeys(first, 0)
    assert kept == first


@given(st.lists(reading, min_size=1, max_size=8))
def test_growth_is_never_negative(readings: list[dict[str, int]]) -> None:
    previous: dict[str, Any] = {}
    for current in readings:
        growth, previous = grow(dict(current), previous)
        assert all(value >= 0 for value in growth.values())


@given(values, st.lists(st.integers(min_value=0, max_value=10**6), max_size=10))
def test_a_rising_counter_grows_by_its_rise(start: int, steps: list[int]) -> None:
    value, total = start, 0
    _, previous = grow({"link_downed": value}, {})
    for step in steps:
        value += step
        growth, previous = grow({"link_downed": value}, previous)
        total += growth["link_downed"]
    assert total == value - start


@given(st.integers(min_value=1, max_value=2**40), st.integers(min_value=0, max_value=2**40))
def test_a_reset_counter_grew_by_what_it_reads(before: int, after: int) -> None:
    if after >= before:
        after = before - 1
    growth, _ = grow({"symbol_error": after}, {"symbol_error": before})
    assert growth["symbol_error"] == after


def test_a_counter_without_a_value_is_left_out() -> None:
    # The capture's i40iw0 reads "N/A (no PMA)": the reader gives None; no growth is claimed.
    growth, kept = grow({"link_downed": None, "symbol_error": 3}, {"symbol_error": 1})
    assert growth == {"symbol_error": 2}
    assert kept == {"symbol_error": 3}


def test_unreadable_counters_stay_unreadable_and_keep_the_last_reading() -> None:
    broken: Fact[Any] = Fact("unreadable", detail="sysfs infiniband timed out")
    growth, kept = counter_growth(broken, {"mlx5_0": {"link_downed": 2}})
    assert (growth.state, growth.detail) == ("unreadable", "sysfs infiniband timed out")
    assert kept == {"mlx5_0": {"link_downed": 2}}


def test_hand_worked_growth() -> None:
    growth, _ = grow(
        {"link_downed": 5, "symbol_error": 120, "port_rcv_errors": 3},
        {"link_downed": 4, "symbol_error": 100, "port_rcv_errors": 7},
    )
    # 5 - 4; 120 - 100; 3 < 7: reset, so 3.
    assert growth == {"link_downed": 1, "symbol_error": 20, "port_rcv_errors": 3}
