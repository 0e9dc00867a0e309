"""myriad.node.gather run for real, locally, against fake tools and a fake file tree.

The fake tools are small shell scripts that print the real captures in tests/samples (and
this directory's fixtures); the fake root holds sysfs, procfs and /etc files built from the
same captures. PATH holds nothing else, so every tool not faked is genuinely missing.
What this does not exercise: the real tools' own behaviour on a node (the live local
cluster test does that for the tools a Debian container has).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from fake_tools import CAT, SLEEP
from fake_tools import printing as _printing
from fake_tools import tool as _tool
from myriad.node import artefact, gather
from myriad.node.facts import decode, node_facts
from myriad.validate.gather import collect, document_of, node_artefact

SCRIPT = Path(gather.__file__)
NVIDIA_XML = "nvidia-smi-q-x/a100-sxm4-80gb-x4-mig_v12_drv535.54.03.xml"
NVLINK = "nvidia-smi-nvlink/a100-sxm4-80gb-x8_nvlink-status.txt"
IBSTAT = "ibstat/h100-node_cx7-mt4129-ndr400-ib_all-active.txt"
MLNX_QOS = "mlnx_qos/connectx-mlx5_2_eth4_trust-dscp_pfc-prio3.txt"
BOND = "proc-net-bonding/bond0_802.3ad-lacp-fast_layer3+4_one-slave-down_lacp-pdu-details.txt"
SYSFS_IB = "sysfs-infiniband/node_exporter-mlx4_0-i40iw0"


@pytest.fixture
def node(tmp_path: Path, samples_dir: Path) -> dict[str, Path]:
    """A fake node: bin/ with tools printing real captures, root/ with its files."""
    bin_dir, root = tmp_path / "bin", tmp_path / "root"
    bin_dir.mkdir()
    fixtures = Path(__file__).parent / "fixtures"
    _tool(
        bin_dir,
        "nvidia-smi",
        f'if [ "$1" = nvlink ]; then {CAT} "{samples_dir / NVLINK}"; '
        f'else {CAT} "{samples_dir / NVIDIA_XML}"; fi',
    )
    _printing(bin_dir, "ibstat", samples_dir / IBSTAT)
    _printing(bin_dir, "mlnx_qos", samples_dir / MLNX_QOS)
    _printing(bin_dir, "ip", fixtures / "ip-j-d-link_iproute2-6.1.0_bridge-veth.json")
    _printing(bin_dir, "docker", fixtures / "docker-info_edited_nvidia-default-runtime.json")
    _printing(bin_dir, "scontrol", fixtures / "scontrol-show-node-o_23.11.txt")
    # systemctl is-active prints one state per unit, in order, and exits 3 if any is not active.
    _tool(
        bin_dir,
        "systemctl",
        'shift; for unit in "$@"; do '
        'case "$unit" in chrony|munge|slurmd) echo active;; *) echo inactive;; esac; done; exit 3',
    )
    _tool(bin_dir, "su", "echo unlimited; echo unlimited")
    _tool(
        bin_dir,
        "chronyc",
        "printf 'Reference ID    : C0A80001 (ntp)\\nLeap status     : Normal\\n'",
    )
    shutil.copytree(samples_dir / SYSFS_IB, root / "sys/class/infiniband")
    (root / "proc/net/bonding").mkdir(parents=True)
    shutil.copy(samples_dir / BOND, root / "proc/net/bonding/bond0")
    (root / "proc/sys/kernel").mkdir(parents=True)
    (root / "proc/sys/kernel/hostname").write_text("gpu001\n")
    (root / "proc/1").mkdir(parents=True)
    (root / "proc/1/limits").write_text(
        "Limit                     Soft Limit           Hard Limit           Units     \n"
        "Max locked memory         unlimited            unlimited            bytes     \n"
    )
    (root / "proc/modules").write_text(
        "nvidia_peermem 16384 0 - Live 0x0000000000000000 (OE)\n"
        "mlx5_ib 450560 0 - Live 0x0000000000000000\n"
    )
    (root / "etc/security/limits.d").mkdir(parents=True)
    (root / "etc/security/limits.d/90-myriad.conf").write_text(
        "*  -  memlock  unlimited\nroot  -  memlock  unlimited\n"
    )
    (root / "etc/nccl.conf").write_text("NCCL_SOCKET_IFNAME=^docker,lo\n")
    (root / "etc/hosts").write_text("127.0.0.1 localhost\n10.0.0.11 gpu001\n")
    return {"bin": bin_dir, "root": root}


def run_gatherer(
    fake: dict[str, Path], *args: str, timeout: float = 60
) -> tuple[dict[str, Any], float]:
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--root", str(fake["root"]), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={"PATH": str(fake["bin"])},
        check=True,
    )
    return json.loads(done.stdout), time.monotonic() - start


def test_every_probe_is_recorded_with_the_tools_exact_output(
    node: dict[str, Path], sample: Callable[[str], str]
) -> None:
    document, _ = run_gatherer(node, "--qos-nics", "eth4", "--controller", "slurm")
    probes = document["probes"]
    assert document["schema"] == 1
    assert document["args"]["qos_nics"] == ["eth4"]
    assert probes["nvidia_smi"] == {
        "rc": 0,
        "stdout": sample(NVIDIA_XML),
        "stderr": "",
        "missing": False,
        "timed_out": False,
    }
    assert probes["nvlink"]["stdout"] == sample(NVLINK)
    assert probes["ibstat"]["stdout"] == sample(IBSTAT)
    assert probes["mlnx_qos:eth4"]["stdout"] == sample(MLNX_QOS)
    assert json.loads(probes["bonding"]["stdout"]) == {"bond0": sample(BOND)}
    # is-active's exit status 3 is kept as it is; reading the states is the reader's job.
    assert probes["units"]["rc"] == 3
    assert probes["units"]["stdout"].split() == [
        "active" if u in ("chrony", "munge", "slurmd") else "inactive" for u in gather.DEFAULT_UNITS
    ]
    sysfs = json.loads(probes["sysfs_infiniband"]["stdout"])
    assert sysfs["files"]["mlx4_0/ports/1/rate"] == "40 Gb/sec (4X QDR)"
    assert set(sysfs["devices"]) == {"mlx4_0", "i40iw0"}
    limits = json.loads(probes["limits"]["stdout"])
    assert list(limits) == ["/etc/security/limits.d/90-myriad.conf"]
    assert probes["scontrol_nodes"]["rc"] == 0 and probes["sinfo"]["missing"] is True


def test_missing_tools_and_files_are_marked_missing_not_failed(node: dict[str, Path]) -> None:
    document, _ = run_gatherer(node)
    probes = document["probes"]
    for name in ("timedatectl", "docker_daemon_json", "containerd_config", "pci"):
        assert probes[name]["missing"] is True, name
        assert probes[name]["rc"] is None
    assert "command not found" in probes["timedatectl"]["stderr"]
    # Controller probes run only when asked for.
    assert "scontrol_nodes" not in probes and "kubectl_nodes" not in probes
    assert "findmnt" not in probes


def test_a_hanging_tool_is_killed_at_its_timeout_and_the_rest_still_answer(
    node: dict[str, Path],
) -> None:
    # The child `sleep` holds the output pipe open: killing only the shell would hang.
    _tool(node["bin"], "ibstat", f"{SLEEP} 30 & {SLEEP} 30")
    document, seconds = run_gatherer(node, "--timeout", "1")
    probe = document["probes"]["ibstat"]
    assert probe["timed_out"] is True and probe["rc"] is None
    assert "killed after 1s" in probe["stderr"]
    assert document["probes"]["nvidia_smi"]["rc"] == 0
    assert seconds < 10


def test_probes_run_in_parallel(node: dict[str, Path]) -> None:
    for name in ("ibstat", "mlnx_qos", "docker", "chronyc"):
        _tool(node["bin"], name, f"{SLEEP} 1; echo done")
    _, seconds = run_gatherer(node, "--qos-nics", "a,b,c")
    # Seven one-second tools in a row would take seven seconds.
    assert seconds < 4


def test_the_compressed_document_decodes_to_the_same_document(node: dict[str, Path]) -> None:
    plain, _ = run_gatherer(node, "--qos-nics", "eth4")
    done = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--root",
            str(node["root"]),
            "--qos-nics",
            "eth4",
            "--compress",
        ],
        capture_output=True,
        text=True,
        env={"PATH": str(node["bin"])},
        check=True,
    )
    wrapped = json.loads(done.stdout)
    assert wrapped["encoding"] == "gzip+base64"
    assert len(done.stdout) < len(json.dumps(plain)) / 4
    decoded = decode(done.stdout)
    assert isinstance(decoded, dict)
    assert decoded["probes"] == plain["probes"]


def test_the_gathered_document_reads_into_typed_facts(node: dict[str, Path]) -> None:
    document, _ = run_gatherer(node, "--qos-nics", "eth4", "--controller", "slurm")
    facts = node_facts("gpu001", document)
    assert facts.hostname.get() == "gpu001"
    assert facts.gpus.get().driver_version == "535.54.03"
    assert facts.nvlink.get().gpus[0].active_links == 12
    assert {d.name for d in facts.hcas.get().devices} == {"mlx4_0", "i40iw0"}
    assert facts.qos["eth4"].get().pfc_enabled == (3,)
    assert facts.bonds.get()["bond0"].mode == "802.3ad"
    assert facts.unit("munge").get() == "active" and facts.unit("slurmctld").get() == "inactive"
    assert facts.memlock.get().ceiling == "unlimited"
    assert "nvidia_peermem" in facts.modules.get()
    assert facts.docker.get().default_runtime == "nvidia"
    assert facts.time.get().synchronised is True
    assert [n.name for n in facts.slurm_nodes.get()] == [
        "gpu0001",
        "gpu0002",
        "gpu0003",
        "gpu0004",
        "ctl1",
    ]
    assert facts.pci.state == "missing" and facts.docker_daemon.state == "missing"


def test_garbage_from_a_tool_is_unreadable_with_the_reason(node: dict[str, Path]) -> None:
    _tool(node["bin"], "nvidia-smi", "echo '<nvidia_smi_log><gpu>'")
    _tool(node["bin"], "su", "echo 'This account is currently not available.'")
    document, _ = run_gatherer(node)
    facts = node_facts("gpu001", document)
    assert facts.gpus.state == "unreadable"
    assert facts.gpus.detail.startswith("could not read nvidia-smi -q -x output")
    assert facts.memlock.state == "unreadable"


def test_a_failing_tool_is_failed_with_its_message(node: dict[str, Path]) -> None:
    _tool(
        node["bin"],
        "nvidia-smi",
        "echo 'NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver.'"
        "; exit 9",
    )
    facts = node_facts("gpu001", run_gatherer(node)[0])
    assert facts.gpus.state == "failed"
    assert "exited 9: NVIDIA-SMI has failed" in facts.gpus.detail


@pytest.mark.parametrize(
    "document",
    [None, [], {"schema": 2, "probes": {}}, {"schema": 1}, {"schema": 1, "probes": "x"}],
)
def test_a_malformed_document_makes_every_fact_unreadable(document: object) -> None:
    facts = node_facts("gpu001", document)
    assert facts.gpus.state == "unreadable" and facts.nccl_conf.state == "unreadable"
    assert facts.gpus.detail


def test_damaged_output_is_refused_by_decode() -> None:
    with pytest.raises(ValueError, match="not JSON"):
        decode("Traceback (most recent call last):")
    with pytest.raises(ValueError, match="damaged"):
        decode(json.dumps({"schema": 1, "encoding": "gzip+base64", "data": "!!"}))


# --- collecting the documents from ansible-runner's events ----------------------------------


def _ok(host: str, stdout: str) -> dict[str, Any]:
    return {"event": "runner_on_ok", "event_data": {"host": host, "res": {"stdout": stdout}}}


def test_collect_sorts_hosts_into_facts_unreachable_failed_and_silent(
    node: dict[str, Path],
) -> None:
    document, _ = run_gatherer(node)
    events = [
        {"event": "playbook_on_start", "event_data": {}},
        _ok("gpu001", json.dumps(document)),
        _ok("gpu002", "not json at all"),
        {
            "event": "runner_on_unreachable",
            "event_data": {"host": "gpu003", "res": {"msg": "Failed to connect\nmore"}},
        },
        {
            "event": "runner_on_failed",
            "event_data": {"host": "gpu004", "res": {"msg": "/usr/bin/python3: not found"}},
        },
    ]
    facts, unreachable, failed = collect(events, ["gpu001", "gpu002", "gpu003", "gpu004", "gpu005"])
    assert set(facts) == {"gpu001", "gpu002"}
    assert facts["gpu001"].gpus.ok
    assert facts["gpu002"].gpus.state == "unreadable"
    assert "not JSON" in facts["gpu002"].gpus.detail
    assert unreachable == {
        "gpu003": "Failed to connect",
        "gpu005": "no result from the gathering run",
    }
    assert failed == {"gpu004": "/usr/bin/python3: not found"}


def test_events_of_other_tasks_carry_no_document() -> None:
    assert document_of({"event": "runner_on_ok", "event_data": {"host": "a", "res": {}}}) is None
    assert document_of({"event": "runner_on_start", "event_data": {"host": "a"}}) is None


def test_the_play_gets_the_node_package_built_from_the_package_never_from_a_checkout() -> None:
    # The gatherer is a module of the node package, built from the installed package for the
    # run (every wheel has it): the same file the health role installs. The play is told its
    # path and refuses to run without it, rather than looking into src/.
    with node_artefact() as path:
        assert path.name == artefact.NAME
        assert path.read_bytes() == artefact.build()
    assert not path.exists(), "the run's copy outlives the run"
    play = (SCRIPT.parents[3] / "playbooks" / "facts.yml").read_text(encoding="utf-8")
    assert "src/" not in play
    assert "myriad_node_artefact | mandatory(" in play
    assert "gather --controller" in play
