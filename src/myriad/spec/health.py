"""The spec's `health:` section: how the node health runner (`myriad-health`) judges a node.

Declaring the section turns node health on: the health role installs the runner on every
node and, under Slurm, slurm.conf names it as HealthCheckProgram. Every field has the
default an operator would choose for a large GPU cluster; the checks themselves are the
validation checks (`myriad validate`), so check ids here are theirs (`gpu.count`).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

CheckId = Annotated[str, Field(pattern=r"^[a-z0-9]+(\.[a-z0-9-]+)+$")]
AbsolutePath = Annotated[str, Field(pattern=r"^/\S*$")]
# The IB PortCounters the runner follows between runs (Linux sysfs ports/N/counters/).
Counter = Literal[
    "link_downed",
    "symbol_error",
    "port_rcv_errors",
    "link_error_recovery",
    "local_link_integrity_errors",
    "excessive_buffer_overrun_errors",
    "port_xmit_discards",
]

# What takes a node out of service: the faults after which a job on it would fail or hang.
# Everything else the runner evaluates only warns (a metric and the state file).
DEFAULT_DRAIN: tuple[str, ...] = (
    "gpu.count",
    "gpu.xid",
    "gpu.health",
    "gpu.nvlink",
    "gpu.ecc",
    # NVLink-network trays (NVL72) and NVLSM boards only; elsewhere they do not apply.
    "gpu.fabric-state",
    "gpu.imex-domain",
    "hca.present",
    "hca.state",
    "hca.rate",
    "hca.counter-growth",
    "storage.mount",
    "storage.writable",
    "disk.space",
    "slurm.munge",
)
# Growth per run above which a counter is a fault: a link that went down once more is one;
# a few symbol errors a run are the noise of a healthy NDR link (IBTA BER 1e-12).
DEFAULT_COUNTERS: dict[Counter, int] = {
    "link_downed": 0,
    "symbol_error": 10,
    "port_rcv_errors": 10,
    "link_error_recovery": 0,
}
DEFAULT_DISK: dict[str, int] = {"/": 5, "/tmp": 5, "/var": 5}
# An executable on the controller, or a webhook the controller posts to.
Hook = Annotated[str, Field(pattern=r"^(/\S+|https?://\S+)$", max_length=2048)]


class Remediation(BaseModel):
    """How far automatic remediation may go (myriad.health.remedy): declaring the section
    turns it on. The defaults keep a 10,000-GPU cluster's everyday failures (a few nodes a
    day) moving while a fault that takes many nodes at once stops every automatic action."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False)

    max_nodes: int = Field(
        default=4,
        ge=1,
        le=10_000,
        description="Nodes in remediation (reset, reboot, power cycle under way) at once, "
        "cluster-wide",
    )
    max_island_share: float = Field(
        default=0.05,
        gt=0.0,
        le=1.0,
        description="Share of an island's compute nodes in remediation at once (always at "
        "least one node)",
    )
    breaker_nodes: int = Field(
        default=8,
        ge=2,
        le=100_000,
        description="Nodes failing within breaker_window_s that stop every automatic action "
        "(a leaf switch, a PDU, a bad image): an alert instead of reboots",
    )
    breaker_window_s: int = Field(
        default=900,
        ge=60,
        le=86_400,
        description="Window over which failing nodes are counted for the breaker",
    )
    escalation_window_s: int = Field(
        default=86_400,
        ge=600,
        le=30 * 86_400,
        description="A node failing again this soon after an action gets the next one up "
        "the ladder (reset, reboot, power cycle, needs hardware)",
    )
    power_cycle_grace_s: int = Field(
        default=900,
        ge=60,
        le=86_400,
        description="How long a node must be unreachable and drained before its BMC "
        "power-cycles it",
    )
    rack_share: float = Field(
        default=0.5,
        gt=0.0,
        le=1.0,
        description="Share of a rack's (or NVLink domain's) nodes failing together that "
        "drains the whole rack as a unit",
    )
    hook: Hook | None = Field(
        default=None,
        description="Run (an absolute path) or POST to (an http(s) URL) with the JSON payload "
        "for a node that needs hardware; absent: the alert and the action log only",
    )
    hook_timeout_s: int = Field(
        default=30, ge=1, le=600, description="How long the hook may take, seconds"
    )
    requeue_exit: tuple[Annotated[int, Field(ge=1, le=255)], ...] = Field(
        default=(),
        max_length=255,
        description="Exit codes after which Slurm requeues a batch job (slurm.conf "
        "RequeueExit): the code a training job's wrapper returns when it saw a node fault, "
        "so it restarts from its last checkpoint on healthy nodes; empty: none",
    )

    @field_validator("requeue_exit")
    @classmethod
    def _codes_once_each(cls, codes: tuple[int, ...]) -> tuple[int, ...]:
        repeated = sorted({c for c in codes if codes.count(c) > 1})
        if repeated:
            raise ValueError(f"lists exit code {', '.join(map(str, repeated))} more than once")
        return codes

    @model_validator(mode="after")
    def _breaker_above_budget(self) -> Remediation:
        if self.breaker_nodes <= self.max_nodes:
            raise ValueError(
                f"breaker_nodes {self.breaker_nodes} is not more than max_nodes "
                f"{self.max_nodes}: the breaker would stop remediation before its budget is "
                "used; make it larger"
            )
        return self


class Health(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False)

    interval_s: int = Field(
        default=300,
        ge=10,
        le=86_400,
        description="Seconds between runs on every node (Slurm HealthCheckInterval)",
    )
    node_state: Literal["ANY", "IDLE", "ALLOC", "MIXED", "NONDRAINED_IDLE"] = Field(
        default="ANY",
        description="Node states Slurm runs the check in (HealthCheckNodeState); "
        "ANY keeps busy nodes judged too",
    )
    drain: tuple[CheckId, ...] = Field(
        default=DEFAULT_DRAIN,
        description="Checks whose failure drains the node; every other check only warns",
    )
    counters: dict[Counter, Annotated[int, Field(ge=0, le=1_000_000_000)]] = Field(
        default_factory=lambda: dict(DEFAULT_COUNTERS),
        description="IB port error counters and the growth per run each may show "
        "before the port is a fault",
    )
    disk: dict[AbsolutePath, Annotated[int, Field(ge=1, le=99)]] = Field(
        default_factory=lambda: dict(DEFAULT_DISK),
        description="Paths and the free space (percent) each must keep",
    )
    flap_window_s: int = Field(
        default=3600,
        ge=60,
        le=7 * 86_400,
        description="Window over which drains are counted for the flap limit",
    )
    flap_limit: int = Field(
        default=3,
        ge=2,
        le=100,
        description="A node drained this many times within the window stays drained",
    )
    xid_hold_s: int = Field(
        default=0,
        ge=0,
        le=30 * 86_400,
        description="How long a draining XID keeps the node drained; 0: until it reboots",
    )
    hang_after_s: int = Field(
        default=1800,
        ge=300,
        le=7 * 86_400,
        description="How long all of a running job's GPUs on a node may sit at 0 % utilisation "
        "before MyriadJobHang names the job and node (DCGM exporter's HPC job mapping); "
        "at least 5 minutes, since loading data or writing a checkpoint idles GPUs that long",
    )
    remediation: Remediation | None = Field(
        default=None,
        description="Automatic remediation of drained nodes (GPU reset, reboot, power cycle, "
        "needs hardware) within a budget; absent: off",
    )
    stale_after_s: int | None = Field(
        default=None,
        ge=10,
        le=7 * 86_400,
        description="A node's last run older than this is stale in `myriad health`; "
        "default three intervals",
    )

    @field_validator("drain")
    @classmethod
    def _once_each(cls, drain: tuple[str, ...]) -> tuple[str, ...]:
        repeated = sorted({c for c in drain if drain.count(c) > 1})
        if repeated:
            raise ValueError(f"lists {', '.join(repeated)} more than once")
        return drain

    @property
    def stale_s(self) -> int:
        return self.stale_after_s if self.stale_after_s is not None else 3 * self.interval_s
