"""A validation that passes means jobs run: Slurm's node state judged flag by flag, the
munge key and the Slurm configuration equal to the controller's on every node (compared by
digest, never by content), and the tiny job the controller runs across the compute nodes.

Before issue #13, `IDLE+COMPLETING+NOT_RESPONDING` passed as idle, and a node holding
another munge key passed every check while `srun -N3 hostname` failed."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from test_checks import (
    KEY_SHA,
    Cluster,
    by_key,
    document,
    local_controller_view,
    missing,
    probe,
    problems,
    scontrol_line,
    slurm_files,
)

from myriad.node.checks import CheckResult, evaluate
from myriad.node.facts import node_facts
from myriad.node.parsers.slurm_state import STATE_WORDS, parse_node_state
from myriad.plan.pipeline import plan_loaded

from spec_builder import load_example

GATHERER = Path(__file__).resolve().parents[2] / "src" / "myriad" / "node" / "gather.py"


@pytest.fixture(scope="module")
def local() -> Cluster:
    return Cluster(plan_loaded(load_example("local")))


# --- the state model -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "usable", "shown"),
    [
        ("IDLE", True, "IDLE"),
        ("MIXED", True, "MIXED"),
        ("ALLOCATED+COMPLETING", True, "ALLOCATED+COMPLETING"),
        ("IDLE+CLOUD", True, "IDLE+CLOUD"),
        ("mixed-", True, "MIXED+PLANNED"),
        ("completing", True, "ALLOCATED+COMPLETING"),
        # The case: idle in name, but slurmctld cannot reach it.
        ("IDLE+COMPLETING+NOT_RESPONDING", False, "IDLE+COMPLETING*"),
        ("IDLE*", False, "IDLE*"),
        ("down*", False, "DOWN*"),
        ("IDLE+DRAIN", False, "IDLE+DRAIN"),
        ("drained", False, "IDLE+DRAIN"),
        ("draining", False, "ALLOCATED+DRAIN"),
        ("MIXED+DRAIN", False, "MIXED+DRAIN"),
        ("failing", False, "ALLOCATED+FAIL"),
        ("IDLE+FAIL", False, "IDLE+FAIL"),
        ("IDLE+POWERED_DOWN", False, "IDLE+POWERED_DOWN"),
        ("idle~", False, "IDLE+POWERED_DOWN"),
        ("idle#", False, "IDLE+POWERING_UP"),
        ("idle%", False, "IDLE+POWERING_DOWN"),
        ("idle!", False, "IDLE+POWER_DOWN"),
        ("IDLE+REBOOT_REQUESTED", False, "IDLE+REBOOT_REQUESTED"),
        ("idle@", False, "IDLE+REBOOT_REQUESTED"),
        ("IDLE+REBOOT_ISSUED", False, "IDLE+REBOOT_ISSUED"),
        ("IDLE+MAINTENANCE", False, "IDLE+MAINT"),
        ("idle$", False, "IDLE+MAINT"),
        ("IDLE+RESERVED", False, "IDLE+RESERVED"),
        ("IDLE+INVALID_REG", False, "IDLE+INVALID_REG"),
        ("inval", False, "?+INVALID_REG"),
        ("FUTURE", False, "FUTURE"),
        ("UNKNOWN", False, "UNKNOWN"),
        ("IDLE+SOMETHING_NEW", False, "IDLE+SOMETHING_NEW"),
    ],
)
def test_every_state_and_flag_is_judged(text: str, usable: bool, shown: str) -> None:
    state = parse_node_state(text)
    assert state.usable is usable, state.problems()
    assert state.describe() == shown
    if not usable:
        assert state.problems(), text


def test_the_model_knows_slurms_states_and_flags() -> None:
    # slurm.h's NODE_STATE_* names (the flags without their prefix) and sinfo's words.
    for word in (
        "DOWN", "IDLE", "ALLOCATED", "ERROR", "MIXED", "FUTURE", "DRAIN", "COMPLETING",
        "NOT_RESPONDING", "POWERED_DOWN", "FAIL", "POWERING_UP", "MAINT", "REBOOT_REQUESTED",
        "REBOOT_ISSUED", "POWERING_DOWN", "PLANNED", "INVALID_REG", "POWER_DOWN", "POWER_UP",
        "POWER_DRAIN", "RESERVED", "DRAINED", "DRAINING", "FAILING", "CLOUD",
    ):  # fmt: skip
        assert word in STATE_WORDS, word


def test_idle_completing_not_responding_fails_the_node_state_check(local: Cluster) -> None:
    view = local_controller_view(local)
    lines = [
        scontrol_line("node01", "IDLE"),
        scontrol_line("node02", "IDLE+COMPLETING+NOT_RESPONDING"),
        scontrol_line("node03", "IDLE+REBOOT_REQUESTED"),
        scontrol_line("ctl01", "IDLE"),
    ]
    view["scontrol_nodes"] = probe("".join(lines))
    found = by_key(local.run({"ctl01": view}))
    assert found[("node01", "slurm.node-state")].status == "pass"
    state = found[("node02", "slurm.node-state")]
    assert (state.status, state.actual) == ("fail", "IDLE+COMPLETING*")
    assert "not responding" in state.detail
    reboot = found[("node03", "slurm.node-state")]
    assert reboot.status == "fail" and "reboot is pending" in reboot.detail


def test_sinfo_not_responding_suffix_fails_too(local: Cluster) -> None:
    view = local_controller_view(local)
    view["scontrol_nodes"] = probe("NodeName=node01 Arch=x86_64 CPUTot=")
    view["sinfo"] = probe("node01 idle (null)\nnode02 idle* (null)\nnode03 idle~ (null)\n")
    found = by_key(local.run({"ctl01": view}))
    assert found[("node01", "slurm.node-state")].status == "pass"
    assert found[("node02", "slurm.node-state")].actual == "IDLE*"
    assert found[("node02", "slurm.node-state")].status == "fail"
    assert found[("node03", "slurm.node-state")].actual == "IDLE+POWERED_DOWN"


# --- the munge key and the configuration ------------------------------------------------------


def test_a_node_with_another_munge_key_fails_and_names_the_digests(local: Cluster) -> None:
    other = "9" * 64
    results = local.run(
        {
            "ctl01": local_controller_view(local),
            "node02": {"slurm_files": slurm_files(other)},
        }
    )
    assert problems(results) == {("node02", "slurm.munge-key", "fail")}
    key = by_key(results)[("node02", "slurm.munge-key")]
    assert key.actual == (
        f"/etc/munge/munge.key differs from ctl01's (sha256 {other[:12]}, ctl01 {KEY_SHA[:12]})"
    )
    assert "--tags slurm --limit node02" in key.fix
    good = by_key(results)[("node01", "slurm.munge-key")]
    assert good.actual == f"same key as ctl01 (sha256 {KEY_SHA[:12]}), munge, 0400"


def test_munge_key_owner_mode_and_absence_fail(local: Cluster) -> None:
    found = by_key(
        local.run(
            {
                "ctl01": local_controller_view(local),
                "node01": {"slurm_files": slurm_files(mode="0644")},
                "node02": {"slurm_files": slurm_files(owner="root")},
                "node03": {"slurm_files": slurm_files(None)},
            }
        )
    )
    assert found[("node01", "slurm.munge-key")].actual == "mode 0644 lets others at it"
    assert found[("node02", "slurm.munge-key")].actual == "owned by root:root"
    assert found[("node03", "slurm.munge-key")].actual == "/etc/munge/munge.key does not exist"
    assert all(found[(n, "slurm.munge-key")].status == "fail" for n in ("node01", "node02"))


def test_unknown_controller_key_is_an_error_never_a_pass(local: Cluster) -> None:
    view = {**local_controller_view(local), "slurm_files": missing("stat")}
    found = by_key(local.run({"ctl01": view}))
    assert found[("node01", "slurm.munge-key")].status == "error"
    assert "controller's copy unavailable" in found[("node01", "slurm.munge-key")].actual
    assert found[("node01", "slurm.config-files")].status == "error"


def test_slurm_conf_that_differs_or_is_missing_fails(local: Cluster) -> None:
    results = local.run(
        {
            "ctl01": local_controller_view(local),
            "node01": {"slurm_files": slurm_files(conf="d" * 64)},
            "node03": {"slurm_files": slurm_files(without=("topology.conf",))},
        }
    )
    found = by_key(results)
    conf = found[("node01", "slurm.config-files")]
    assert conf.status == "fail"
    assert conf.actual.startswith("/etc/slurm/slurm.conf differs from ctl01's (sha256 dddddddddddd")
    assert (
        found[("node03", "slurm.config-files")].actual == "/etc/slurm/topology.conf does not exist"
    )
    assert found[("node02", "slurm.config-files")].actual == "4 files as on ctl01"


# --- the job -----------------------------------------------------------------------------------


def job_document(per_node: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The gatherer's srun_job probe: one srun record per node."""
    return probe(json.dumps(per_node))


def run_with_job(local: Cluster, job: dict[str, Any]) -> dict[tuple[str, str], CheckResult]:
    probes_of = {n.node: local.base_probes(n.node) for n in local.expectations.nodes}
    probes_of["ctl01"] = {**probes_of["ctl01"], **local_controller_view(local), "srun_job": job}
    facts = {}
    for node, probes in probes_of.items():
        doc = document(probes)
        if node == "ctl01":
            doc["args"] = {**doc["args"], "job_nodes": ["node01", "node02", "node03"]}
        facts[node] = node_facts(node, doc)
    return by_key(evaluate(local.expectations, facts, {}, {}))


def test_the_job_must_run_on_every_compute_node_and_a_broken_one_fails_alone(
    local: Cluster,
) -> None:
    refused = (
        "srun: error: Unable to allocate resources: Requested node configuration is not available"
    )
    found = run_with_job(
        local,
        job_document(
            {
                "node01": probe("node01\n"),
                "node02": probe(rc=1, stderr=refused + "\n"),
                "node03": probe(rc=None, timed_out=True),
            }
        ),
    )
    busy = run_with_job(local, job_document({"node01": {"skipped": "allocated"}}))
    assert busy[("node01", "slurm.job")].status == "not-applicable"
    assert busy[("node01", "slurm.job")].actual == "no job sent: the node was allocated"
    assert found[("node01", "slurm.job")].status == "pass"
    missed = found[("node02", "slurm.job")]
    assert (missed.status, missed.actual) == (
        "fail",
        f"the job did not run: srun exited 1: {refused}",
    )
    assert found[("node03", "slurm.job")].actual == "the job did not run: srun timed out"
    assert found[("ctl01", "slurm.job")].status == "not-applicable"
    broken = run_with_job(local, probe("not json"))
    assert broken[("node01", "slurm.job")].status == "error"
    absent = run_with_job(local, probe(rc=None, missing=True, stderr="srun: command not found"))
    assert absent[("node01", "slurm.job")].actual == "srun: command not found"


def test_no_jobs_leaves_the_job_check_not_applicable(local: Cluster) -> None:
    found = by_key(local.run({"ctl01": local_controller_view(local)}))
    job = found[("node01", "slurm.job")]
    assert (job.status, job.actual) == ("not-applicable", "no job run (--no-jobs)")


# --- the gatherer: digests, never the key ------------------------------------------------------


def test_the_gatherer_reports_digest_mode_and_owner_but_not_the_key(tmp_path: Path) -> None:
    key = b"\x01secret-key-bytes" * 16
    (tmp_path / "etc/munge").mkdir(parents=True)
    (tmp_path / "etc/munge/munge.key").write_bytes(key)
    (tmp_path / "etc/munge/munge.key").chmod(0o400)
    out = subprocess.run(
        [sys.executable, str(GATHERER), "--root", str(tmp_path), "--units", "munge"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    assert "secret-key-bytes" not in out
    record = json.loads(json.loads(out)["probes"]["slurm_files"]["stdout"])
    assert record["/etc/munge/munge.key"]["sha256"] == hashlib.sha256(key).hexdigest()
    assert record["/etc/munge/munge.key"]["mode"] == "0400"
    assert record["/etc/slurm/slurm.conf"] is None


def test_the_job_runs_across_the_validated_compute_nodes_and_no_jobs_skips_it(
    local: Cluster,
) -> None:
    from myriad.cli import build_parser
    from myriad.validate.service import job_nodes

    loaded = local.result.loaded
    assert job_nodes(loaded, local.inventory, ["ctl01", "node01", "node02", "node03"]) == [
        "node01",
        "node02",
        "node03",
    ]
    assert job_nodes(loaded, local.inventory, ["ctl01", "node02"]) == ["node02"]
    args = build_parser().parse_args(["validate", "x.yaml", "--no-jobs"])
    assert args.no_jobs is True


def test_the_munge_key_is_compared_even_when_slurmctld_does_not_answer(local: Cluster) -> None:
    view = {"scontrol_nodes": missing("scontrol"), "sinfo": missing("sinfo")}
    found = by_key(local.run({"ctl01": view, "node02": {"slurm_files": slurm_files("9" * 64)}}))
    assert found[("node01", "slurm.node-state")].status == "error"
    assert found[("node01", "slurm.munge-key")].status == "pass"
    assert found[("node02", "slurm.munge-key")].actual.startswith(
        "/etc/munge/munge.key differs from ctl01's"
    )


def test_the_gatherer_runs_one_bounded_srun_per_node(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "srun.log"
    srun = bin_dir / "srun"
    # A stand-in srun: logs its arguments, succeeds on node01, refuses node02.
    srun.write_text(
        "#!/bin/sh\n"
        f'echo "$@" >> {log}\n'
        'case "$*" in *--nodelist=node01*) echo node01;; '
        '*) echo "srun: error: Unable to allocate resources" >&2; exit 1;; esac\n'
    )
    srun.chmod(0o755)
    sinfo = bin_dir / "sinfo"
    sinfo.write_text("#!/bin/sh\nprintf 'node01 idle\\nnode02 idle\\nnode03 completing\\n'\n")
    sinfo.chmod(0o755)
    out = subprocess.run(
        [sys.executable, str(GATHERER), "--root", str(tmp_path), "--controller", "slurm",
         "--job-nodes", "node01,node02,node03", "--units", "munge"],
        capture_output=True, text=True, timeout=120, check=True,
        env={**__import__("os").environ, "PATH": f"{bin_dir}:/usr/bin:/bin"},
    ).stdout  # fmt: skip
    document = json.loads(out)
    record = json.loads(document["probes"]["srun_job"]["stdout"])
    assert record["node01"]["stdout"] == "node01\n" and record["node01"]["rc"] == 0
    assert record["node02"]["rc"] == 1
    # Only idle nodes get a job: node03 was still completing another one.
    assert record["node03"] == {"skipped": "completing"}
    calls = sorted(log.read_text().splitlines())
    assert len(calls) == 2
    assert calls[0] == (
        "--immediate=55 --time=1 --nodes=1 --ntasks=1 --nodelist=node01 "
        "--job-name=myriad-validate hostname -s"
    )
    facts = node_facts("ctl01", document)
    assert facts.job.ok and facts.job.get().ran == frozenset({"node01"})
    assert facts.job.get().skipped == {"node03": "completing"}
