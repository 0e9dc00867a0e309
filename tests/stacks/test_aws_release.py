"""An island's release before its replacement (issue 26): terminate, wait for `terminated`,
wait for the reservation's places, under a stand-in EC2 client with a clock of its own.

Exercised: myriad.provision.aws_release.release_island and the provider's diff, and where the
stack puts the release in the graph (under Pulumi mocks). Not exercised: boto3 against AWS and
the engine's delete order (stacks/README.md lists both for a first real run).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from myriad.provision.aws_release import IslandReleaseProvider, ReleaseError, release_island

from stack_harness import REPO, run_program, spec_with, stack_config

RESERVATION = "cr-0b10c4000000000aa"


class FakeEc2:
    """Instances that take `shutdown_polls` polls to terminate after TerminateInstances, and a
    reservation whose freed places show up `return_polls` polls after the last one."""

    def __init__(
        self, states: Mapping[str, str], free: int, shutdown_polls: int, return_polls: int
    ) -> None:
        self.states = dict(states)
        self.free = free
        self.shutdown_polls = shutdown_polls
        self.return_polls = return_polls
        self.calls: list[str] = []
        self._terminating: dict[str, int] = {}
        self._returning: list[int] = []

    def describe_instances(self, **kwargs: Any) -> Mapping[str, Any]:
        self.calls.append("describe_instances")
        for iid in list(self._terminating):
            self._terminating[iid] -= 1
            if self._terminating[iid] <= 0:
                del self._terminating[iid]
                self.states[iid] = "terminated"
                self._returning.append(self.return_polls)
        ids = kwargs["InstanceIds"]
        assert len(ids) <= 1000
        instances = [{"InstanceId": i, "State": {"Name": self.states[i]}} for i in ids]
        return {"Reservations": [{"Instances": instances}]}

    def terminate_instances(self, **kwargs: Any) -> Mapping[str, Any]:
        self.calls.append(f"terminate {len(kwargs['InstanceIds'])}")
        for iid in kwargs["InstanceIds"]:
            self.states[iid] = "shutting-down"
            self._terminating[iid] = self.shutdown_polls
        return {}

    def describe_capacity_reservations(self, **kwargs: Any) -> Mapping[str, Any]:
        assert kwargs["CapacityReservationIds"] == [RESERVATION]
        self.calls.append("describe_capacity_reservations")
        self._returning = [n - 1 for n in self._returning]
        self.free += sum(1 for n in self._returning if n < 0)
        self._returning = [n for n in self._returning if n >= 0]
        return {"CapacityReservations": [{"AvailableInstanceCount": self.free}]}


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_the_release_waits_for_termination_and_the_reservations_places() -> None:
    ids = [f"i-{n:017x}" for n in range(3)]
    ec2 = FakeEc2(dict.fromkeys(ids, "running"), free=0, shutdown_polls=4, return_polls=3)
    clock = Clock()
    freed = release_island(ec2, ids, RESERVATION, poll_s=15, sleep=clock.sleep, clock=clock)
    assert freed == 3
    assert set(ec2.states.values()) == {"terminated"}
    assert ec2.free == 3  # all three places back before the release returns
    assert ec2.calls.count("terminate 3") == 1
    # 4 polls until terminated, then the reservation's places: minutes, not an instant.
    assert clock.now >= 15 * 4


def test_an_island_already_gone_returns_at_once() -> None:
    ids = ["i-0000000000000000a"]
    ec2 = FakeEc2({ids[0]: "terminated"}, free=2, shutdown_polls=1, return_polls=1)
    assert release_island(ec2, ids, RESERVATION, sleep=pytest.fail) == 0
    assert not [c for c in ec2.calls if c.startswith("terminate")]


def test_places_that_do_not_come_back_are_a_named_timeout() -> None:
    ids = ["i-0000000000000000a", "i-0000000000000000b"]
    ec2 = FakeEc2(dict.fromkeys(ids, "running"), free=0, shutdown_polls=1, return_polls=10**6)
    clock = Clock()
    with pytest.raises(ReleaseError, match=f"{RESERVATION} shows 0 free instances, 2 expected"):
        release_island(
            ec2, ids, RESERVATION, timeout_s=300, poll_s=15, sleep=clock.sleep, clock=clock
        )


def test_instances_that_do_not_terminate_are_a_named_timeout() -> None:
    ids = ["i-0000000000000000a"]
    ec2 = FakeEc2(dict.fromkeys(ids, "running"), free=0, shutdown_polls=10**6, return_polls=1)
    clock = Clock()
    with pytest.raises(ReleaseError, match="1 instances of the island are not terminated"):
        release_island(ec2, ids, None, timeout_s=60, poll_s=15, sleep=clock.sleep, clock=clock)


def test_a_new_fleet_replaces_the_release_delete_first() -> None:
    provider = IslandReleaseProvider()
    old = {"fleet_id": "fleet-1", "instance_ids": ["i-1"], "region": "us-east-1"}
    diff = provider.diff("fleet-1", old, {**old, "fleet_id": "fleet-2"})
    assert diff.replaces == ["fleet_id"] and diff.delete_before_replace
    assert not provider.diff("fleet-1", old, dict(old)).changes


def test_the_stack_puts_a_release_after_each_fleet() -> None:
    import pulumi

    from stacks.program import build
    from stacks.settings import read_settings

    path = REPO / "inventories/aws-dev/cluster.yaml"
    spec = spec_with(path)

    def body() -> dict[str, Any]:
        result = build(spec, read_settings(pulumi.Config("myriad"), spec, path))
        return {"nodes": result.nodes}

    built = run_program(body, config=stack_config("aws-dev"))
    (fleet,) = built.of_type("ec2/fleet:Fleet")
    (release,) = [r for r in built.resources if r.name == "aws-dev-gpu-island-0-release"]
    assert release.type == "pulumi-python:dynamic:Resource"
    assert any(d.endswith("::aws-dev-gpu-island-0") for d in release.dependencies)
    assert release.protect and release.delete_before_replace
    gpu = [n for n in built.outputs["nodes"] if n["role"] == "compute"]
    assert release.inputs["fleet_id"] == gpu[0]["ids"]["fleet_id"]
    assert release.inputs["instance_ids"] == [n["ids"]["instance_id"] for n in gpu]
    assert fleet.name == "aws-dev-gpu-island-0"
