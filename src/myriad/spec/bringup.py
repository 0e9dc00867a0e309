"""The `bringup:` section of the spec: how long bring-up waits for a node.

A frozen node (a paused container, a hung mount, a wedged SSH daemon) must not hold every
other node for the whole run: a task that takes longer than `task_timeout_s` fails on that
node, a connection that takes longer than `connect_timeout_s` makes it unreachable, the other
nodes go on, and `--retry-failed` picks the node up later.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

# Long enough for the slowest task Myriad runs (a DKMS build of the NVIDIA driver, a big
# apt transaction behind a slow mirror: minutes), short enough that a frozen node costs one
# task's wait rather than the whole run's hour.
DEFAULT_TASK_TIMEOUT_S = 1200
DEFAULT_CONNECT_TIMEOUT_S = 30


class Bringup(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False)

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
