"""Stand-ins for DCGM, nccl-tests and perftest, built from real captures, for `myriad accept`
on the local twin (no GPU, no HCA there).

Each function returns a real capture with its figures changed to a node's profile, so the
node parsers (`myriad.node.parsers`) read it as they read the real tool: the nccl-tests
capture (tests/samples/nccl-tests, two 8 x H100 nodes) with every row's algbw and busbw scaled
so the largest message reaches the profile's busbw; the ib_write_bw capture
(tests/samples/perftest, RoCE, Gb/s) with its bandwidth scaled the same way; `dcgmi diag -j`
(tests/samples/dcgm-diag, DCGM 3.1, level 1) with one named test turned to FAIL.
`standin_script` is the executable the twin's node gets in place of the tool: it prints the
file rendered for that node, as tests/health_stubs.py's `nvidia_smi_script` does.
"""

from __future__ import annotations

import re
from pathlib import Path

SAMPLES = Path(__file__).resolve().parent / "samples"
NCCL_ALL_REDUCE = SAMPLES / "nccl-tests" / "a3mega-h100x8-x2_all_reduce_perf_8B-8G.txt"
IB_WRITE_BW = SAMPLES / "perftest" / "rocm-doc_roce_ib_write_bw_bidir_all-sizes_gbits.txt"
DCGM_R1 = SAMPLES / "dcgm-diag" / "dcgm-3.1.0_8gpu_diag-r1_json.txt"

# nccl-tests' data row: size count type redop root, then time algbw busbw #wrong twice.
_NCCL_ROW = re.compile(r"^(\s*\d+\s+\d+\s+\S+\s+\S+\s+-?\d+)((?:\s+\S+){8})\s*$")
_AVG = re.compile(r"^(# Avg bus bandwidth\s*:\s*)([\d.]+)", re.MULTILINE)
_PERF_ROW = re.compile(r"^(\d+)(\s+)(\d+)(\s+)([\d.]+)(\s+)([\d.]+)(\s+)(\S+)\s*$")


def _nccl_scale(text: str) -> float:
    last = [m for m in map(_NCCL_ROW.match, text.splitlines()) if m][-1]
    return float(last.group(2).split()[2])


def nccl_output(busbw_gbs: float, capture: Path = NCCL_ALL_REDUCE) -> str:
    """The capture with algbw and busbw of every row scaled so the largest message's
    out-of-place busbw is `busbw_gbs`, and the average line scaled alike."""
    text = capture.read_text()
    factor = busbw_gbs / _nccl_scale(text)
    out = []
    for line in text.splitlines():
        match = _NCCL_ROW.match(line)
        if match:
            cols = match.group(2).split()
            for i in (1, 2, 5, 6):  # algbw, busbw out of place; the same in place
                cols[i] = f"{float(cols[i]) * factor:.2f}"
            line = match.group(1) + "".join(f"  {c:>6}" for c in cols)
        out.append(line)
    body = "\n".join(out) + "\n"
    return _AVG.sub(lambda m: f"{m.group(1)}{float(m.group(2)) * factor:.3f}", body)


def ib_write_bw_output(gbits: float, capture: Path = IB_WRITE_BW) -> str:
    """The capture with peak and average bandwidth of every row scaled so the largest
    message's average is `gbits` Gb/s."""
    text = capture.read_text()
    rows = [m for m in map(_PERF_ROW.match, text.splitlines()) if m]
    factor = gbits / float(rows[-1].group(7))
    out = []
    for line in text.splitlines():
        m = _PERF_ROW.match(line)
        if m:
            peak = f"{float(m.group(5)) * factor:.2f}"
            avg = f"{float(m.group(7)) * factor:.2f}"
            line = f"{m.group(1)}{m.group(2)}{m.group(3)}{m.group(4)}{peak}{m.group(6)}{avg}"
            line += f"{m.group(8)}{m.group(9)}"
        out.append(line)
    return "\n".join(out) + "\n"


def dcgm_output(failing_test: str | None = None, capture: Path = DCGM_R1) -> str:
    """The level-1 capture; with `failing_test`, that test's result turned to FAIL."""
    text = capture.read_text()
    if failing_test is None:
        return text
    start = text.find(f'"name" : "{failing_test}"')
    if start < 0:
        raise ValueError(f"the capture has no test {failing_test!r}")
    status = text.index('"status" : "PASS"', start)
    return text[:status] + '"status" : "FAIL"' + text[status + len('"status" : "PASS"') :]


def standin_script(tool: str, output_file: str) -> str:
    """The stand-in `tool`: prints the file rendered for this node, exit status 0 as the
    real tools give when they ran (a FAIL is in the output, not the status)."""
    return (
        f"#!/bin/sh\n# Stand-in {tool} for the twin: prints a real capture with this node's "
        "figures (tests/accept_stubs.py).\n"
        f'cat "{output_file}"\n'
    )


def gpu_twin_spec(local_spec: str, name: str, nodes: int = 4) -> str:
    """The local twin's spec (inventories/local/cluster.yaml's text) with `nodes` compute
    nodes of eight H100 GPUs and eight ConnectX-7 ports: the stand-ins give them figures,
    the plan its expected ones. The containers have neither; only the spec says so."""
    text = local_spec.replace("  name: local", f"  name: {name}")
    text = text.replace(
        "    memory_gib: 2\n",
        "    memory_gib: 2\n  gpunode:\n    gpu: {model: H100-SXM5-80GB, count: 8}\n"
        "    cpu: {sockets: 1, cores_per_socket: 2, threads_per_core: 1}\n    memory_gib: 2\n"
        "    nics:\n      compute: {model: ConnectX-7, count: 8}\n",
        1,
    )
    text = text.replace(
        "{name: node, profile: container, count: 3, role: compute}",
        f"{{name: node, profile: gpunode, count: {nodes}, role: compute}}",
    )
    # A GPU cluster needs a driver branch, and without vouched Enroot checksums, no containers.
    return text.replace(
        "  orchestrator: slurm\n",
        '  orchestrator: slurm\n  nvidia_driver: "580"\n  slurm: {no_containers: true}\n',
    )
