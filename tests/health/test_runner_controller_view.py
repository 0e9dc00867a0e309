"""Checks that compare a node with its controller do not apply in the runner on the node.

The munge key and the Slurm files are judged by `myriad validate`, which reads the
controller's copies; the runner has only its own node. Before, both came out `unknown` on
every compute node of every Slurm cluster with node health on (seen in `myriad health` on
the local example), so a real unknown drowned among them.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from myriad.node.checks import NodeExpectations
from myriad.node.checks.model import Expectation
from myriad.node.checks.slurm import MUNGE_KEY
from myriad.node.facts import node_facts, ok
from myriad.node.facts.slurm import FileDigest
from myriad.node.health import CONTROLLER_VIEW, judge

CONFIG = ["/etc/slurm/slurm.conf", "/etc/slurm/cgroup.conf", "/etc/slurm/gres.conf"]


def test_the_controllers_copies_are_not_applicable_on_the_node(tmp_path: Path) -> None:
    expectations = NodeExpectations(
        node="node01",
        pool="node",
        profile="container",
        role="compute",
        shared=(
            Expectation("slurm.munge-key", {"path": MUNGE_KEY, "owner": "munge"}, "software"),
            Expectation("slurm.config-files", CONFIG, "software"),
        ),
    )
    key = FileDigest("ab" * 32, "0400", "munge", "munge")
    files = {
        MUNGE_KEY: key,
        **{path: FileDigest("cd" * 32, "0644", "root", "root") for path in CONFIG},
    }
    facts = dataclasses.replace(node_facts("node01", {}), slurm_files=ok(files))
    kernel_log = tmp_path / "kern.log"
    kernel_log.write_text("")
    policy = {"kernel_log": str(kernel_log), "xid_hold_s": 0}
    results, _ = judge(expectations, policy, {}, facts, now=1000.0, boot="b")
    judged = {r.check: r for r in results if r.check != "node.reachable"}
    assert {check: r.status for check, r in judged.items()} == {
        "slurm.munge-key": "not-applicable",
        "slurm.config-files": "not-applicable",
    }
    assert all(r.actual == CONTROLLER_VIEW for r in judged.values())


def test_a_key_others_can_read_still_fails_on_the_node(tmp_path: Path) -> None:
    """What the node can judge alone it still judges: owner and mode of its own key."""
    expectations = NodeExpectations(
        "node01",
        "node",
        "container",
        "compute",
        (Expectation("slurm.munge-key", {"path": MUNGE_KEY, "owner": "munge"}, "software"),),
    )
    key = FileDigest("ab" * 32, "0644", "munge", "munge")
    facts = dataclasses.replace(node_facts("node01", {}), slurm_files=ok({MUNGE_KEY: key}))
    kernel_log = tmp_path / "kern.log"
    kernel_log.write_text("")
    policy = {"kernel_log": str(kernel_log), "xid_hold_s": 0}
    results, _ = judge(expectations, policy, {}, facts, now=1000.0, boot="b")
    [result] = [r for r in results if r.check == "slurm.munge-key"]
    assert result.status == "fail"
    assert "mode 0644 lets others at it" in result.actual
