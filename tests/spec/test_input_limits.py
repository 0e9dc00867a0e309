"""Bad input never hangs, crashes or passes: properties over any count, nesting, number, text.

Each class of input a tired operator (or a fuzzer) can produce is generated here rather
than listed: the loader must either accept the spec or raise SpecError with a located
problem, and never spend time or memory proportional to a number written in the file.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from myriad.errors import SpecError
from myriad.spec import load_spec_text
from myriad.spec.models import MAX_NODES, hostname
from myriad.spec.references import first_shared_host, host_index
from myriad.spec.yaml_source import MAX_BYTES, MAX_DEPTH, parse_document

ZERO_COUNT = Path(__file__).parent / "bad" / "13-zero-count.yaml"
BASE = ZERO_COUNT.read_text().replace("count: 0", "count: 4")
FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _problems(text: str) -> list[tuple[int, int, str, str]]:
    with pytest.raises(SpecError) as caught:
        load_spec_text(text, "t.yaml")
    problems = caught.value.problems
    assert problems, "a SpecError always names at least one problem"
    return [(p.line, p.column, ".".join(map(str, p.path)), p.message) for p in problems]


def test_the_base_spec_loads() -> None:
    assert load_spec_text(BASE, "t.yaml").spec.pools[1].count == 4


# --- nesting -------------------------------------------------------------------------------


@FAST
@given(depth=st.integers(min_value=MAX_DEPTH, max_value=3000), kind=st.sampled_from("[{-m"))
def test_any_nesting_ends_in_a_located_error_not_a_recursion_error(depth: int, kind: str) -> None:
    if kind == "[":
        body = "x: " + "[" * depth + "]" * depth + "\n"
    elif kind == "{":
        body = "x: " + "{a: " * depth + "1" + "}" * depth + "\n"
    elif kind == "-":
        body = "x:\n  " + "- " * depth + "1\n"
    else:
        # Indentation grows with depth: 2,000 levels stay under the size limit.
        depth = min(depth, 2000)
        body = "x:\n" + "".join(" " * (i + 1) + f"k{i}:\n" for i in range(depth)) + "\n"
    problems = _problems(BASE + body)
    assert any("nests more than" in message for *_, message in problems)
    line, column, *_ = problems[0]
    assert line >= BASE.count("\n") + 1 and column >= 1


def test_nesting_up_to_the_limit_is_read() -> None:
    doc = parse_document("x: " + "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1) + "\n", "t.yaml")
    assert "x" in doc.data


# --- non-finite and out-of-range numbers ---------------------------------------------------

NUMERIC_FIELDS = [
    ("facility:\n  pue: {}\n", (25, 8), "facility.pue"),
    ("facility:\n  rack_kw: {}\n", (25, 12), "facility.rack_kw"),
    ("facility:\n  usd_per_kwh: {}\n", (25, 16), "facility.usd_per_kwh"),
    ("facility:\n  power_limit_mw: {}\n", (25, 19), "facility.power_limit_mw"),
    ("workload:\n  mfu: {}\n", (25, 8), "workload.mfu"),
    ("workload:\n  params_billion: {}\n", (25, 19), "workload.params_billion"),
    ("storage:\n  kind: weka\n  write_gbs: {}\n", (26, 14), "storage.write_gbs"),
]
NON_FINITE = st.sampled_from(
    [".inf", "-.inf", "+.inf", ".Inf", ".INF", ".nan", ".NaN", ".NAN", "1e999", "-1e999"]
)


@FAST
@given(field=st.sampled_from(NUMERIC_FIELDS), number=NON_FINITE)
def test_non_finite_numbers_are_refused_in_every_numeric_field(
    field: tuple[str, tuple[int, int], str], number: str
) -> None:
    template, (line, column), path = field
    problems = _problems(BASE + template.format(number))
    assert [(p[0], p[1], p[2]) for p in problems] == [(line, column, path)]
    assert "finite" in problems[0][3] or "too large" in problems[0][3]


@FAST
@given(digits=st.integers(min_value=31, max_value=6000))
def test_numbers_of_any_length_end_in_a_located_error(digits: int) -> None:
    problems = _problems(BASE.replace("memory_gib: 2048", "memory_gib: " + "9" * digits))
    assert [(p[0], p[1]) for p in problems] == [(11, 17)]


@FAST
@given(count=st.one_of(st.integers(min_value=MAX_NODES + 1, max_value=10**30), st.just(2**64)))
def test_any_pool_count_beyond_the_limit_is_refused_at_the_count(count: int) -> None:
    text = BASE.replace("count: 4, role: compute", f"count: {count}, role: compute")
    problems = _problems(text)
    assert [(p[0], p[2]) for p in problems] == [(17, "pools.1.count")]
    # Up to 30 digits the model names its limit; longer numbers no field could hold.
    assert f"at most {MAX_NODES:,}" in problems[0][3] or "too large" in problems[0][3]


@FAST
@given(counts=st.lists(st.integers(min_value=1, max_value=MAX_NODES), min_size=2, max_size=6))
def test_pools_that_add_up_past_the_limit_are_refused(counts: list[int]) -> None:
    pools = "".join(
        f"  - {{name: p{chr(97 + i)}, profile: gpu-node, count: {c}, role: compute}}\n"
        for i, c in enumerate(counts)
    )
    text = BASE.replace("  - {name: gpu, profile: gpu-node, count: 4, role: compute}\n", pools)
    if sum(counts) + 1 <= MAX_NODES:
        return
    problems = _problems(text)
    assert any("at most" in p[3] and p[2].endswith(".count") for p in problems)


# --- characters and text -------------------------------------------------------------------


@FAST
@given(
    char=st.characters(min_codepoint=0, max_codepoint=0x9F, exclude_characters="\t\n\r\x85").filter(
        lambda c: not 0x20 <= ord(c) <= 0x7E and ord(c) < 0xA0
    ),
    column=st.integers(min_value=0, max_value=3),
)
def test_a_control_character_is_reported_where_it_is(char: str, column: int) -> None:
    text = BASE.replace("  name: lab\n", f"  name: lab\n  description: ab{'x' * column}{char}\n")
    problems = _problems(text)
    assert [(p[0], p[1]) for p in problems] == [(5, 18 + column)]
    assert f"U+{ord(char):04X}" in problems[0][3]


@FAST
@given(text=st.text(st.characters(blacklist_categories=("Cs", "Cc")), max_size=80))
def test_any_printable_unicode_description_round_trips(text: str) -> None:
    quoted = text.replace("\\", "\\\\").replace('"', '\\"')
    spec = BASE.replace("  name: lab\n", f'  name: lab\n  description: "{quoted}"\n')
    try:
        loaded = load_spec_text(spec, "t.yaml")
    except SpecError as exc:
        # Characters YAML itself refuses (e.g. U+FFFE) are named with their place.
        assert all(p.line == 5 for p in exc.problems), exc.render()
        return
    assert loaded.spec.metadata.description == text


@FAST
@given(length=st.integers(min_value=1025, max_value=20_000))
def test_an_overlong_key_is_named_as_such(length: int) -> None:
    problems = _problems(BASE + "k" * length + ": 1\n")
    assert problems[0][:2] == (24, 1)
    assert f"{length:,} characters" in problems[0][3]


def test_a_file_over_the_size_limit_says_how_large_it_is_and_may_be() -> None:
    text = BASE + "#" * MAX_BYTES
    problems = _problems(text)
    assert "MB" in problems[0][3] and f"{MAX_BYTES / 1e6:.0f} MB" in problems[0][3]


# --- fuzzing: any edit of a valid spec is read or refused with a place ---------------------


@settings(max_examples=200, deadline=None)
@given(
    position=st.integers(min_value=0, max_value=len(BASE)),
    cut=st.integers(min_value=0, max_value=20),
    insert=st.lists(
        st.sampled_from([*"[]{}:,-#&*!|>'\"\\ \n\t0123456789.abz", "\x00", "é", ".inf"]),
        max_size=8,
    ).map("".join),
)
def test_any_edit_of_a_valid_spec_loads_or_fails_with_located_problems(
    position: int, cut: int, insert: str
) -> None:
    text = BASE[:position] + insert + BASE[position + cut :]
    try:
        load_spec_text(text, "t.yaml")
    except SpecError as exc:
        lines = text.count("\n") + 2
        for problem in exc.problems:
            assert 1 <= problem.line <= lines and problem.column >= 1, exc.render()
            assert problem.message


# --- host names: arithmetic, not lists ------------------------------------------------------


def _brute_shared(a: str, a_count: int, b: str, b_count: int) -> str | None:
    names = {hostname(a, a_count, i) for i in range(1, a_count + 1)}
    shared = sorted(
        n for n in (hostname(b, b_count, j) for j in range(1, b_count + 1)) if n in names
    )
    return min(shared, key=lambda n: host_index(n, a, a_count) or 0) if shared else None


NAMES = st.sampled_from(["gpu", "gpu1", "gpu0", "gpu10", "gpu01", "gpu2", "cpu", "g", "g1"])


@settings(max_examples=300, deadline=None)
@given(a=NAMES, a_count=st.integers(1, 1200), b=NAMES, b_count=st.integers(1, 1200))
def test_shared_host_names_are_found_arithmetically_as_by_listing(
    a: str, a_count: int, b: str, b_count: int
) -> None:
    if a == b:
        return
    found = first_shared_host(a, a_count, b, b_count)
    brute = _brute_shared(a, a_count, b, b_count) or _brute_shared(b, b_count, a, a_count)
    assert (found is None) == (brute is None)


@settings(max_examples=300, deadline=None)
@given(pool=NAMES, count=st.integers(1, 2000), index=st.integers(-5, 2100))
def test_host_index_agrees_with_hostname(pool: str, count: int, index: int) -> None:
    name = hostname(pool, count, index) if index >= 0 else f"{pool}x"
    expected = index if 1 <= index <= count else None
    assert host_index(name, pool, count) == expected


def test_shared_host_names_of_huge_pools_take_no_time() -> None:
    assert first_shared_host("gpu", MAX_NODES, "gpu1", MAX_NODES) is None
    assert first_shared_host("gpu", 200_000, "gpu1", 20_000) == "gpu100001"


# --- address ranges --------------------------------------------------------------------------


@FAST
@given(
    first=st.integers(0, 255),
    second=st.integers(0, 255),
    first_prefix=st.integers(8, 24),
    second_prefix=st.integers(8, 24),
    which=st.sampled_from(["storage", "compute"]),
)
def test_overlapping_networks_are_refused_and_separate_ones_accepted(
    first: int, second: int, first_prefix: int, second_prefix: int, which: str
) -> None:
    import ipaddress

    a = ipaddress.ip_network(f"10.{first}.0.0/{first_prefix}", strict=False)
    b = ipaddress.ip_network(f"10.{second}.0.0/{second_prefix}", strict=False)
    text = BASE.replace(
        "  topology: {kind: fat-tree, switch: QM9700}\n",
        f"  topology: {{kind: fat-tree, switch: QM9700}}\n"
        f"  addressing: {{management: {a}, {which}: {b}}}\n",
    )
    if a.overlaps(b):
        problems = _problems(text)
        assert [p[2] for p in problems] == [f"network.addressing.{which}"]
        assert "overlaps" in problems[0][3]
    else:
        assert math.isfinite(load_spec_text(text, "t.yaml").spec.facility.pue)


def test_a_long_list_without_aliases_is_not_called_an_alias_bomb() -> None:
    problems = _problems(BASE + "catalog: [" + "1," * 200_001 + "1]\n")
    assert problems[0][2] == "catalog"
    assert "holds more than 200,000 values" in problems[0][3]


# --- the largest allowed cluster: every host-name rule by arithmetic -----------------------


def test_the_largest_cluster_loads_plans_and_checks_host_names_without_listing_them() -> None:
    from myriad.plan.pipeline import plan_loaded

    text = BASE.replace(
        "count: 4, role: compute", f"count: {MAX_NODES - 1}, role: compute"
    ).replace(
        "  topology: {kind: fat-tree, switch: QM9700}\n",
        "  topology: {kind: rail-optimized, switch: QM9700, island_nodes: 256}\n"
        f"  infiniband: {{sm_nodes: [ctl01, gpu{MAX_NODES - 1:06d}]}}\n"
        "  addressing: {management: 10.0.0.0/12, compute: 10.128.0.0/10}\n",
    )
    loaded = load_spec_text(text, "t.yaml")
    result = plan_loaded(loaded)
    assert result.plan is not None and result.plan.nodes == MAX_NODES
    # One past the pool's end is not a host: found by arithmetic, not a 200,000-name list.
    past = text.replace(f"gpu{MAX_NODES - 1:06d}]", f"gpu{MAX_NODES:06d}]")
    problems = _problems(past)
    assert [p[2] for p in problems] == ["network.infiniband.sm_nodes.1"]
