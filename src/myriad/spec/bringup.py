"""The `bringup:` section of the spec: how nodes are brought up, and how long bring-up waits
for a node.

`mode` says who does the work. `push`: the operator's machine runs every role's tasks on every
node over SSH (or `docker exec`), a worker per node per task. `image`: `myriad image build`
applies the roles' install steps once to a node image per profile, nodes start from it, and
each node runs the site play against itself from a seed of its own variables; the operator's
machine only hands out seeds and collects each node's result. Unset, the node count decides
(`resolved_mode`).

A layer whose change takes effect only after a reboot (the driver's new module, IOMMU, DOCA's
modules, a firmware link type) does not reboot the node itself: it writes /run/reboot-required
and slurmd stays stopped there. `reboot` says what bring-up does then: `when-needed` reboots
such compute nodes after the driver layer, `reboot_batch` at a time, and hands a node already
serving Slurm jobs to Slurm (`scontrol reboot ASAP nextstate=RESUME`), which reboots it when its
jobs end and resumes it when it registers again; `never` leaves every reboot to the operator.

A frozen node (a paused container, a hung mount, a wedged SSH daemon) must not hold every
other node for the whole run: a task that takes longer than `task_timeout_s` fails on that
node, a connection that takes longer than `connect_timeout_s` makes it unreachable, the other
nodes go on, and `--retry-failed` picks the node up later.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

# Long enough for the slowest task Myriad runs (a DKMS build of the NVIDIA driver, a big
# apt transaction behind a slow mirror: minutes), short enough that a frozen node costs one
# task's wait rather than the whole run's hour.
DEFAULT_TASK_TIMEOUT_S = 1200
DEFAULT_CONNECT_TIMEOUT_S = 30

# A GPU server's firmware alone takes minutes to boot (memory training, option ROMs).
DEFAULT_REBOOT_TIMEOUT_S = 1800
# Enough to keep a fleet's reboots short, few enough that a bad kernel or driver stops a
# batch, not the cluster (max_fail_percentage ends the run there).
DEFAULT_REBOOT_BATCH = 16

BringupMode = Literal["push", "image"]
RebootPolicy = Literal["when-needed", "never"]
# From this many nodes on, a spec without `mode` is brought up from images (see
# benchmarks/bringup.py and the README's bring-up section for the measurements behind it).
IMAGE_MODE_MIN_NODES = 64


class Bringup(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False)

    mode: BringupMode | None = Field(
        default=None,
        description="push: the operator's machine runs the roles on every node; image: nodes "
        f"start from a baked image and converge themselves. Unset: push below "
        f"{IMAGE_MODE_MIN_NODES} nodes, image from there on",
    )
    task_timeout_s: int = Field(
        default=DEFAULT_TASK_TIMEOUT_S,
        ge=10,
        le=86_400,
        description="Seconds one task may take on one node before that node is failed "
        "(Ansible's TASK_TIMEOUT); the other nodes go on",
    )
    connect_timeout_s: int = Field(
        default=DEFAULT_CONNECT_TIMEOUT_S,
        ge=1,
        le=3_600,
        description="Seconds to wait for a connection to a node before it is unreachable "
        "(Ansible's TIMEOUT)",
    )
    reboot: RebootPolicy = Field(
        default="when-needed",
        description="when-needed: compute nodes a layer left waiting for a reboot reboot during "
        "bring-up, a batch at a time; one serving Slurm jobs reboots through Slurm when its "
        "jobs end (scontrol reboot ASAP nextstate=RESUME). never: they wait for the operator, "
        "slurmd stopped",
    )
    reboot_batch: int = Field(
        default=DEFAULT_REBOOT_BATCH,
        ge=1,
        le=100_000,
        description="At most this many compute nodes reboot at once during bring-up",
    )
    reboot_timeout_s: int = Field(
        default=DEFAULT_REBOOT_TIMEOUT_S,
        ge=60,
        le=7_200,
        description="Seconds a rebooting node has to answer again before bring-up fails it",
    )


def resolved_mode(bringup: Bringup, nodes: int) -> BringupMode:
    """The spec's mode, or the node count's: image from IMAGE_MODE_MIN_NODES nodes on."""
    if bringup.mode is not None:
        return bringup.mode
    return "image" if nodes >= IMAGE_MODE_MIN_NODES else "push"
