"""A fake Slurm controller for `myriad accept`'s tests: Slurm's node states and updates
through `Slurm`'s runner, and the test steps as `ops/accept.py`'s `Commands`, each answered
with a stand-in output (tests/accept_stubs.py) measured from one slow node."""

from __future__ import annotations

from collections.abc import Sequence

from accept_stubs import SAMPLES, dcgm_output, ib_write_bw_output, nccl_output
from myriad.ops.accept_plan import SAMPLES_MARK
from myriad.ops.slurm import Completed, Slurm

NODES = ("node01", "node02", "node03", "node04")
# `nvidia-smi -q -x` of two RTX A5000 (driver 590), each GPU on a x16 link.
GPU_SAMPLE = SAMPLES / "nvidia-smi-q-x" / "rtx-a5000-x2_v13_drv590.44.01.xml"


# `nvidia-smi --query-gpu=... --format=csv` of an H100 under gpu-burn (driver 590): one row.
QUERY_GPU = SAMPLES / "nvidia-smi-query-gpu" / "h100-80gb-hbm3_drv590.48.01_gpu-burn-load.csv"


def gpu_query_samples(hot: bool = False) -> str:
    """The capture as the burn-in's sampler prints it; `hot`: a second sample of the same
    GPU follows, its HW Thermal Slowdown Active."""
    header, row = QUERY_GPU.read_text().splitlines()
    if not hot:
        return f"{header}\n{row}\n"
    names = [cell.strip() for cell in header.split(",")]
    cells = row.split(", ")
    assert len(cells) == len(names)  # no value in this row holds ", "
    cells[names.index("clocks_event_reasons.hw_thermal_slowdown")] = "Active"
    return f"{header}\n{row}\n{', '.join(cells)}\n"


def gpu_sample(narrow: bool = False) -> str:
    """The capture; `narrow`: its first GPU's link trained at x8 of x16."""
    text = GPU_SAMPLE.read_text()
    if narrow:
        text = text.replace(
            "<current_link_width>16x</current_link_width>",
            "<current_link_width>8x</current_link_width>",
            1,
        )
    return text


def _node(argv: Sequence[str]) -> str:
    return next(a for a in argv if a.startswith("--nodelist=")).split("=", 1)[1]


class Controller:
    """Slurm's node states and updates (through `Slurm`'s runner), and the test steps (as
    `Commands`), measured from one slow node."""

    def __init__(
        self,
        slow: str = "",
        reasons: dict[str, str] | None = None,
        narrow: str = "",
        hot: str = "",
    ) -> None:
        self.slow = slow
        self.narrow = narrow
        self.hot = hot
        self.reasons = reasons or {}
        self.updates: list[tuple[str, ...]] = []
        self.steps: list[tuple[str, ...]] = []
        self.drained: dict[str, str] = {}
        self.resumed: list[str] = []
        # Each `run_lanes` call: the first node of each lane, in order.
        self.waves: list[list[str]] = []

    def slurm(self) -> Slurm:
        def answer(argv: Sequence[str]) -> Completed:
            if argv[0] == "sinfo":
                lines = [
                    f"{n}|{'drained' if n in self.reasons else 'idle'}|"
                    f"{self.reasons.get(n, 'none')}"
                    for n in NODES
                ]
                return Completed(0, "\n".join(lines) + "\n", "")
            self.updates.append(tuple(argv))
            return Completed(0, "", "")

        return Slurm(["ctl"], run=answer)

    def run(self, argv: Sequence[str]) -> tuple[int, str]:
        self.steps.append(tuple(argv))
        if argv[0] == "scontrol":
            return 0, ""
        nodes = next(a for a in argv if a.startswith("--nodelist=")).split("=", 1)[1].split(",")
        if "dcgmi" in argv:
            return 0, dcgm_output()
        if any(SAMPLES_MARK in a for a in argv):  # the burn-in's sampled DCGM
            samples = gpu_query_samples(hot=self.hot in nodes)
            return 0, f"{dcgm_output()}\n{SAMPLES_MARK}\n{samples}"
        if any(a.startswith("nvidia-smi -q -x") for a in argv):
            return 0, gpu_sample(narrow=self.narrow in nodes)
        if "ib_write_bw" in argv:
            return 0, ib_write_bw_output(214.2)
        if len(nodes) == 1:
            return 0, nccl_output(150.0 if self.slow in nodes else 360.0)
        return 0, nccl_output(100.0 if self.slow in nodes else 214.2)

    def run_lanes(self, lanes: Sequence[Sequence[Sequence[str]]]) -> list[list[tuple[int, str]]]:
        self.waves.append([_node(lane[0]) for lane in lanes])
        return [[self.run(argv) for argv in lane] for lane in lanes]

    def start(self, argv: Sequence[str]) -> object:
        self.steps.append(("start", *argv))
        return None

    def reap(self, handle: object) -> None:
        self.steps.append(("reap",))

    def drain(self, node: str, reason: str) -> None:
        self.drained[node] = reason

    def resume(self, node: str) -> None:
        self.resumed.append(node)
