"""A simulated InfiniBand subnet for tests and benchmarks: ibsim with a net file, and
infiniband-diags / OpenSM run against it through ibsim-run's preloaded umad2sim.

Each Simulator has its own socket name (IBSIM_SOCKNAME, abstract unix sockets), so runs in
parallel never meet, and is always stopped on leaving the `with` block. Clients are run
with a timeout: a client of a dead simulator waits for ever.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
import uuid
from dataclasses import replace
from pathlib import Path
from types import TracebackType

from myriad.node.parsers.ibnetdiscover import IbLink, IbNode, IbTopology
from myriad.plan.cabling import Cable, iter_cables
from myriad.plan.ibnet import NetLink, sim_speed, switch_port_counts
from myriad.plan.pipeline import plan_spec

TOOLS = ("ibsim", "ibsim-run", "ibnetdiscover")


def available() -> bool:
    return all(shutil.which(tool) for tool in TOOLS)


class Simulator:
    def __init__(self, net_file: Path, *, nodes: int = 4096, switches: int = 512) -> None:
        self.net_file = net_file
        self.sockname = f"myriad-{uuid.uuid4().hex[:12]}"
        self.nodes, self.switches = nodes, switches
        self.process: subprocess.Popen[bytes] | None = None
        self.log = net_file.with_suffix(".ibsim.log")
        self.start_seconds = 0.0

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "IBSIM_SOCKNAME": self.sockname}

    def __enter__(self) -> Simulator:
        started = time.perf_counter()
        ports = self.switches * 65 + self.nodes * 2
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                [
                    "ibsim",
                    "-s",
                    "-n",
                    "-N",
                    str(self.nodes),
                    "-S",
                    str(self.switches),
                    "-P",
                    str(ports),
                    str(self.net_file),
                ],
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        # Ready when it has parsed the file and listens: ibnetdiscover then answers.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"ibsim exited: {self.log.read_text(errors='replace')[-2000:]}")
            if b"sim_init" in self.log.read_bytes() or b"MaxMcastCap" in self.log.read_bytes():
                probe = self.run(["smpquery", "nodedesc", "-D", "0"], timeout=20, check=False)
                if probe.returncode == 0:
                    break
            time.sleep(0.05)
        else:
            raise RuntimeError("ibsim did not answer within 60 s")
        self.start_seconds = time.perf_counter() - started
        return self

    def run(
        self, argv: list[str], *, timeout: float = 120, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["ibsim-run", *argv],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=check,
        )

    def ibnetdiscover(self) -> str:
        return self.run(["ibnetdiscover"]).stdout

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()


# --- the planned fabric, and faults a cabling team might build into it ----------------------


def planned(spec_path: Path) -> tuple[list[Cable], dict[str, int]]:
    """The spec's cables and its switches' port counts."""
    result = plan_spec(spec_path)
    assert result.plan is not None and result.plan.fabric is not None
    spec, catalog = result.loaded.spec, result.loaded.catalog
    topology = spec.network.topology
    cables = list(iter_cables(spec, catalog, result.plan.fabric))
    leaf = catalog.switches[topology.switch].ports
    spine = catalog.switches[topology.spine_switch or topology.switch].ports
    return cables, switch_port_counts(cables, leaf, spine)


def swap(links: list[NetLink], i: int, j: int) -> list[NetLink]:
    """Links i and j exchange their upper ends (the plugs in the switch ports)."""
    out = list(links)
    li, lj = links[i], links[j]
    out[i] = replace(li, b=lj.b, b_port=lj.b_port)
    out[j] = replace(lj, b=li.b, b_port=li.b_port)
    return out


def remove(links: list[NetLink], i: int) -> list[NetLink]:
    return [link for n, link in enumerate(links) if n != i]


def narrow(links: list[NetLink], i: int) -> list[NetLink]:
    """Link i trains at 1x."""
    out = list(links)
    out[i] = replace(links[i], lanes=1)
    return out


def add_hca(links: list[NetLink], name: str, switch: str, port: int) -> list[NetLink]:
    return [*links, NetLink(a=name, a_port=1, a_hca=True, b=switch, b_port=port)]


def discovered_without_sim(links: list[NetLink]) -> IbTopology:
    """What ibnetdiscover reports for `links`, built directly (for fast tests): every
    device with a link, each link once, 4x or 1x at the simulator's speed."""
    nodes: dict[str, IbNode] = {}
    out: list[IbLink] = []
    for link in links:
        a_id, b_id = f"id:{link.a}", f"id:{link.b}"
        nodes.setdefault(a_id, IbNode("ca" if link.a_hca else "switch", a_id, link.a, 1))
        nodes.setdefault(b_id, IbNode("switch", b_id, link.b, 64))
        out.append(
            IbLink(
                a_id, link.a_port, b_id, link.b_port, f"{link.lanes}x", sim_speed(link.speed_gbps)
            )
        )
    return IbTopology(nodes, tuple(out))
