"""Batch planning for `myriad roll`: worked examples, then properties over random shapes."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from myriad.errors import OpsInputError
from myriad.ops.batches import Amount, Batch, batch_size, budget_spent, plan_batches


def test_amount_parses_counts_and_percentages() -> None:
    assert Amount.parse("3", "--batch") == Amount(3, percent=False)
    assert Amount.parse("25%", "--batch") == Amount(25, percent=True)
    # Percentages round up: 25% of 10 nodes is 2.5, so 3; 1% of 10 is still one node.
    assert Amount(25, percent=True).of(10) == 3
    assert Amount(1, percent=True).of(10) == 1
    assert Amount(100, percent=True).of(7) == 7
    assert Amount.parse("0", "--max-failures", allow_zero=True).of(50) == 0


@pytest.mark.parametrize("text", ["", "x", "-1", "1.5", "101%", "0", "0%", "3 nodes"])
def test_amount_refuses_what_is_not_a_count(text: str) -> None:
    with pytest.raises(OpsInputError) as raised:
        Amount.parse(text, "--batch")
    assert raised.value.exit_code == 2
    assert "--batch" in str(raised.value)


def test_three_nodes_of_one_island_one_at_a_time() -> None:
    islands = {"node01": 0, "node02": 0, "node03": 0}
    batches = plan_batches(["node03", "node01", "node02"], islands, batch=Amount(1, False))
    assert batches == [
        Batch(1, 0, ("node03",)),
        Batch(2, 0, ("node01",)),
        Batch(3, 0, ("node02",)),
    ]


def test_batches_never_span_two_islands() -> None:
    # Island 0 has three nodes, island 1 two: batches of 2 give [a,b] [c] | [d,e].
    islands = {"a": 0, "b": 0, "c": 0, "d": 1, "e": 1}
    batches = plan_batches(list("edcba"), islands, batch=Amount(2, False))
    assert [(b.island, b.nodes) for b in batches] == [
        (0, ("c", "b")),
        (0, ("a",)),
        (1, ("e", "d")),
    ]


def test_nodes_of_no_island_come_last() -> None:
    batches = plan_batches(["x", "a"], {"x": None, "a": 3}, batch=Amount(5, False))
    assert [(b.island, b.nodes) for b in batches] == [(3, ("a",)), (None, ("x",))]


def test_max_unavailable_counts_nodes_already_out() -> None:
    # 10 nodes, --batch 4, --max-unavailable 5 with 2 already drained by someone else: 3.
    assert batch_size(10, Amount(4, False), Amount(5, False), 2) == 3
    # 20% of 10 is 2, one is out: batches of one.
    assert batch_size(10, Amount(50, True), Amount(20, True), 1) == 1
    with pytest.raises(OpsInputError, match="already are"):
        batch_size(10, Amount(4, False), Amount(2, False), 2)


def test_failure_budget() -> None:
    assert not budget_spent(0, Amount(0, False), 10)
    assert budget_spent(1, Amount(0, False), 10)
    # 10% of 25 nodes rounds up to 3: the fourth failure stops the roll.
    assert not budget_spent(3, Amount(10, True), 25)
    assert budget_spent(4, Amount(10, True), 25)


@st.composite
def shapes(draw: st.DrawFn) -> tuple[list[str], dict[str, int | None]]:
    count = draw(st.integers(min_value=1, max_value=60))
    names = [f"n{i:03d}" for i in range(count)]
    order = draw(st.permutations(names))
    islands = {
        name: draw(st.one_of(st.none(), st.integers(min_value=0, max_value=5))) for name in names
    }
    return list(order), islands


@settings(max_examples=300, deadline=None)
@given(
    shape=shapes(),
    batch=st.builds(Amount, st.integers(1, 100), st.booleans()),
    cap=st.one_of(st.none(), st.builds(Amount, st.integers(1, 100), st.booleans())),
    out=st.integers(min_value=0, max_value=3),
)
def test_batches_cover_every_node_once_island_by_island(
    shape: tuple[list[str], dict[str, int | None]], batch: Amount, cap: Amount | None, out: int
) -> None:
    nodes, islands = shape
    unavailable = [f"down{i}" for i in range(out)]
    try:
        size = batch_size(len(nodes), batch, cap, out)
    except OpsInputError:
        with pytest.raises(OpsInputError):
            plan_batches(nodes, islands, batch=batch, max_unavailable=cap, unavailable=unavailable)
        assert cap is not None and cap.of(len(nodes)) <= out
        return
    batches = plan_batches(
        nodes, islands, batch=batch, max_unavailable=cap, unavailable=unavailable
    )
    rolled = [node for b in batches for node in b.nodes]
    # Every node exactly once.
    assert sorted(rolled) == sorted(nodes)
    # Numbered 1..n in order.
    assert [b.index for b in batches] == list(range(1, len(batches) + 1))
    for b in batches:
        assert 1 <= len(b.nodes) <= size
        # One island per batch, and never more out of service than allowed.
        assert {islands[node] for node in b.nodes} == {b.island}
        if cap is not None:
            assert len(b.nodes) + out <= cap.of(len(nodes))
    # Islands one at a time: once an island is left, it never comes back.
    seen: list[int | None] = []
    for b in batches:
        if not seen or seen[-1] != b.island:
            assert b.island not in seen
            seen.append(b.island)
    assert seen == sorted(seen, key=lambda island: (island is None, island or 0))
    # Inside an island the given order holds, and only the last batch may be short.
    for island in seen:
        mine = [b for b in batches if b.island == island]
        assert [n for b in mine for n in b.nodes] == [n for n in nodes if islands[n] == island]
        assert all(len(b.nodes) == size for b in mine[:-1])
