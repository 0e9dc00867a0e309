"""The slurm role's hostlist filter and Myriad's Python hostlist code agree.

Two implementations write Slurm hostlists: the filter plugin the slurm role's templates use
for slurm.conf, gres.conf and topology.conf (roles/slurm/filter_plugins/slurm_hostlist.py),
and `compress_hostlist` in the validation parsers, whose `expand_hostlist` reads what
sinfo and scontrol print. A name that one writes and the other cannot read back would make
validation report a node missing from a partition it is in. For many generated name sets:
each side's output expands to exactly the names given, and the two outputs name the same
hosts (and are the same text where both must write one canonical form).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from myriad.node.parsers import compress_hostlist, expand_hostlist

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = ROOT / "roles" / "slurm" / "filter_plugins" / "slurm_hostlist.py"


def _load_filter() -> Callable[[list[str]], str]:
    spec = importlib.util.spec_from_file_location("slurm_hostlist_plugin", PLUGIN)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    filters = module.FilterModule().filters()
    plugin: Callable[[list[str]], str] = filters["slurm_hostlist"]
    return plugin


slurm_hostlist = _load_filter()

# Names as clusters spell them: a prefix (letters, sometimes a dash-separated rack part), a
# number, zero-padded or not, and sometimes a suffix; also names without any number.
prefix = st.sampled_from(["gpu", "cn", "node-", "r1-n", "login", "ctl", "is00-leaf", "a"])
digits = st.integers(min_value=0, max_value=1200)
width = st.integers(min_value=1, max_value=5)
suffix = st.sampled_from(["", "", "", "-ib", "a"])


@st.composite
def host_name(draw: st.DrawFn) -> str:
    if draw(st.integers(0, 9)) == 0:
        return draw(st.sampled_from(["login", "head", "storage-a", "ctl"]))
    number = draw(digits)
    return f"{draw(prefix)}{number:0{draw(width)}d}{draw(suffix)}"


names = st.lists(host_name(), min_size=1, max_size=60)


@settings(max_examples=200, deadline=None)
@given(names)
def test_both_sides_expand_back_to_the_names_given(hosts: list[str]) -> None:
    from_plugin = slurm_hostlist(hosts)
    from_python = compress_hostlist(hosts)
    assert sorted(set(expand_hostlist(from_plugin))) == sorted(set(hosts)), from_plugin
    # The plugin sorts and drops duplicates inside a group; every name appears once.
    assert len(expand_hostlist(from_plugin)) == len(set(hosts)), from_plugin
    # The Python side keeps the order (and the duplicates) it was given.
    assert list(expand_hostlist(from_python)) == hosts, from_python


@settings(max_examples=200, deadline=None)
@given(names)
def test_sorted_outputs_name_the_same_hosts(hosts: list[str]) -> None:
    assert set(expand_hostlist(slurm_hostlist(hosts))) == set(
        expand_hostlist(compress_hostlist(hosts, sort=True))
    )


@settings(max_examples=200, deadline=None)
@given(
    prefix,
    width,
    st.lists(st.integers(min_value=0, max_value=999), min_size=1, max_size=80),
)
def test_one_padded_group_is_written_the_same_way(start: str, pad: int, numbers: list[int]) -> None:
    """Names of one prefix and one width (how Myriad names nodes): one canonical text."""
    pad = max(pad, len(str(max(numbers))))
    hosts = [f"{start}{n:0{pad}d}" for n in numbers]
    assert slurm_hostlist(hosts) == compress_hostlist(hosts, sort=True)


def test_known_forms() -> None:
    hosts = ["gpu001", "gpu002", "gpu003", "gpu007", "login1"]
    assert slurm_hostlist(hosts) == "gpu[001-003,007],login1"
    assert compress_hostlist(hosts) == "gpu[001-003,007],login1"
    assert expand_hostlist("gpu[9-10]") == ("gpu9", "gpu10")
