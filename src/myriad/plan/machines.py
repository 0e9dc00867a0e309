"""The machine record: one machine a provider made for a node of the spec.

A Pulumi stack exports its machines as the `nodes` output, one object per machine with the
keys `NODE_KEYS`; `myriad.provision.stack_outputs` reads and checks them into `StackNode`s,
and the inventory (render) takes each node's address from them. The record lives in the plan
layer because both sides use it: provision produces it, render consumes it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from myriad.spec.models import Role

NODE_KEYS = ("name", "address", "pool", "role", "island", "provider", "ids", "public_address")


@dataclass(frozen=True, slots=True)
class StackNode:
    name: str
    address: str
    pool: str
    role: Role
    island: int | None
    provider: str
    ids: Mapping[str, str] = field(default_factory=dict)
    public_address: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "address": self.address,
            "pool": self.pool,
            "role": self.role,
            "island": self.island,
            "provider": self.provider,
            "ids": dict(self.ids),
            "public_address": self.public_address,
        }


STORAGE_KEYS = ("kind", "dns_name", "mount_name", "mount")


@dataclass(frozen=True, slots=True)
class StackStorage:
    """The shared file system a stack made (its `storage` output): FSx for Lustre on AWS.

    Clients mount it as `<dns_name>@tcp:/<mount_name>` at `mount` (AWS, "Mounting from an
    Amazon EC2 instance"); render turns it into the storage_net role's Lustre mount.
    """

    kind: str
    dns_name: str
    mount_name: str
    mount: str

    @property
    def mgs_nid(self) -> str:
        return f"{self.dns_name}@tcp"

    @property
    def source(self) -> str:
        return f"{self.mgs_nid}:/{self.mount_name}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "dns_name": self.dns_name,
            "mount_name": self.mount_name,
            "mount": self.mount,
        }
