"""The `bringup:` section of the spec: how nodes are brought up, and how long bring-up waits
for a node.

`mode` says who does the work. `push`: the operator's machine runs every role's tasks on every
node over SSH (or `docker exec`), a worker per node per task. `image`: `myriad image build`
applies the roles' install steps once to a node image per profile, nodes start from it, and
each node runs the site play against itself from a seed of its own variables; the operator's
machine only hands out seeds and collects each node's result. Unset, the node count decides
(`resolved_mode`).

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

BringupMode = Literal["push", "image"]
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


def resolved_mode(bringup: Bringup, nodes: int) -> BringupMode:
    """The spec's mode, or the node count's: image from IMAGE_MODE_MIN_NODES nodes on."""
    if bringup.mode is not None:
        return bringup.mode
    return "image" if nodes >= IMAGE_MODE_MIN_NODES else "push"
