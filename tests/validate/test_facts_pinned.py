"""Every fact's name and value, pinned: the gatherer's document and the facts read from it.

The controller's checks, the node health runner and `myriad health` read facts by name, so
a change in how facts are declared, gathered or collected must not change one of them. The
cases are the recorded captures the other tests use (tests/samples, this directory's
fixtures), run through the real gatherer on a fake node (every probe: a tool printing a
capture, a sysfs tree materialised from tests/samples/sysfs-tree) and fed to the reader as
probe records, with the failure states (missing, failed, timed out, garbage, not gathered)
and malformed documents beside them. `facts_pinned.json` holds what each case gave before
the facts became declarations; a fact that changes on purpose is re-pinned with
`python tests/validate/test_facts_pinned.py` and the diff reviewed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from fake_tools import CAT
from fake_tools import printing as _printing
from fake_tools import tool as _tool
from myriad.node import gather
from myriad.node.facts import NodeFacts, decode, node_facts
from myriad.node.hardware.tree import materialise

HERE = Path(__file__).resolve().parent
SAMPLES = HERE.parents[0] / "samples"
FIXTURES = HERE / "fixtures"
PINNED = HERE / "facts_pinned.json"
ROOT = "<root>"
NVLINK = "a100-sxm4-80gb-x8_nvlink-status.txt"
NVIDIA_XML = "a100-sxm4-80gb-x4-mig_v12_drv535.54.03.xml"
IP_LINK = "ip-j-d-link_iproute2-6.1.0_bridge-veth.json"
IP_ROUTE = "ip-j-4-route-table-all_iproute2-6.1.0_rails-good.json"


# --- turning facts into plain, comparable data -------------------------------------------------


def plain(value: Any) -> Any:
    """Facts as JSON data, types named: a change of type or of value shows in the diff."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            "__type": type(value).__name__,
            **{f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)},
        }
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return {"__type": type(value).__name__, **{k: plain(v) for k, v in value._asdict().items()}}
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, (frozenset, set)):
        return {"__set": sorted(plain(v) for v in value)}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return {"__repr": repr(value)}


def facts_of(facts: NodeFacts) -> dict[str, Any]:
    return {f.name: plain(getattr(facts, f.name)) for f in dataclasses.fields(NodeFacts)}


# --- the fake node the gatherer runs on -------------------------------------------------------


def fake_node(base: Path) -> tuple[Path, Path]:
    """bin/ with a tool for every command probe, root/ with every file probe's file."""
    bin_dir, root = base / "bin", base / "root"
    bin_dir.mkdir(parents=True)
    s = SAMPLES
    _tool(
        bin_dir,
        "nvidia-smi",
        f'if [ "$1" = nvlink ]; then {CAT} "{s}/nvidia-smi-nvlink/{NVLINK}"; '
        f'else {CAT} "{s}/nvidia-smi-q-x/{NVIDIA_XML}"; fi',
    )
    _printing(bin_dir, "ibstat", s / "ibstat/h100-node_cx7-mt4129-ndr400-ib_all-active.txt")
    _printing(bin_dir, "mlnx_qos", s / "mlnx_qos/connectx-mlx5_2_eth4_trust-dscp_pfc-prio3.txt")
    _tool(
        bin_dir,
        "ip",
        f'case "$*" in *route*) {CAT} "{FIXTURES}/{IP_ROUTE}";; '
        f'*-4*) echo \'[{{"ifname":"eth4","addr_info":[{{"local":"10.1.0.5",'
        f'"prefixlen":24}}]}}]\';; *) {CAT} "{FIXTURES}/{IP_LINK}";; esac',
    )
    _printing(bin_dir, "docker", FIXTURES / "docker-info_edited_nvidia-default-runtime.json")
    _tool(
        bin_dir,
        "scontrol",
        f'if [ "$2" = topology ]; then {CAT} "{FIXTURES}/scontrol-show-topology_tree_24.05.txt"; '
        f'else {CAT} "{FIXTURES}/scontrol-show-node-o_23.11.txt"; fi',
    )
    _tool(
        bin_dir,
        "sinfo",
        'case "$*" in *%G*) echo "gpu001 idle gpu:h100:8(S:0-1)"; echo "gpu002 mixed- (null)";; '
        '*) echo "gpu001 idle"; echo "gpu002 allocated";; esac',
    )
    _tool(bin_dir, "srun", "echo gpu001")
    _printing(bin_dir, "kubectl", FIXTURES / "kubectl-get-nodes-o-json_v1.29.json")
    _tool(
        bin_dir,
        "systemctl",
        'shift; for unit in "$@"; do '
        'case "$unit" in chrony|munge|slurmd) echo active;; *) echo inactive;; esac; done; exit 3',
    )
    _tool(bin_dir, "su", "echo 'Welcome'; echo unlimited; echo 8192")
    _tool(
        bin_dir,
        "chronyc",
        "printf 'Reference ID    : C0A80001 (ntp)\\nLeap status     : Normal\\n'",
    )
    _tool(bin_dir, "timedatectl", "echo NTPSynchronized=yes")
    _tool(bin_dir, "findmnt", "echo '{\"filesystems\":[{\"target\":\"/data\",\"source\":\"nfs:/x\","
          "\"fstype\":\"nfs4\",\"options\":\"rw,vers=4.2\"}]}'")  # fmt: skip
    materialise((s / "sysfs-tree/dgx-h100_table6_constructed.tree").read_text(), str(root / "sys"))
    shutil.rmtree(root / "sys/class/infiniband")
    shutil.copytree(
        s / "sysfs-infiniband/node_exporter-mlx4_0-i40iw0", root / "sys/class/infiniband"
    )
    (root / "proc/net/bonding").mkdir(parents=True)
    for name, sample in (
        ("bond0", "bond0_802.3ad-lacp-fast_layer3+4_one-slave-down_lacp-pdu-details.txt"),
        ("bond1", "bond_active-backup_primary-eth2_one-slave-down.txt"),
    ):
        shutil.copy(s / "proc-net-bonding" / sample, root / "proc/net/bonding" / name)
    files = {
        "proc/sys/kernel/hostname": "gpu001\n",
        "proc/1/limits": "Limit  Soft Limit  Hard Limit  Units\n"
        "Max locked memory         65536            67108864            bytes     \n",
        "proc/modules": "nvidia_peermem 16384 0 - Live 0x0 (OE)\nmlx5_ib 450560 0 - Live 0x0\n",
        "etc/security/limits.conf": "# none\n",
        "etc/security/limits.d/90-myriad.conf": "*  -  memlock  unlimited\n",
        "etc/nccl.conf": "NCCL_SOCKET_IFNAME=^docker,lo\n",
        "etc/hosts": "127.0.0.1 localhost\n# BEGIN MYRIAD MANAGED BLOCK: cluster hosts\n"
        "10.0.0.11 gpu001\n10.0.0.12 gpu002\n# END MYRIAD MANAGED BLOCK: cluster hosts\n",
        "etc/docker/daemon.json": '{"default-runtime": "nvidia"}',
        "etc/containerd/config.toml": "version = 2\n",
        "etc/containerd/conf.d/10-nvidia.toml": "[plugins]\n",
        "etc/myriad/image.json": '{"image": "gpu-2026.11", "profile": "dgx-h100"}',
        "etc/myriad/hardware.json": '{"schema": 1, "gpus": []}',
        "var/lib/myriad-health/state.json": '{"schema": 1, "checks": {}}',
        "etc/munge/munge.key": "secret",
        "etc/slurm/slurm.conf": "ClusterName=x\n",
    }
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text, encoding="utf-8")
    (root / "etc/munge/munge.key").chmod(0o400)
    (root / "etc/slurm/slurm.conf").chmod(0o644)
    return bin_dir, root


GATHERINGS: dict[str, list[str]] = {
    "default": [],
    "slurm-controller": [
        "--controller", "slurm", "--job-nodes", "gpu001,gpu002", "--qos-nics", "eth4,eth5",
        "--mount", "/data", "--units", "munge,slurmd,slurmctld",
    ],
    "kubernetes-controller": ["--controller", "kubernetes", "--units", "kubelet"],
}  # fmt: skip


def gathered(base: Path, args: list[str]) -> dict[str, Any]:
    bin_dir, root = fake_node(base)
    done = subprocess.run(
        [sys.executable, str(Path(gather.__file__)), "--root", str(root), *args],
        capture_output=True,
        text=True,
        timeout=120,
        # The gatherer the test imported (a worktree's src, not an installed copy).
        env={"PATH": str(bin_dir), "PYTHONPATH": str(Path(gather.__file__).parents[2])},
        check=True,
    )
    document: dict[str, Any] = json.loads(done.stdout.replace(str(root), ROOT))
    # The files are the test user's: their owner is named alike wherever the test runs.
    digests = document["probes"]["slurm_files"]
    found = json.loads(digests["stdout"])
    for entry in found.values():
        if isinstance(entry, dict) and "owner" in entry:
            entry.update(owner="<owner>", group="<group>")
    digests["stdout"] = json.dumps(found, sort_keys=True)
    return document


def _stable(document: Mapping[str, Any]) -> dict[str, Any]:
    """The document without what differs between runs (host, times); a long output by its
    digest (the captures are pinned by tests/samples/SHA256SUMS, their parse in the facts)."""
    probes = {}
    for name, record in document["probes"].items():
        stdout = record["stdout"]
        if len(stdout) > 1024:
            record = {**record, "stdout": {"sha256": hashlib.sha256(stdout.encode()).hexdigest()}}
        probes[name] = record
    return {"schema": document["schema"], "args": document["args"], "probes": probes}


# --- probe records fed straight to the reader -----------------------------------------------


def rec(stdout: str = "", rc: int | None = 0, stderr: str = "", **flags: bool) -> dict[str, Any]:
    return {
        "rc": rc,
        "stdout": stdout,
        "stderr": stderr,
        "missing": False,
        "timed_out": False,
        **flags,
    }


def sample(path: str) -> str:
    return (SAMPLES / path).read_text(encoding="utf-8")


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def document(probes: Mapping[str, Any], **args: Any) -> dict[str, Any]:
    return {
        "schema": 1,
        "seconds": 1.5,
        "args": {"units": ["munge", "slurmd"], **args},
        "probes": dict(probes),
    }


def recorded_documents() -> Iterator[tuple[str, object]]:
    """Captures the gatherer's fake node does not use, and each way a probe can go wrong."""
    yield (
        "t4-and-ibstat-fallback",
        document(
            {
                "nvidia_smi": rec(sample("nvidia-smi-q-x/tesla-t4_v11_drv515.105.01.xml")),
                "ibstat": rec(sample("ibstat/a100-vm_cx-vf-mt4126_mixed-ethernet-infiniband.txt")),
                "sysfs_infiniband": rec(None, missing=True, stderr="no /sys/class/infiniband"),
                "sinfo": rec(
                    sample("slurm-sinfo/sinfo_slurm-20.11.8_nodes-gresused_allocated.txt")
                ),
                "scontrol_topology": rec(fixture("scontrol-show-topology_block_24.05.txt")),
                "scontrol_nodes": rec(fixture("scontrol-show-node_23.11_default-format.txt")),
                "docker_info": rec(fixture("docker-info_20.10.24_runc-only.json")),
                "ip_link": rec(fixture("ip-j-link_iproute2-6.1.0_bridge-veth.json")),
                "ip_route": rec(fixture("ip-j-4-route-table-all_iproute2-6.1.0_rails-broken.json")),
                "chrony_tracking": rec(None, missing=True, stderr="chronyc: command not found"),
                "timedatectl": rec("NTPSynchronized=no\nTimezone=UTC\n"),
                "units": rec("active\nfailed\n", rc=3),
                "findmnt": rec("", rc=1),
                "memlock_session": rec("unlimited\nunlimited\n"),
                "init_limits": rec("nothing here\n"),
                "fi_info_efa": rec(
                    "provider: efa\n    domain: rdmap16s27-rdm\n"
                    "provider: efa\n    domain: rdmap16s27-rdm\n"
                    "    domain: rdmap32s27-rdm\n"
                ),
                "srun_job": rec(
                    json.dumps(
                        {
                            "gpu001": rec("gpu001\n"),
                            "gpu002": rec("", rc=1, stderr="srun: error: x\n"),
                            "gpu003": rec(timed_out=True, rc=None),
                            "gpu004": {"skipped": "allocated"},
                        }
                    )
                ),
                "slurm_files": rec(
                    json.dumps(
                        {
                            "/etc/munge/munge.key": {
                                "sha256": "ab",
                                "mode": "0400",
                                "owner": "munge",
                                "group": "munge",
                            },
                            "/etc/slurm/gres.conf": None,
                        }
                    )
                ),
            },
            job_nodes=["gpu001", "gpu002", "gpu003", "gpu004"],
        ),
    )
    yield (
        "rtx-and-failures",
        document(
            {
                "hostname": rec("  node7 \n"),
                "nvidia_smi": rec(sample("nvidia-smi-q-x/rtx-a5000-x2_v13_drv590.44.01.xml")),
                "nvlink": rec("NVIDIA-SMI has failed\n", rc=9),
                "ibstat": rec(
                    sample("ibstat/azure-ndv4-a100_cx6-vf-mt4124-hdr200_ibpanic-exit255.txt"),
                    rc=255,
                ),
                "sysfs_infiniband": rec("{not json"),
                "pci": rec(
                    json.dumps(
                        {
                            "0000:18:00.0": {
                                "vendor": "0x15b3",
                                "class": "0x020700",
                                "current_link_speed": "16 GT/s",
                                "current_link_width": "16",
                                "max_link_speed": "32.0 GT/s PCIe",
                                "max_link_width": "16",
                                "numa_node": "-1",
                            },
                            "0000:19:00.0": {
                                "vendor": "0x10de",
                                "current_link_speed": "Unknown",
                                "current_link_width": "x",
                                "max_link_speed": None,
                            },
                        }
                    )
                ),
                "mlnx_qos:eth4": rec(timed_out=True, rc=None),
                "mlnx_qos:eth5": rec("garbage\n"),
                "bonding": rec(json.dumps({"bond0": "not a bond\n"})),
                "docker_info": rec(
                    fixture("docker-info_client-28.2.2_daemon-unreachable.json"), rc=1
                ),
                "docker_daemon_json": rec("[1, 2]"),
                "containerd_config": rec(json.dumps({"/etc/containerd/config.toml": 3})),
                "units": rec("active\n"),
                "chrony_tracking": rec("Reference ID : 0\nLeap status : Not synchronised\n"),
                "memlock_session": rec("This account is currently not available.\n"),
                "hosts": rec(
                    "# END MYRIAD MANAGED BLOCK: cluster hosts\n"
                    "# BEGIN MYRIAD MANAGED BLOCK: cluster hosts\n"
                ),
                "findmnt": rec('{"filesystems": []}'),
                "kubectl_nodes": rec(fixture("kubectl-get-nodes-o-json_v1.29.json")),
                "sinfo": rec("gpu001 idle\n"),
                "slurm_files": rec(
                    json.dumps({"/etc/munge/munge.key": {"error": "PermissionError"}})
                ),
                "srun_job": rec(json.dumps({"gpu001": "x"})),
                "health_state": rec("[]"),
                "image_record": rec(
                    None, missing=True, stderr="/etc/myriad/image.json: no such file"
                ),
                "hardware_record": rec("{}", rc=None, timed_out=True),
                "roce_gids": rec('{"mlx5_0": [[3, "::ffff:10.1.0.5", "RoCE v2"]]}'),
                "ip_addr": "not a record",
                "ip_route": rec('[{"table": "main", "dev": "rail0"}]'),
            },
            units="not a list",
        ),
    )
    compressed = gather.encode(document({"hostname": rec("gpu9\n")}), compress=True)
    yield "compressed", decode(compressed)
    yield "not-a-mapping", None
    yield "a-list", []
    yield "other-schema", {"schema": 2, "probes": {}}
    yield "no-probes", {"schema": 1}
    yield "probes-not-a-mapping", {"schema": 1, "probes": "x"}


def current(tmp_path: Path) -> dict[str, Any]:
    """Everything pinned, as the code reads it now."""
    pinned: dict[str, Any] = {"gathered": {}, "facts": {}}
    for name, args in GATHERINGS.items():
        doc = gathered(tmp_path / name, args)
        pinned["gathered"][name] = _stable(doc)
        # How long the probes took is the one thing a run changes.
        doc["seconds"] = 1.0
        pinned["facts"][f"gathered:{name}"] = facts_of(node_facts("gpu001", doc))
    for name, doc in recorded_documents():
        pinned["facts"][name] = facts_of(node_facts("gpu001", doc))
    return pinned


def test_every_probe_record_is_as_pinned(tmp_path: Path) -> None:
    pinned = json.loads(PINNED.read_text(encoding="utf-8"))["gathered"]
    for name, args in GATHERINGS.items():
        now = _stable(gathered(tmp_path / name, args))
        assert now["args"] == pinned[name]["args"], name
        assert sorted(now["probes"]) == sorted(pinned[name]["probes"]), name
        for probe, record in pinned[name]["probes"].items():
            assert now["probes"][probe] == record, f"{name}: probe {probe}"


@pytest.fixture(scope="module")
def facts_now(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return current(tmp_path_factory.mktemp("pinned"))["facts"]


def test_every_fact_of_every_case_is_as_pinned(facts_now: dict[str, Any]) -> None:
    pinned = json.loads(PINNED.read_text(encoding="utf-8"))["facts"]
    assert sorted(facts_now) == sorted(pinned)
    for case, facts in pinned.items():
        assert sorted(facts_now[case]) == sorted(facts), f"{case}: the fact names differ"
        for name, value in facts.items():
            assert facts_now[case][name] == value, f"{case}: fact {name}"


def test_the_cases_reach_every_state_of_a_fact(facts_now: dict[str, Any]) -> None:
    # The pins are worth something only if the cases go through each way a fact is read.
    states = {
        value["state"]
        for facts in facts_now.values()
        for value in facts.values()
        if isinstance(value, dict) and value.get("__type") == "Fact"
    }
    assert states == {"ok", "missing", "failed", "unreadable", "not-gathered"}


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as scratch:
        PINNED.write_text(json.dumps(current(Path(scratch)), indent=1, sort_keys=True) + "\n")
    print(f"wrote {PINNED}")
