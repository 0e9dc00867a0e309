"""Run-unique cluster names and subnets (tests/run_names.py) never reuse what exists."""

from __future__ import annotations

import ipaddress

import pytest

from myriad.spec.models import Metadata

import run_names


def test_names_differ_per_call_and_are_valid_cluster_names() -> None:
    names = {run_names.unique_name("bench16") for _ in range(50)}
    assert len(names) == 50
    for name in names:
        Metadata(name=name)


def test_free_subnet_avoids_every_docker_network_and_the_local_example(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    taken = [ipaddress.ip_network("172.31.0.0/17"), ipaddress.ip_network("172.31.200.0/22")]
    monkeypatch.setattr(run_names, "docker_subnets", lambda: taken)
    picked = {ipaddress.ip_network(run_names.free_subnet()) for _ in range(200)}
    assert all(net.prefixlen == 24 and net.subnet_of(run_names.POOL) for net in picked)
    assert not any(net.overlaps(used) for net in picked for used in [*taken, *run_names.RESERVED])
    assert len(picked) > 1, "always the same subnet: two runs would pick it together"


def test_no_free_subnet_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(run_names, "docker_subnets", lambda: [run_names.POOL])
    with pytest.raises(RuntimeError, match="no free /24"):
        run_names.free_subnet()
