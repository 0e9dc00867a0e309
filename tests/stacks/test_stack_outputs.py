"""Reading a stack's `nodes` back: parsing, merging island stacks, checking against the spec,
and running `pulumi stack output` (a stand-in script plays the CLI, which is not installable
here; the real flow is the same command).
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from myriad.errors import StackOutputsError
from myriad.plan.machines import StackNode
from myriad.plan.nodes import iter_nodes
from myriad.provision import stack_outputs
from myriad.provision.stack_outputs import (
    load_saved,
    match_spec,
    merge,
    parse_nodes,
    read_stack,
)
from myriad.spec import load_spec

from stack_harness import REPO

STARTER = load_spec(REPO / "inventories/starter-64/cluster.yaml").spec


def node(name: str, **overrides: Any) -> dict[str, Any]:
    record = next(r for r in iter_nodes(STARTER) if r.name == name)
    value: dict[str, Any] = {
        "name": name,
        "address": f"10.10.0.{20 + record.index_in_pool}",
        "pool": record.pool,
        "role": record.role,
        "island": record.island,
        "provider": "baremetal",
        "ids": {"bmc": "https://10.255.0.1", "mac": "02:00:00:00:00:01"},
        "public_address": None,
    }
    value.update(overrides)
    return value


def all_nodes() -> list[dict[str, Any]]:
    return [node(r.name) for r in iter_nodes(STARTER)]


def test_parses_typed_records() -> None:
    (parsed,) = parse_nodes({"nodes": [node("gpu03")], "pxe_sha256": "ab"})
    assert parsed == StackNode(
        name="gpu03",
        address="10.10.0.23",
        pool="gpu",
        role="compute",
        island=0,
        provider="baremetal",
        ids={"bmc": "https://10.255.0.1", "mac": "02:00:00:00:00:01"},
    )
    assert parse_nodes({"nodes": [parsed.to_dict()]}) == [parsed]


@pytest.mark.parametrize(
    ("outputs", "message"),
    [
        ([], "expected a JSON object"),
        ({"network": {}}, "no `nodes` output .outputs: network."),
        ({"nodes": "[secret]"}, "marked secret"),
        ({"nodes": [node("gpu01", address="gpu01")]}, r"nodes\[0\] \(gpu01\)\.address"),
        ({"nodes": [node("gpu01", role="worker")]}, "'worker' is not one of"),
        ({"nodes": [node("gpu01", island="0")]}, "island: expected an integer"),
        ({"nodes": [node("gpu01", ids={"bmc": 1})]}, "ids: expected an object of strings"),
        ({"nodes": [{**node("gpu01"), "extra": 1}]}, "unknown keys extra"),
        ({"nodes": [{**node("gpu01"), "name": ""}]}, r"nodes\[0\]\.name: expected a non-empty"),
    ],
)
def test_bad_outputs_say_where_and_what(outputs: Any, message: str) -> None:
    with pytest.raises(StackOutputsError, match=message):
        parse_nodes(outputs)


def test_match_spec_reports_every_difference() -> None:
    nodes = parse_nodes(
        {
            "nodes": [
                node("gpu01", pool="ctl"),
                node("gpu02", island=3),
                {**node("gpu08"), "name": "gpu99"},
                node("ctl01", provider="aws"),
            ]
        }
    )
    with pytest.raises(StackOutputsError) as caught:
        match_spec(STARTER, nodes)
    text = str(caught.value)
    assert "gpu01: pool is 'ctl' in the stack, 'gpu' in the spec" in text
    assert "gpu02: island is 3 in the stack, 0 in the spec" in text
    assert "gpu99: in the stack but not in the spec" in text
    assert "ctl01: provider is 'aws' in the stack, 'baremetal' in the spec" in text
    assert "not made by any stack yet: ctl02, login01, gpu03" in text


def test_match_spec_accepts_a_complete_set() -> None:
    by_name = match_spec(STARTER, parse_nodes({"nodes": all_nodes()}))
    assert list(by_name) == [r.name for r in iter_nodes(STARTER)]


def test_merge_of_island_stacks_refuses_a_node_in_two() -> None:
    shared = parse_nodes({"nodes": [node("ctl01")]})
    island = parse_nodes({"nodes": [node("gpu01"), node("ctl01")]})
    assert [n.name for n in merge([("shared", shared)])] == ["ctl01"]
    with pytest.raises(StackOutputsError, match="ctl01 is in both shared and island-0"):
        merge([("shared", shared), ("island-0", island)])


def test_saved_output_file(tmp_path: Path) -> None:
    saved = tmp_path / "starter-64.json"
    saved.write_text(json.dumps({"nodes": all_nodes()}))
    assert len(load_saved(saved)) == 11
    saved.write_text("{\n  nodes: [")
    with pytest.raises(StackOutputsError, match=r"starter-64\.json:2:3: not JSON"):
        load_saved(saved)
    with pytest.raises(StackOutputsError, match="no such file"):
        load_saved(tmp_path / "missing.json")


def fake_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, script: str) -> Path:
    """A `pulumi` on PATH that runs `script` (sh) and logs its arguments."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    cli = bin_dir / "pulumi"
    cli.write_text(f'#!/bin/sh\necho "$@" > "{tmp_path}/args"\n{script}\n')
    cli.chmod(cli.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return tmp_path / "args"


def test_reads_through_the_cli_when_it_is_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    document = tmp_path / "out.json"
    document.write_text(json.dumps({"nodes": all_nodes()}))
    args = fake_cli(tmp_path, monkeypatch, f'cat "{document}"')
    nodes = read_stack("starter-64", cwd=tmp_path)
    assert len(nodes) == 11
    assert args.read_text().split() == [
        "stack",
        "output",
        "--json",
        "--stack",
        "starter-64",
        "--non-interactive",
    ]


def test_cli_failure_shows_its_message(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_cli(tmp_path, monkeypatch, "echo 'error: no stack named starter-64 found' >&2; exit 255")
    with pytest.raises(StackOutputsError, match=r"exit 255.*no stack named starter-64"):
        read_stack("starter-64", cwd=tmp_path)


def test_cli_that_hangs_is_cut_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_cli(tmp_path, monkeypatch, "exec sleep 30")
    with pytest.raises(StackOutputsError, match=r"did not finish within 0\.5s"):
        read_stack("starter-64", cwd=tmp_path, timeout_s=0.5)


def test_without_the_cli_it_says_how_to_save_the_outputs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert stack_outputs.pulumi_cli() is None
    with pytest.raises(StackOutputsError, match="pulumi stack output --json -s starter-64 >"):
        read_stack("starter-64", cwd=tmp_path)
    assert os.environ["PATH"] == str(tmp_path)
