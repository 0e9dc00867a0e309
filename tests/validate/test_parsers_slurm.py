"""Slurm parsers and the hostlist codec.

sinfo tests use the real captures in tests/samples/slurm-sinfo. No attributable real
`scontrol show node` or `scontrol show topology` capture exists (SOURCES.md, Gaps), so
the fixtures for those are written to the format strings of Slurm's own printers:
slurm_sprint_node_table() in src/api/node_info.c (23.11: `-o` joins the lines with a
blank, the default form indents continuation lines by three blanks) and the topology
printers (slurm_print_topo_record() up to 23.02, whose lines end in a blank, and the
topology/tree and topology/block plugins from 23.11 on); scontrol(1), topology.conf(5).
"""

from __future__ import annotations

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from myriad.node.parsers import (
    Gres,
    ParseFailure,
    SinfoGresCount,
    SlurmTopology,
    compress_hostlist,
    expand_hostlist,
    parse_gres,
    parse_scontrol_nodes,
    parse_scontrol_topology,
    parse_sinfo_count_gres,
    parse_sinfo_node_gres,
)
from myriad.node.parsers.common import INTERNAL_ERROR
from myriad.node.parsers.slurm import MAX_HOSTLIST_NAMES

SINFO_GRES = "slurm-sinfo/sinfo_node-gres_gpu8-socket-bound.txt"
SINFO_USED = "slurm-sinfo/sinfo_slurm-20.11.8_nodes-gresused_allocated.txt"
NODES_O = "scontrol-show-node-o_23.11.txt"
NODES_DEFAULT = "scontrol-show-node_23.11_default-format.txt"
TOPO_OLD = "scontrol-show-topology_tree_23.02.txt"
TOPO_NEW = "scontrol-show-topology_tree_24.05.txt"
TOPO_BLOCK = "scontrol-show-topology_block_24.05.txt"


# --- hostlist ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        ("", ()),
        ("ctl1", ("ctl1",)),
        ("gpu[0001-0003,0040],ctl1", ("gpu0001", "gpu0002", "gpu0003", "gpu0040", "ctl1")),
        ("n[8-11]", ("n8", "n9", "n10", "n11")),
        ("n[08-11]", ("n08", "n09", "n10", "n11")),
        ("n[098-101]", ("n098", "n099", "n100", "n101")),
        ("n[1-2]-ib", ("n1-ib", "n2-ib")),
        ("rack[1-2]-n[1-2]", ("rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2")),
        ("leaf[01-03]", ("leaf01", "leaf02", "leaf03")),
        ("a,b , c", ("a", "b", "c")),
        ("n[3,1,2]", ("n3", "n1", "n2")),
        ("[1-2]", ("1", "2")),
    ],
)
def test_expand(expr, names):
    assert expand_hostlist(expr) == names


def test_expand_size():
    names = expand_hostlist("gpu[0001-1250]")
    assert len(names) == 1250
    assert (names[0], names[-1]) == ("gpu0001", "gpu1250")


@pytest.mark.parametrize(
    "expr",
    [
        "n[1-",
        "n[1-3",
        "n1-3]",
        "n[[1-3]]",
        "n[]",
        "n[a-b]",
        "n[3-1]",
        "n[1-3],,m1",
        "n[1-3],",
        "n 1",
        f"n[0-{MAX_HOSTLIST_NAMES}]",
        "n[0-1023]m[0-1023]x[0-3]",
    ],
)
def test_expand_rejects(expr):
    with pytest.raises(ParseFailure):
        expand_hostlist(expr)


@pytest.mark.parametrize(
    ("names", "expr"),
    [
        ([], ""),
        (["ctl1"], "ctl1"),
        (["gpu0001", "gpu0002", "gpu0003", "gpu0040", "ctl1"], "gpu[0001-0003,0040],ctl1"),
        ([f"gpu{i:04d}" for i in range(1, 33)] + ["gpu0040"], "gpu[0001-0032,0040]"),
        (["n9", "n10", "n11"], "n[9-11]"),
        (["n09", "n10"], "n[09-10]"),
        (["n9", "n010"], "n[9,010]"),
        (["n1", "n01"], "n[1,01]"),
        (["n1-ib", "n2-ib", "n3-eth"], "n[1-2]-ib,n3-eth"),
        (["login", "n1", "n2"], "login,n[1-2]"),
        (["n3", "n1", "n2"], "n[3,1-2]"),
    ],
)
def test_compress(names, expr):
    assert compress_hostlist(names) == expr


def test_compress_sorted_for_topology_conf():
    names = ["gpu0003", "gpu0001", "ctl2", "gpu0002", "ctl1", "gpu0001", "gpu0010"]
    assert compress_hostlist(names, sort=True) == "ctl[1-2],gpu[0001-0003,0010]"


@pytest.mark.parametrize("bad", ["", "n[1]", "a,b", "a b", 7])
def test_compress_rejects_names_a_hostlist_cannot_hold(bad):
    with pytest.raises(ValueError, match="host name"):
        compress_hostlist([bad])


hostnames = st.from_regex(
    r"[a-z]{1,4}(-[a-z]{1,3})?[0-9]{0,5}(-?[a-z]{1,3}[0-9]?)?", fullmatch=True
)
numbered = st.builds(
    lambda prefix, n, width: f"{prefix}{str(n).zfill(width)}",
    st.sampled_from(["gpu", "n", "rack1-n"]),
    st.integers(min_value=0, max_value=2000),
    st.integers(min_value=1, max_value=5),
)


@settings(max_examples=500, deadline=None)
@given(st.lists(hostnames | numbered, max_size=40))
def test_property_compress_then_expand_is_identity(names):
    assert list(expand_hostlist(compress_hostlist(names))) == names


@settings(max_examples=300, deadline=None)
@given(st.lists(hostnames | numbered, max_size=40))
def test_property_sorted_compress_covers_each_name_once(names):
    expanded = expand_hostlist(compress_hostlist(names, sort=True))
    assert sorted(expanded) == sorted(set(names))
    assert len(expanded) == len(set(names))


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(["gpu", "node-", "r1n"]),
    st.lists(st.integers(min_value=0, max_value=500), min_size=1, max_size=60, unique=True),
    st.integers(min_value=1, max_value=4),
)
def test_property_runs_collapse(prefix, numbers, width):
    names = [f"{prefix}{n:0{width}d}" for n in sorted(numbers)]
    expr = compress_hostlist(names)
    assert expand_hostlist(expr) == tuple(names)
    # One bracket holds all of them, with as many ranges as there are runs of +1 steps.
    runs = 1 + sum(
        1 for a, b in zip(sorted(numbers), sorted(numbers)[1:], strict=False) if b != a + 1
    )
    widths = {len(f"{n:0{width}d}") for n in numbers}
    assume(len(widths) == 1)
    if len(names) > 1:
        assert expr.count(",") == runs - 1
        assert expr.startswith(prefix + "[") and expr.endswith("]")


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from("ab01-9[],"), max_size=30))
def test_property_expand_fails_cleanly(expr):
    try:
        names = expand_hostlist(expr)
    except ParseFailure as failure:
        assert not failure.reason.startswith(INTERNAL_ERROR)
    else:
        # Whatever expands must come back the same through the compressor.
        assert expand_hostlist(compress_hostlist(names)) == names


# --- gres --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "gres"),
    [
        ("(null)", ()),
        ("", ()),
        ("gpu:8", (Gres("gpu", None, 8, None),)),
        ("gpu:h100:8(S:0-1)", (Gres("gpu", "h100", 8, "S:0-1"),)),
        ("gpu:h100:4(IDX:0-3)", (Gres("gpu", "h100", 4, "IDX:0-3"),)),
        (
            "gpu:a100:4(S:0),gpu:a100:4(S:1)",
            (Gres("gpu", "a100", 4, "S:0"), Gres("gpu", "a100", 4, "S:1")),
        ),
        ("gpu:h100:8(S:0,1),nic:2", (Gres("gpu", "h100", 8, "S:0,1"), Gres("nic", None, 2, None))),
        ("shard:h100:64K", (Gres("shard", "h100", 64 * 1024, None),)),
    ],
)
def test_parse_gres(text, gres):
    assert parse_gres(text) == gres


@pytest.mark.parametrize("text", ["gpu", "gpu:", "gpu:h100", "gpu:8(S:0-1", "gpu:8)", "a:b:c:8"])
def test_parse_gres_rejects(text):
    with pytest.raises(ParseFailure):
        parse_gres(text)


# --- scontrol show node ------------------------------------------------------------------


def test_nodes_one_liners(fixture_text):
    nodes = {n.name: n for n in parse_scontrol_nodes(fixture_text(NODES_O))}
    assert list(nodes) == ["gpu0001", "gpu0002", "gpu0003", "gpu0004", "ctl1"]

    idle = nodes["gpu0001"]
    assert (idle.state, idle.state_flags, idle.not_responding) == ("IDLE", (), False)
    assert (idle.cpus_total, idle.real_memory_mib) == (224, 2000000)
    assert idle.gres == (Gres("gpu", "h100", 8, "S:0-1"),)
    assert idle.cfg_tres["gres/gpu"] == "8"
    assert idle.cfg_tres["mem"] == "2000000M"
    assert idle.partitions == ("gpu",)
    assert idle.features == ("h100", "ib")
    assert (
        idle.fields["OS"] == "Linux 5.15.0-105-generic #115-Ubuntu SMP Mon Apr 15 09:52:04 UTC 2024"
    )
    assert idle.fields["AllocTRES"] == ""
    assert idle.reason is None

    drained = nodes["gpu0002"]
    assert (drained.state, drained.state_flags, drained.drained) == ("IDLE", ("DRAIN",), True)
    # The reason holds blanks and an "=", and ends with the author and time.
    assert drained.reason == "NVLink check failed: GPU 3 link=7 inactive [root@2024-05-02T09:13:44]"
    assert "link" not in drained.fields

    mixed = nodes["gpu0003"]
    assert mixed.state == "MIXED"
    assert mixed.partitions == ("gpu", "debug")
    assert mixed.fields["GresUsed"] == "gpu:h100:4(IDX:0-3)"

    down = nodes["gpu0004"]
    assert (down.state, down.not_responding, down.drained) == ("DOWN", True, True)
    assert down.reason == "Not responding [slurm@2024-05-02T07:01:12]"

    ctl = nodes["ctl1"]
    assert (ctl.gres, ctl.features, ctl.cpus_total) == ((), (), 32)
    assert set(ctl.cfg_tres) == {"cpu", "mem", "billing"}


def test_nodes_default_format_matches_one_liners(fixture_text):
    nodes = parse_scontrol_nodes(fixture_text(NODES_DEFAULT))
    assert [n.name for n in nodes] == ["gpu0001", "ctl1"]
    gpu, ctl = nodes
    assert (gpu.state, gpu.state_flags) == ("IDLE", ("DRAIN",))
    assert gpu.reason == "firmware update [admin@2024-05-02T09:00:00]"
    assert gpu.gres == (Gres("gpu", "h100", 8, "S:0-1"),)
    assert gpu.real_memory_mib == 2000000
    assert ctl.reason is None and ctl.partitions == ("debug",)


def test_reason_without_author_ends_at_the_next_trailing_key():
    line = (
        "NodeName=n1 CPUTot=8 RealMemory=1000 AllocMem=0 State=IDLE+DRAIN ThreadsPerCore=1 "
        "Partitions=p BootTime=None CfgTRES=cpu=8 AllocTRES= Reason=bad dimm slot=A3 "
        "Comment=ticket 4711"
    )
    (node,) = parse_scontrol_nodes(line)
    assert node.reason == "bad dimm slot=A3"
    assert node.fields["Comment"] == "ticket 4711"


@pytest.mark.parametrize("name", [NODES_O, NODES_DEFAULT])
def test_nodes_truncations(fixture_text, check_truncations, name):
    assert check_truncations(parse_scontrol_nodes, fixture_text(name)) > 0


def test_node_cut_inside_a_value_is_caught(fixture_text):
    line = fixture_text(NODES_O).splitlines()[0]
    for key in ("RealMemory=20", "State=ID", "CPUTot=22"):
        with pytest.raises(ParseFailure):
            parse_scontrol_nodes(line[: line.index(key) + len(key)])


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("No nodes in the system\n", "not scontrol node output"),
        ("Arch=x86_64 State=IDLE\n", "not scontrol node output"),
        ("NodeName=n1 State=IDLE ThreadsPerCore=1 Weight=1\n   x\n", "stray text"),
        ("NodeName=n1 Arch=x86_64 ThreadsPerCore=1\n", "no State"),
        ("NodeName=n1 State=SLEEPY ThreadsPerCore=1\n", "unexpected State"),
        ("NodeName=n1 State=IDLE+ ThreadsPerCore=1\n", "unexpected State"),
        (
            "NodeName=n1 State=IDLE ThreadsPerCore=1 Gres=gpu:h100:8(S:0 Weight=1\n",
            "Gres: unclosed",
        ),
        ("NodeName=n1 State=IDLE ThreadsPerCore=1 CPUTot=many Weight=1\n", "integer"),
        ("NodeName=n1 State=IDLE ThreadsPerCore=1 CfgTRES=cpu,mem=1 Weight=1\n", "TRES"),
    ],
)
def test_nodes_malformed(text, reason):
    with pytest.raises(ParseFailure, match=reason):
        parse_scontrol_nodes(text)


# --- scontrol show topology --------------------------------------------------------------


@pytest.mark.parametrize("name", [TOPO_OLD, TOPO_NEW])
def test_topology_tree(fixture_text, name):
    topology = parse_scontrol_topology(fixture_text(name))
    assert topology.blocks == ()
    names = [s.name for s in topology.switches]
    assert names == ["leaf01", "leaf02", "leaf03", "spine01"]
    leaf01, leaf02, leaf03, spine = topology.switches
    assert (leaf01.level, leaf01.link_speed) == (0, 1)
    assert leaf01.nodes == tuple(f"gpu{i:04d}" for i in range(1, 33))
    assert leaf02.nodes[0] == "gpu0033" and len(leaf02.nodes) == 32
    assert leaf03.nodes == ("gpu0065", "gpu0066", "ctl1", "ctl2", "ctl3")
    assert (spine.level, spine.nodes, spine.switches) == (1, (), ("leaf01", "leaf02", "leaf03"))
    assert topology.leaf_of("gpu0040") == "leaf02"
    assert topology.leaf_of("ctl2") == "leaf03"
    assert topology.leaf_of("gpu9999") is None


def test_topology_old_and_new_formats_agree(fixture_text):
    old = parse_scontrol_topology(fixture_text(TOPO_OLD))
    assert old == parse_scontrol_topology(fixture_text(TOPO_NEW))


def test_topology_block(fixture_text):
    topology = parse_scontrol_topology(fixture_text(TOPO_BLOCK))
    assert topology.switches == ()
    b1, b2 = topology.blocks
    assert (b1.name, b1.index, len(b1.nodes), b1.nodes[0]) == ("b1", 0, 18, "gpu0001")
    assert (b2.name, b2.index, b2.nodes[-1]) == ("b2", 1, "gpu0036")


def test_topology_conf_lines_parse_too():
    # topology.conf uses the same records without Level/LinkSpeed.
    topology = parse_scontrol_topology("SwitchName=leaf01 Nodes=gpu[0001-0002]\n")
    assert topology.switches[0].level is None
    assert topology.switches[0].nodes == ("gpu0001", "gpu0002")


@pytest.mark.parametrize("name", [TOPO_OLD, TOPO_NEW, TOPO_BLOCK])
def test_topology_truncations(fixture_text, check_truncations, name):
    assert check_truncations(parse_scontrol_topology, fixture_text(name)) > 0


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("No topology information available\n", "not Key=Value"),
        ("Level=0 Nodes=n1\n", "neither SwitchName nor BlockName"),
        ("SwitchName=s0 Level=x Nodes=n1\n", "integer"),
        ("SwitchName=s0 Level=0 Nodes=n[1-\n", "unclosed"),
        ("SwitchName=s0 Level=0 Nodes=n[3-1]\n", "backwards"),
    ],
)
def test_topology_malformed(text, reason):
    with pytest.raises(ParseFailure, match=reason):
        parse_scontrol_topology(text)


# --- sinfo -------------------------------------------------------------------------------


def test_sinfo_node_gres(sample):
    rows = parse_sinfo_node_gres(sample(SINFO_GRES))
    assert len(rows) == 37
    by_node = {row.node: row.gres for row in rows}
    assert by_node["test-blue03"] == (Gres("gpu", None, 4, None),)
    assert by_node["test-blue01"] == ()
    assert by_node["test-orange08"] == (Gres("gpu", None, 8, "S:0-1"),)
    orange = [row for row in rows if row.node.startswith("test-orange")]
    assert len(orange) == 20
    assert all(row.gres == (Gres("gpu", None, 8, "S:0-1"),) for row in orange)
    assert sum(g.count for row in rows for g in row.gres) == 4 + 20 * 8


def test_sinfo_count_gres(sample):
    assert parse_sinfo_count_gres(sample(SINFO_USED)) == (
        SinfoGresCount(98, (Gres("gpu", None, 0, None),)),
        SinfoGresCount(3, (Gres("gpu", None, 2, None),)),
        SinfoGresCount(1, (Gres("gpu", None, 1, None),)),
    )


@pytest.mark.parametrize(
    ("parse", "name"),
    [(parse_sinfo_node_gres, SINFO_GRES), (parse_sinfo_count_gres, SINFO_USED)],
)
def test_sinfo_truncations(sample, check_truncations, parse, name):
    assert check_truncations(parse, sample(name)) > 0


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("test-blue03\n", "2 columns"),
        ("test-blue03 gpu:4 extra\n", "2 columns"),
        ("test-blue03 gpu:4(S:0\n", "unclosed"),
        ("test-blue03 gpu:\n", "empty field"),
    ],
)
def test_sinfo_malformed(text, reason):
    with pytest.raises(ParseFailure, match=reason):
        parse_sinfo_node_gres(text)


def test_sinfo_count_must_be_a_number():
    with pytest.raises(ParseFailure, match="node count"):
        parse_sinfo_count_gres("test-blue03 gpu:4\n")


# --- all ---------------------------------------------------------------------------------

PARSERS = [
    parse_scontrol_nodes,
    parse_scontrol_topology,
    parse_sinfo_node_gres,
    parse_sinfo_count_gres,
]


@pytest.mark.parametrize("parse", PARSERS)
def test_empty_and_garbage(parse, garbage):
    for text in garbage:
        with pytest.raises(ParseFailure):
            parse(text)


@settings(max_examples=300, deadline=None)
@given(
    st.text(
        alphabet=st.sampled_from("NodeName=State IDLE+DRAIN Reason[@]gpu:8(S:0-1)\n"), max_size=120
    )
)
def test_fuzz_never_raises_anything_else(text):
    for parse in PARSERS:
        try:
            result = parse(text)
        except ParseFailure as failure:
            assert not failure.reason.startswith(INTERNAL_ERROR), failure
        else:
            assert isinstance(result, tuple | SlurmTopology)
