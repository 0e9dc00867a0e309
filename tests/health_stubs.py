"""Stand-ins for GPU and RDMA hardware, built from real captures, for the node health tests
(tests/health, tests/integration/test_health_local.py) and benchmarks/health_run.py.

These machines have no GPUs and no HCAs. `nvidia-smi -q -x` is answered by a stub that
prints the real A100 capture (tests/samples/nvidia-smi-q-x, telegraf) with its one <gpu>
block repeated for each GPU and the product name and driver of the real 8 x H100 capture
(tests/samples/nvidia-smi-q-text, gpud); /sys/class/infiniband is a tree with the real
ConnectX-3 port files of node_exporter's fixture under each device name the spec gives.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

# Where the twin's stand-in driver lists its GPUs, as the real one does in
# /proc/driver/nvidia/gpus: the directory render points slurmd's pre-start at.
from myriad.render.role_vars import TWIN_GPU_DRIVER_DIR

SAMPLES = Path(__file__).resolve().parent / "samples"
A100_XML = SAMPLES / "nvidia-smi-q-x" / "a100-sxm4-80gb-x4-mig_v12_drv535.54.03.xml"
H100_TEXT = SAMPLES / "nvidia-smi-q-text" / "h100-80gb-hbm3-x8_drv535.161.08_nvidia-smi-q.txt"
MLX4_PORT = SAMPLES / "sysfs-infiniband" / "node_exporter-mlx4_0-i40iw0" / "mlx4_0"


def _h100() -> tuple[str, str]:
    text = H100_TEXT.read_text()
    product = re.search(r"Product Name\s+: (.+)", text)
    driver = re.search(r"Driver Version\s+: (\S+)", text)
    assert product and driver
    return product.group(1).strip(), driver.group(1)


def gpu_xml(count: int, driver: str | None = None) -> str:
    """`nvidia-smi -q -x` of `count` H100s (see the module docstring); the driver version is
    the H100 capture's unless `driver` is given."""
    text = A100_XML.read_text()
    start, end = text.index("    <gpu id="), text.index("    </gpu>") + len("    </gpu>\n")
    block = text[start:end]
    product, captured = _h100()
    driver = driver or captured
    gpus = []
    for index in range(count):
        bus = f"00000000:{0x18 + index:02X}:00.0"
        one = block.replace("00000000:01:00.0", bus)
        one = one.replace("NVIDIA A100-SXM4-80GB", product)
        one = re.sub(
            r"<minor_number>\d+</minor_number>", f"<minor_number>{index}</minor_number>", one
        )
        one = re.sub(r"GPU-[0-9a-f-]+", f"GPU-00000000-0000-0000-0000-{index:012d}", one)
        gpus.append(one)
    head = text[:start].replace(
        "<attached_gpus>4</attached_gpus>", f"<attached_gpus>{count}</attached_gpus>"
    )
    head = head.replace("535.54.03", driver)
    return head + "".join(gpus) + text[end:]


def ecc_off_xml(count: int, index: int, driver: str | None = None) -> str:
    """`gpu_xml(count)` with GPU `index`'s ECC off now and on after the next reset (current
    Disabled, pending Enabled): what `nvidia-smi -e 1` leaves until a GPU reset applies it."""
    head, *gpus = gpu_xml(count, driver).split("    <gpu id=")
    on = "<current_ecc>Enabled</current_ecc>"
    assert gpus[index].count(on) == 1
    gpus[index] = gpus[index].replace(on, "<current_ecc>Disabled</current_ecc>")
    return "    <gpu id=".join([head, *gpus])


# A GB200 tray's fabric values as gpud printed them from NVML (leptonai/gpud pull request
# #1106): Completed, Success, clique 4026 of one cluster, health summary Not Supported.
GB200_CLIQUE, GB200_CLUSTER = 4026, "9c6f5af3-53bf-49b5-a436-b66766c413c3"
# A 580 data center driver release (NVIDIA GPU Operator's release notes list 580.82.07):
# what the stubs report where the spec asks for branch 580.
DRIVER_580 = "580.82.07"
# The name a GB200's driver gives its GPU (`nvidia-smi -L` on a GB200 tray, quoted in
# NVIDIA/k8s-dra-driver-gpu's bats tests: "GPU 0: NVIDIA GB200 (UUID: ...)").
GB200_PRODUCT = "NVIDIA GB200"


def fabric_xml(
    count: int,
    cliques: Mapping[int, int] | None = None,
    *,
    state: str = "Completed",
    status: str = "Success",
    summary: str = "Not Supported",
    product: str | None = None,
    driver: str | None = None,
) -> str:
    """`nvidia-smi -q -x` of `count` GPUs (tests/health_stubs.py) whose Fabric sections hold
    the values above, in the element names of the real DTD v13 capture; GPU i in clique
    `cliques[i]` where given; named `product` where given (else the H100's name); of
    `driver` where given."""
    text = gpu_xml(count, driver)
    if product is not None:
        text = text.replace(_h100()[0], product)
    blocks = text.split("<fabric>")
    assert len(blocks) == count + 1
    out = [blocks[0]]
    for index, rest in enumerate(blocks[1:]):
        clique = (cliques or {}).get(index, GB200_CLIQUE)
        _, tail = rest.split("</fabric>", 1)
        out.append(
            f"<fabric><state>{state}</state><status>{status}</status>"
            f"<cliqueId>{clique}</cliqueId><clusterUuid>{GB200_CLUSTER}</clusterUuid>"
            f"<health><summary>{summary}</summary><bandwidth>N/A</bandwidth></health>"
            f"</fabric>{tail}"
        )
    return "".join(out)


# The twin's rack-scale trays (`twin_rack_catalog`): four GB200s each, as a GB200 NVL72
# compute tray has.
TRAY_GPUS = 4


def tray_xml(cliques: Mapping[int, int] | None = None) -> str:
    """`nvidia-smi -q -x` of a twin tray: its four GB200s, under a 580 driver (Blackwell
    needs 570 or newer), GPU i in clique `cliques[i]` where given."""
    return fabric_xml(TRAY_GPUS, cliques, product=GB200_PRODUCT, driver=DRIVER_580)


IMEX_CAPTURE = (
    SAMPLES
    / "nvidia-imex-ctl"
    / "p6e-gb200-ultraserver_18-nodes_imex-570.172_domain-up_nvidia-imex-ctl-N.txt"
)


def imex_status(addresses: list[str]) -> str:
    """`nvidia-imex-ctl -N` of a domain of these nodes, all READY and connected: the real
    18-node capture (tests/samples/nvidia-imex-ctl) cut to `len(addresses)` nodes, its
    addresses replaced in their columns."""
    lines = IMEX_CAPTURE.read_text().splitlines()
    count = len(addresses)
    nodes = [i for i, line in enumerate(lines) if line.startswith("Node #")]
    header = next(i for i, line in enumerate(lines) if "Nodes From\\To" in line)
    assert count <= len(nodes)
    width = 4  # the matrix's columns, as the capture spaces them
    start = lines[header].index(" 0 ") + 1
    out = lines[: nodes[0]]
    for index, address in enumerate(addresses):
        line = lines[nodes[index]]
        old = line.split(" - ")[1]
        out.append(line.replace(old, address.ljust(len(old)), 1))
    out += lines[nodes[-1] + 1 : header]
    out.append((lines[header][:start] + "".join(f"{j:<{width}}" for j in range(count))).rstrip())
    for row in range(count):
        line = lines[header + 1 + row]
        out.append(line[: start + width * count].rstrip())
    out += lines[header + 1 + len(nodes) :]
    return "\n".join(out) + "\n"


def imex_ctl_script(addresses: list[str]) -> str:
    """A stub `nvidia-imex-ctl` that prints `imex_status(addresses)` whatever it is asked."""
    head = "#!/bin/sh\n# Test stub (tests/health_stubs.py).\n"
    return f"{head}cat <<'EOF'\n{imex_status(addresses)}EOF\n"


# A fault written here outlives nothing: /run is emptied at a (container's) reboot, as a GPU
# that fell off the bus is back on it after a real one.
FAULT_XML = "/run/myriad-health-test/nvidia-smi.xml"
# One process id a line, as `nvidia-smi --query-compute-apps=pid --format=csv,noheader` prints
# them: while this file has any, the GPUs are in use (a job's process, or another client).
GPU_PROCESSES = "/run/myriad-health-test/gpu-processes"
# What nvidia-smi says, exit 255, when a process holds a GPU it is asked to reset (NVIDIA/
# NVSentinel issue #1690, driver output quoted there; the same text in NVIDIA/gpu-operator
# issue #118). nvidia-smi(1), -r/--gpu-reset: root only, and no application may be using
# the devices (manpages.ubuntu.com, nvidia-utils-530 530.41.03).
RESET_REFUSED = (
    "The following GPUs could not be reset:\n  GPU {bus}: In use by another client\n\n"
    "1 device is currently being used by one or more other processes (e.g., Fabric Manager, "
    "CUDA application, graphics application such as an X server, or a monitoring application "
    "such as another instance of nvidia-smi). Please first kill all processes using this "
    "device and all compute applications running in the system."
)


def nvidia_smi_script(
    xml_file: str,
    nvlink_file: str | None = None,
    *,
    calls_file: str | None = None,
    fault_file: str = FAULT_XML,
    processes_file: str = GPU_PROCESSES,
) -> str:
    """A stub `nvidia-smi` that prints the file for `-q -x` (`fault_file` instead while it
    exists), `nvlink --status`, the process ids in `processes_file` for
    `--query-compute-apps`, and answers a GPU reset (`-r`, every GPU) as the real one does:
    refused, exit 255, while a process holds a GPU; else each GPU "successfully reset" and
    the fault state gone (a reset applies what is pending, and the pending state is the
    healthy file). Each `--query-compute-apps` and `-r` is noted in `calls_file`."""
    nvlink = f'    nvlink) cat "{nvlink_file}" ;;\n' if nvlink_file else ""
    note = f'echo "$*" >> "{calls_file}"; ' if calls_file else ""
    refused = RESET_REFUSED.replace("{bus}", "$first")
    buses = f'sed -n \'s/.*<gpu id="\\([^"]*\\)".*/\\1/p\' "{xml_file}"'
    return (
        "#!/bin/sh\n# Test stub: answers from captures (tests/health_stubs.py).\n"
        'case "$1" in\n'
        f'    -q) if [ -s "{fault_file}" ]; then cat "{fault_file}"; else cat "{xml_file}"; fi ;;\n'
        f"{nvlink}"
        f'    --query-compute-apps=*) {note}cat "{processes_file}" 2>/dev/null || : ;;\n'
        f"    -r) {note.rstrip()}\n"
        f'        if [ -s "{processes_file}" ]; then\n'
        f"            first=$({buses} | head -n 1)\n"
        f'            printf "%b\\n" "{refused}" >&2; exit 255\n'
        "        fi\n"
        f'        rm -f "{fault_file}"\n'
        f'        for bus in $({buses}); do echo "GPU $bus was successfully reset."; done ;;\n'
        '    *) echo "stub nvidia-smi: $*" >&2; exit 2 ;;\n'
        "esac\n"
    )


# While this file exists the stand-in driver's module "loads"; without it, it fails to, as a
# module does while DKMS has not built it or Secure Boot refuses it.
TWIN_MODULE_FILE = "/etc/myriad-twin/nvidia.ko"
# nvidia-uvm's major is dynamic on a real node; any free one does for a stand-in.
UVM_MAJOR = 235


def twin_driver_unit(count: int) -> str:
    """A stand-in `nvidia-persistenced.service`: the driver, loaded at boot, lists its GPUs.

    It is the unit slurmd's GPU drop-in starts after and wants: it lists `count` GPUs under
    /run (which a container restart empties, as a reboot empties /proc/driver/nvidia) when
    the module loads, and fails, as nvidia-persistenced does without the driver, when not.
    """
    buses = " ".join(f"0000:{0x18 + index:02x}:00.0" for index in range(count))
    load = (
        f"test -e {TWIN_MODULE_FILE} || {{ echo 'stand-in: the nvidia module did not load' >&2; "
        f"exit 1; }}; for bus in {buses}; do mkdir -p {TWIN_GPU_DRIVER_DIR}/$$bus; done"
    )
    return (
        "# Test stub (tests/health_stubs.py): the twin's stand-in NVIDIA driver.\n"
        "[Unit]\nDescription=Stand-in NVIDIA driver of the local twin\n\n"
        "[Service]\nType=oneshot\nRemainAfterExit=yes\n"
        f'ExecStart=/bin/sh -c "{load}"\n'
        f"ExecStop=/bin/rm -rf {TWIN_GPU_DRIVER_DIR}\n\n"
        "[Install]\nWantedBy=multi-user.target\n"
    )


def nvidia_modprobe_script() -> str:
    """A stub `nvidia-modprobe`: the device nodes the real one makes, once the driver is there.

    `-c N` makes /dev/nvidiaN (major 195, NVIDIA's) and /dev/nvidiactl; `-u` /dev/nvidia-uvm.
    Without the stand-in driver it fails, as the real one does when the module cannot load.
    """
    return (
        "#!/bin/sh\n# Test stub (tests/health_stubs.py): the twin's nvidia-modprobe.\n"
        "set -eu\n"
        f'[ -d {TWIN_GPU_DRIVER_DIR} ] || {{ echo "stub nvidia-modprobe: no driver" >&2; '
        "exit 1; }\n"
        "uvm=0 minor=0\n"
        'while [ $# -gt 0 ]; do\n  case "$1" in -u) uvm=1 ;; -c) minor="$2"; shift ;; esac\n'
        "  shift\ndone\n"
        "[ -e /dev/nvidiactl ] || mknod /dev/nvidiactl c 195 255\n"
        'if [ "$uvm" = 1 ]; then\n'
        f"  [ -e /dev/nvidia-uvm ] || mknod /dev/nvidia-uvm c {UVM_MAJOR} 0\n  exit 0\nfi\n"
        '[ -e "/dev/nvidia$minor" ] || mknod "/dev/nvidia$minor" c 195 "$minor"\n'
    )


def infiniband_tree(root: Path, devices: list[str], link_downed: int = 0) -> Path:
    """/sys/class/infiniband under `root`: each device a copy of the capture's mlx4_0 with
    port 1 only, link_downed set as asked."""
    top = root / "infiniband"
    for device in devices:
        target = top / device
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(MLX4_PORT, target, ignore=shutil.ignore_patterns("2"))
        set_counter(top, device, "link_downed", link_downed)
    return top


def set_counter(top: Path, device: str, counter: str, value: int) -> None:
    (top / device / "ports" / "1" / "counters" / counter).write_text(f"{value}\n")


def twin_rack_catalog(trays: int) -> dict[str, Any]:
    """A spec's `catalog:` section for the twin's rack-scale pool: a GB200 NVL72 rack cut to
    `trays` compute trays (containers, no switch trays), so a few containers are one whole
    NVLink domain; its tray is `twin-nvl-tray`. Test-only: the figures are the stand-in's."""
    rack = f"twin-nvl{trays}"
    why = "test-only stand-in: a GB200 NVL72 rack (18 trays) cut to the twin's containers"
    return {
        "racks": {
            rack: {
                "compute_trays": trays,
                "switch_trays": 0,
                "gpus": TRAY_GPUS * trays,
                "cpus": 2 * trays,
                "nvlink_domain_tbs": 7.2 * trays,
                "max_power_kw": 1.0,
                "cooling": "air",
                "source": why,
            }
        },
        "servers": {
            "twin-nvl-tray": {
                "gpu_model": "GB200-186GB",
                "gpu_count": TRAY_GPUS,
                "cpu": {"sockets": 2, "cores_per_socket": 1},
                "memory_gib": 2,
                "pcie_gen": 5,
                "pcie_switches": 0,
                "nvswitch": 0,
                "compute_nics": {"model": "ConnectX-7", "count": 4},
                "max_power_kw": 0.1,
                "rack_units": 1,
                "rack_system": rack,
                "source": why,
            }
        },
    }


TRAY_PROFILE = {
    "server": "twin-nvl-tray",
    "gpu": {"model": "GB200-186GB", "count": TRAY_GPUS},
    "cpu": {"sockets": 1, "cores_per_socket": 2, "threads_per_core": 1},
    "memory_gib": 2,
}


def h100_spec(
    name: str, management: str, health: dict[str, Any] | None = None, *, trays: int = 0
) -> dict[str, Any]:
    """A test-only spec: one controller and two compute nodes declaring 8 x H100 and two
    ConnectX-7 on InfiniBand, on the local provider; node health on with the given section.
    With `trays`, a pool `tray` of that many trays of one rack-scale NVLink domain
    (`twin_rack_catalog`) beside them."""
    spec: dict[str, Any] = {
        "apiVersion": "myriad/v1",
        "kind": "Cluster",
        "metadata": {"name": name, "description": "node health test (stub GPUs and HCAs)"},
        "provider": {"kind": "local"},
        "profiles": {
            "container": {
                "cpu": {"sockets": 1, "cores_per_socket": 2, "threads_per_core": 1},
                "memory_gib": 2,
            },
            "h100": {
                "gpu": {"model": "H100-SXM5-80GB", "count": 8},
                "cpu": {"sockets": 1, "cores_per_socket": 2, "threads_per_core": 1},
                "memory_gib": 2,
                "nics": {"compute": {"model": "ConnectX-7", "count": 2}},
            },
        },
        "pools": [
            {"name": "ctl", "profile": "container", "count": 1, "role": "controller"},
            {"name": "node", "profile": "h100", "count": 2, "role": "compute"},
        ],
        "network": {
            "fabric": "infiniband",
            "topology": {"kind": "fat-tree", "switch": "QM9700"},
            "addressing": {"management": management},
        },
        "software": {
            "os": "debian-12",
            # Blackwell trays need 570 or newer (lint driver-gpu).
            "nvidia_driver": "580" if trays else "535",
            "container_runtime": "docker",
            "orchestrator": "slurm",
            # A test cluster of stubbed GPUs runs no container jobs (plan: slurm-no-containers).
            "slurm": {"no_containers": True},
        },
        "health": health if health is not None else {},
    }
    if trays:
        spec["profiles"]["tray"] = TRAY_PROFILE
        spec["pools"].append({"name": "tray", "profile": "tray", "count": trays, "role": "compute"})
        spec["catalog"] = twin_rack_catalog(trays)
    return spec
