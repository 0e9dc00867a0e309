#!/usr/bin/env python3
"""Gather one node's facts for `myriad validate` and print them as ONE JSON document.

Shipped to every node by playbooks/facts.yml (ansible.builtin.script) and run there, so it
uses the standard library only and runs on the oldest Python 3 a supported node has
(Ubuntu 22.04: 3.10): no third-party imports, no syntax newer than 3.8.

Every probe (a command, a file, a sysfs tree) is recorded as
    {"rc": int|null, "stdout": str, "stderr": str, "missing": bool, "timed_out": bool}
and nothing is interpreted here: the parsers on the Myriad side read the text, so one
parser serves every node and a parser fix needs no redeploy. A tool that is not installed
is `missing`, a tool that hangs is killed after its timeout (with everything it started)
and is `timed_out`; neither stops the other probes, which run in parallel so that one
slow tool does not add to the next.

With --compress the document is gzipped and base64-encoded inside a small JSON wrapper
({"schema", "encoding": "gzip+base64", "data"}).

Exit status: 0 whenever the document was printed, whatever the probes found.
"""

from __future__ import annotations

import argparse
import base64
import glob
import gzip
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    # Only for type checkers: annotations are never evaluated here (Python 3.8+ nodes).
    from collections.abc import Callable

    # One probe's outcome; see the module docstring.
    Record = dict[str, Any]

SCHEMA = 1
# Output beyond these sizes is cut: a runaway tool must not flood the control node, and
# no probe we read legitimately prints more (nvidia-smi -q -x for 8 GPUs is ~200 KB).
STDOUT_LIMIT = 4 * 1024 * 1024
STDERR_LIMIT = 8 * 1024
DEFAULT_TIMEOUT_S = 20.0
DEFAULT_UNITS = (
    "chrony",
    "chronyd",
    "systemd-timesyncd",
    "munge",
    "slurmd",
    "slurmctld",
    "slurmdbd",
    "docker",
    "containerd",
    "kubelet",
    "nvidia-persistenced",
    "nvidia-fabricmanager",
    "opensm",
    "myriad-roce-qos",
)
# PCI vendors whose functions' links are read: NVIDIA GPUs / NVSwitches and Mellanox NICs.
PCI_VENDORS = ("0x10de", "0x15b3")
# The IBTA PortCounters error counters Linux exposes under ports/N/counters/ (drivers/
# infiniband/core/sysfs.c); traffic counters are left out, they say nothing of health.
IB_ERROR_COUNTERS = (
    "symbol_error",
    "link_error_recovery",
    "link_downed",
    "port_rcv_errors",
    "port_rcv_remote_physical_errors",
    "port_rcv_switch_relay_errors",
    "port_xmit_discards",
    "port_xmit_constraint_errors",
    "port_rcv_constraint_errors",
    "local_link_integrity_errors",
    "excessive_buffer_overrun_errors",
    "VL15_dropped",
)
HEALTH_STATE = "/var/lib/myriad-health/state.json"
HARDWARE_RECORD = "/etc/myriad/hardware.json"
KUBECONFIGS = ("/etc/kubernetes/admin.conf", "/root/.kube/config")


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit]


def _record(
    rc: int | None,
    stdout: str = "",
    stderr: str = "",
    missing: bool = False,
    timed_out: bool = False,
) -> Record:
    return {
        "rc": rc,
        "stdout": _cut(stdout, STDOUT_LIMIT),
        "stderr": _cut(stderr, STDERR_LIMIT),
        "missing": missing,
        "timed_out": timed_out,
    }


def run(argv: list[str], timeout: float, env: dict[str, str] | None = None) -> Record:
    """Run a command in its own session, so a timeout kills it and all it started."""
    if shutil.which(argv[0]) is None:
        return _record(None, stderr=f"{argv[0]}: command not found", missing=True)
    try:
        process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            env=env,
        )
    except OSError as exc:
        return _record(None, stderr=f"{argv[0]}: {exc}", missing=True)
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(process)
        try:
            out, err = process.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            out, err = b"", b""
        return _record(
            None,
            out.decode("utf-8", "replace"),
            err.decode("utf-8", "replace") + f"\nkilled after {timeout:g}s",
            timed_out=True,
        )
    return _record(
        process.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")
    )


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        process.kill()


def read_text(path: str) -> str | None:
    # Read in small pieces: procfs answers one huge read() with ENOMEM.
    chunks: list[bytes] = []
    size = 0
    try:
        with open(path, "rb") as handle:
            while size <= STDOUT_LIMIT:
                chunk = handle.read(65536)
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
    except FileNotFoundError:
        return None
    return b"".join(chunks).decode("utf-8", "replace")


def read_file(path: str) -> Record:
    text = read_text(path)
    if text is None:
        return _record(None, stderr=f"{path}: no such file", missing=True)
    return _record(0, text)


def at(root: str, path: str) -> str:
    """`path` of the node under `root` (`/` on a node; a fake tree in tests)."""
    return os.path.join(root, path.lstrip("/"))


def read_files(root: str, patterns: list[str]) -> Record:
    """Several files as one probe: stdout is a JSON object of node path -> content."""
    contents: dict[str, str] = {}
    for pattern in patterns:
        for path in sorted(glob.glob(at(root, pattern))):
            if os.path.isfile(path):
                text = read_text(path)
                if text is not None:
                    contents["/" + os.path.relpath(path, root)] = text
    if not contents:
        return _record(None, stderr=f"none of {', '.join(patterns)} exists", missing=True)
    return _record(0, json.dumps(contents, sort_keys=True))


# Files whose sameness across nodes Slurm needs: the munge key (a credential made on one
# node must decode on every other) and the configuration slurmctld and slurmd both read.
SLURM_FILES = (
    "/etc/munge/munge.key",
    "/etc/slurm/slurm.conf",
    "/etc/slurm/gres.conf",
    "/etc/slurm/cgroup.conf",
    "/etc/slurm/topology.conf",
)


def _owner(uid: int, table: str) -> str:
    try:
        if table == "passwd":
            import pwd

            return pwd.getpwuid(uid).pw_name
        import grp

        return grp.getgrgid(uid).gr_name
    except (KeyError, ImportError):
        return str(uid)


def file_digests(root: str, paths: list[str]) -> Record:
    """Each file's sha256, mode and owner as JSON (null: absent); never its content."""
    import hashlib
    import stat

    found: dict[str, Any] = {}
    for path in paths:
        full = at(root, path)
        try:
            info = os.stat(full)
            digest = hashlib.sha256()
            with open(full, "rb") as handle:
                for chunk in iter(lambda: handle.read(65536), b""):
                    digest.update(chunk)
        except FileNotFoundError:
            found[path] = None
            continue
        except OSError as exc:
            found[path] = {"error": f"{type(exc).__name__}: {exc.strerror}"}
            continue
        found[path] = {
            "sha256": digest.hexdigest(),
            "mode": format(stat.S_IMODE(info.st_mode), "04o"),
            "owner": _owner(info.st_uid, "passwd"),
            "group": _owner(info.st_gid, "group"),
        }
    return _record(0, json.dumps(found, sort_keys=True))


# How many of the per-node validation jobs are submitted at once.
JOB_PARALLEL = 32


def srun_jobs(nodes: list[str], timeout: float) -> Record:
    """A tiny job on each of `nodes` (one `hostname -s` there), bounded in time.

    One job per node, so a broken node fails only itself. --immediate makes srun give up
    when the node cannot be allocated instead of queueing; --time bounds the job in Slurm;
    the timeout bounds srun itself. stdout: JSON node -> that srun's record."""
    wait = max(1, int(timeout) - 5)

    def one(node: str) -> Record:
        return run(
            [
                "srun", f"--immediate={wait}", "--time=1", "--nodes=1", "--ntasks=1",
                "--nodelist=" + node, "--job-name=myriad-validate", "hostname", "-s",
            ],
            timeout,
        )  # fmt: skip

    # Only idle nodes take the job: a busy node proves itself with the jobs it runs, and a
    # job queued behind them would only time out. Others are recorded with their state.
    states = run(["sinfo", "-h", "-N", "-n", ",".join(nodes), "-o", "%n %T"], timeout)
    seen: dict[str, str] = {}
    for line in states["stdout"].splitlines() if states["rc"] == 0 else []:
        parts = line.split()
        if len(parts) == 2:
            seen[parts[0]] = parts[1]
    free = [n for n in nodes if seen.get(n, "idle") == "idle"]
    with ThreadPoolExecutor(max_workers=max(1, min(JOB_PARALLEL, len(free) or 1))) as pool:
        outcomes = list(pool.map(one, free))
    records: dict[str, Any] = {node: outcomes[i] for i, node in enumerate(free)}
    records.update({n: {"skipped": seen[n]} for n in nodes if n not in records})
    if free and all(records[n].get("missing") for n in free):
        return _record(None, stderr="srun: command not found", missing=True)
    return _record(0, json.dumps(records, sort_keys=True))


def _attr(path: str) -> str | None:
    try:
        with open(path) as handle:
            return handle.read().strip()
    except (OSError, UnicodeDecodeError):
        return None


def sysfs_infiniband(root: str, top: str | None = None) -> Record:
    """Port state, rate, link layer and error counters of every RDMA device, its PCI
    function and netdevs; `top` replaces /sys/class/infiniband (the node health runner's
    tests read a tree built from captures)."""
    top = top or at(root, "/sys/class/infiniband")
    if not os.path.isdir(top):
        return _record(
            None, stderr="/sys/class/infiniband does not exist (no RDMA devices)", missing=True
        )
    files: dict[str, str] = {}
    devices: dict[str, dict[str, Any]] = {}
    for device in sorted(os.listdir(top)):
        base = os.path.join(top, device)
        for name in ("fw_ver", "hca_type", "board_id", "node_guid"):
            value = _attr(os.path.join(base, name))
            if value is not None:
                files[f"{device}/{name}"] = value
        for port in sorted(glob.glob(os.path.join(base, "ports", "*"))):
            number = os.path.basename(port)
            for name in ("state", "phys_state", "rate", "link_layer"):
                value = _attr(os.path.join(port, name))
                if value is not None:
                    files[f"{device}/ports/{number}/{name}"] = value
            for name in IB_ERROR_COUNTERS:
                value = _attr(os.path.join(port, "counters", name))
                if value is not None:
                    files[f"{device}/ports/{number}/counters/{name}"] = value
        pci = os.path.realpath(os.path.join(base, "device"))
        netdevs = (
            sorted(os.listdir(os.path.join(base, "device", "net")))
            if os.path.isdir(os.path.join(base, "device", "net"))
            else []
        )
        devices[device] = {"pci": os.path.basename(pci), "netdevs": netdevs}
    return _record(0, json.dumps({"files": files, "devices": devices}, sort_keys=True))


def pci_links(root: str) -> Record:
    """Link speed and width of NVIDIA and Mellanox PCI functions (physical functions only)."""
    top = at(root, "/sys/bus/pci/devices")
    if not os.path.isdir(top):
        return _record(None, stderr="/sys/bus/pci/devices does not exist", missing=True)
    functions: dict[str, dict[str, str | None]] = {}
    for address in sorted(os.listdir(top)):
        base = os.path.join(top, address)
        vendor = _attr(os.path.join(base, "vendor"))
        if vendor not in PCI_VENDORS or os.path.exists(os.path.join(base, "physfn")):
            continue
        entry: dict[str, str | None] = {"vendor": vendor}
        for name in (
            "device",
            "class",
            "current_link_speed",
            "current_link_width",
            "max_link_speed",
            "max_link_width",
            "numa_node",
        ):
            entry[name] = _attr(os.path.join(base, name))
        functions[address] = entry
    return _record(0, json.dumps(functions, sort_keys=True))


def hardware_map(root: str) -> Record:
    """The node's hardware map discovered now (myriad.node.hardware), as JSON text."""
    from myriad.node.hardware.discover import discover
    from myriad.node.hardware.sysfs import Sysfs

    return _record(0, stdout=json.dumps(discover(Sysfs(at(root, "/sys"))).to_json()))


def roce_gids(root: str) -> Record:
    """Port 1's populated GIDs and their types on every Ethernet RDMA device, as JSON."""
    from myriad.node.hardware.gids import roce_gids as read_gids
    from myriad.node.hardware.sysfs import Sysfs

    return _record(0, stdout=json.dumps(read_gids(Sysfs(at(root, "/sys")))))


def proc_bonding(root: str) -> Record:
    top = at(root, "/proc/net/bonding")
    if not os.path.isdir(top):
        return _record(
            None, stderr="/proc/net/bonding does not exist (bonding not loaded)", missing=True
        )
    bonds: dict[str, str] = {}
    for name in sorted(os.listdir(top)):
        text = read_text(os.path.join(top, name))
        if text is not None:
            bonds[name] = text
    return _record(0, json.dumps(bonds, sort_keys=True))


def memlock_session(timeout: float) -> Record:
    # pam_limits applies limits.d in a PAM session (su -, sshd), not in the session Ansible
    # runs this script from, so the limit a user's job gets is read through `su -`.
    return run(["su", "-", "root", "-c", "ulimit -S -l; ulimit -H -l"], timeout)


def kubectl_nodes(timeout: float) -> Record:
    env = dict(os.environ)
    if "KUBECONFIG" not in env:
        for path in KUBECONFIGS:
            if os.path.isfile(path):
                env["KUBECONFIG"] = path
                break
    return run(["kubectl", "get", "nodes", "-o", "json"], timeout, env=env)


def probes(args: argparse.Namespace) -> dict[str, Callable[[], Record]]:
    """Probe name -> zero-argument callable; names are the contract with myriad.node.facts."""
    t, root = args.timeout, args.root
    table: dict[str, Callable[[], Record]] = {
        "hostname": lambda: read_file(at(root, "/proc/sys/kernel/hostname")),
        "nvidia_smi": lambda: run(["nvidia-smi", "-q", "-x"], t),
        "nvlink": lambda: run(["nvidia-smi", "nvlink", "--status"], t),
        "ibstat": lambda: run(["ibstat"], t),
        "sysfs_infiniband": lambda: sysfs_infiniband(root, getattr(args, "infiniband", None)),
        "pci": lambda: pci_links(root),
        "bonding": lambda: proc_bonding(root),
        "ip_link": lambda: run(["ip", "-j", "-d", "link"], t),
        # IPv4 addresses per interface: a RoCE rail's address is what gives it a RoCEv2 GID.
        "ip_addr": lambda: run(["ip", "-j", "-4", "addr"], t),
        "docker_info": lambda: run(["docker", "info", "--format", "{{json .}}"], t),
        "docker_daemon_json": lambda: read_file(at(root, "/etc/docker/daemon.json")),
        "containerd_config": lambda: read_files(
            root, ["/etc/containerd/config.toml", "/etc/containerd/conf.d/*.toml"]
        ),
        "nccl_conf": lambda: read_file(at(root, "/etc/nccl.conf")),
        # Image mode: the record of the baked image the node was started from.
        "image_record": lambda: read_file(at(root, "/etc/myriad/image.json")),
        # AWS EFA: the RDM endpoints libfabric's efa provider offers, one domain per device;
        # where the EFA installer puts fi_info (missing on nodes without EFA software).
        "fi_info_efa": lambda: run(
            ["/opt/amazon/efa/bin/fi_info", "-p", "efa", "-t", "FI_EP_RDM"], t
        ),
        "memlock_session": lambda: memlock_session(t),
        # What the node was started with: in a container, the most its sessions can get.
        "init_limits": lambda: read_file(at(root, "/proc/1/limits")),
        "limits": lambda: read_files(
            root, ["/etc/security/limits.conf", "/etc/security/limits.d/*.conf"]
        ),
        "units": lambda: run(["systemctl", "is-active", *args.units], t),
        # lsmod prints /proc/modules as a table; reading the file needs no kmod package.
        "modules": lambda: read_file(at(root, "/proc/modules")),
        "hosts": lambda: read_file(at(root, "/etc/hosts")),
        "timedatectl": lambda: run(["timedatectl", "show"], t),
        "chrony_tracking": lambda: run(["chronyc", "-n", "tracking"], t),
        "slurm_files": lambda: file_digests(root, list(SLURM_FILES)),
        # The hardware map the rdma role recorded, and the map as discovery finds it now.
        "hardware_record": lambda: read_file(at(root, HARDWARE_RECORD)),
        "hardware_map": lambda: hardware_map(root),
        "roce_gids": lambda: roce_gids(root),
        # The node health runner's last state (myriad-health), for `myriad health`.
        "health_state": lambda: read_file(at(root, HEALTH_STATE)),
    }
    for interface in args.qos_nics:
        table["mlnx_qos:" + interface] = (lambda i: lambda: run(["mlnx_qos", "-i", i], t))(
            interface
        )
    if args.mount:
        table["findmnt"] = lambda: run(["findmnt", "-J", "--mountpoint", args.mount], t)
    if args.controller == "slurm":
        table["scontrol_nodes"] = lambda: run(["scontrol", "show", "node", "-o"], t)
        table["scontrol_topology"] = lambda: run(["scontrol", "show", "topology"], t)
        table["sinfo"] = lambda: run(["sinfo", "-N", "-h", "-o", "%n %T %G"], t)
        if args.job_nodes:
            table["srun_job"] = lambda: srun_jobs(args.job_nodes, args.job_timeout)
    elif args.controller == "kubernetes":
        table["kubectl_nodes"] = lambda: kubectl_nodes(t)
    return table


def _safe(probe: Callable[[], Record]) -> Record:
    try:
        return probe()
    except Exception as exc:  # one broken probe must not cost the node its other facts
        return _record(None, stderr=f"probe failed: {type(exc).__name__}: {exc}")


def gather(args: argparse.Namespace) -> dict[str, Any]:
    started = time.time()
    table = probes(args)
    with ThreadPoolExecutor(max_workers=min(16, len(table))) as pool:
        futures = {name: pool.submit(_safe, probe) for name, probe in table.items()}
        results = {name: future.result() for name, future in futures.items()}
    return {
        "schema": SCHEMA,
        "host": socket.gethostname(),
        "started": started,
        "seconds": round(time.time() - started, 3),
        # What was asked for: `units` answers come back in this order.
        "args": {
            "controller": args.controller,
            "qos_nics": args.qos_nics,
            "units": args.units,
            "mount": args.mount,
            "job_nodes": args.job_nodes,
        },
        "probes": results,
    }


def _names(value: str) -> list[str]:
    return [item for item in value.replace(",", " ").split() if item]


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--controller",
        choices=("slurm", "kubernetes", "none"),
        default="none",
        help="also ask the orchestrator for the cluster's view (run on controllers)",
    )
    parser.add_argument("--qos-nics", type=_names, default=[], help="netdevs for mlnx_qos")
    parser.add_argument("--units", type=_names, default=list(DEFAULT_UNITS))
    parser.add_argument("--mount", default="", help="storage mount point to look up")
    parser.add_argument(
        "--job-nodes", type=_names, default=[], help="with --controller slurm: run a job here"
    )
    parser.add_argument("--job-timeout", type=float, default=60.0, help="the job's bound, s")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="per probe, s")
    parser.add_argument("--compress", action="store_true", help="print the document gzipped")
    parser.add_argument("--root", default="/", help="read the node's files under ROOT (tests)")
    return parser.parse_args(argv)


def encode(document: dict[str, Any], compress: bool) -> str:
    text = json.dumps(document, sort_keys=True)
    if not compress:
        return text
    # nvidia-smi's XML shrinks about tenfold: less to carry over SSH, to keep in Ansible's
    # event log and in the control node's memory for thousands of nodes.
    packed = base64.b64encode(gzip.compress(text.encode("utf-8"), 6)).decode("ascii")
    return json.dumps({"schema": SCHEMA, "encoding": "gzip+base64", "data": packed})


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    sys.stdout.write(encode(gather(args), args.compress) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
