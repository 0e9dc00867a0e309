"""Cross-references inside a spec: names that must point at something that exists.

These checks read the raw document rather than the validated models, so that a file with
a type error and a misspelt profile name gets both reported in one run. Values of the
wrong shape are skipped here: the model validation reports them.
"""

from __future__ import annotations

import difflib
import typing
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from myriad.errors import Path, Problem
from myriad.spec.catalog_models import Catalog
from myriad.spec.models import Role, hostname
from myriad.spec.yaml_source import SourceMap

NIC_PURPOSES = ("compute", "storage", "management")


def _unknown(source: SourceMap, path: Path, what: str, name: str, known: Iterable[str]) -> Problem:
    known = sorted(known)
    lowered = {k.lower(): k for k in known}
    close = difflib.get_close_matches(name.lower(), list(lowered), n=1, cutoff=0.5)
    hint = f"did you mean '{lowered[close[0]]}'?" if close else f"known: {', '.join(known)}"
    return source.problem(path, f"unknown {what} '{name}'", hint)


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _sequence(value: Any) -> tuple[Any, ...]:
    return value if isinstance(value, tuple) else ()


def _names(catalog: Catalog, extra: Mapping[str, Any], kind: str) -> set[str]:
    return set(getattr(catalog, kind)) | set(_mapping(extra.get(kind)))


def reference_problems(
    data: Mapping[str, Any], shipped: Catalog, source: SourceMap
) -> list[Problem]:
    return list(_references(data, shipped, source))


def _references(data: Mapping[str, Any], shipped: Catalog, source: SourceMap) -> Iterator[Problem]:
    extra = _mapping(data.get("catalog"))
    servers, gpus = _names(shipped, extra, "servers"), _names(shipped, extra, "gpus")
    nics, switches = _names(shipped, extra, "nics"), _names(shipped, extra, "switches")

    raw_profiles = data.get("profiles")
    profiles = _mapping(raw_profiles)
    for name, raw in profiles.items():
        profile = _mapping(raw)
        base: Path = ("profiles", name)
        server = profile.get("server")
        if isinstance(server, str) and server not in servers:
            yield _unknown(source, (*base, "server"), "server layout", server, servers)
        gpu = _mapping(profile.get("gpu")).get("model")
        if isinstance(gpu, str) and gpu not in gpus:
            yield _unknown(source, (*base, "gpu", "model"), "GPU", gpu, gpus)
        for purpose in NIC_PURPOSES:
            group = _mapping(_mapping(profile.get("nics")).get(purpose))
            nic = group.get("model")
            if isinstance(nic, str) and nic not in nics:
                yield _unknown(source, (*base, "nics", purpose, "model"), "NIC", nic, nics)
            elif isinstance(nic, str):
                yield from _port_names(
                    group, _nic_ports(shipped, extra, nic), source, (*base, "nics", purpose)
                )

    pools = _sequence(data.get("pools"))
    for index, raw in enumerate(pools):
        profile_name = _mapping(raw).get("profile")
        if (
            isinstance(raw_profiles, Mapping)
            and isinstance(profile_name, str)
            and (profile_name not in profiles)
        ):
            yield _unknown(source, ("pools", index, "profile"), "profile", profile_name, profiles)
    roles = {_mapping(raw).get("role") for raw in pools}
    # A misspelt or missing role is reported by the models; this check would only echo it.
    if pools and roles <= set(typing.get_args(Role)) and "compute" not in roles:
        yield source.problem(
            ("pools",),
            "no pool has role compute",
            "add a pool such as {name: gpu, profile: ..., count: 8, role: compute}",
        )

    topology = _mapping(_mapping(data.get("network")).get("topology"))
    for field in ("switch", "spine_switch"):
        model = topology.get(field)
        if isinstance(model, str) and model not in switches:
            yield _unknown(source, ("network", "topology", field), "switch", model, switches)

    yield from _host_references(data, pools, source)


def _host_references(
    data: Mapping[str, Any], pools: tuple[Any, ...], source: SourceMap
) -> Iterator[Problem]:
    ib_nodes = _sequence(_mapping(_mapping(data.get("network")).get("infiniband")).get("sm_nodes"))
    bmc_hosts = _sequence(_mapping(data.get("provider")).get("hosts"))
    if not ib_nodes and not bmc_hosts:
        return
    hostnames = set(_hostnames(pools))
    hint = "host names are the pool name and a zero-padded index, such as gpu0001 or ctl01"
    for index, node in enumerate(ib_nodes):
        if isinstance(node, str) and node not in hostnames:
            yield source.problem(
                ("network", "infiniband", "sm_nodes", index),
                f"'{node}' is not a host of any pool",
                hint,
            )
    for index, raw in enumerate(bmc_hosts):
        name = _mapping(raw).get("name")
        if isinstance(name, str) and name not in hostnames:
            yield source.problem(
                ("provider", "hosts", index, "name"), f"'{name}' is not a host of any pool", hint
            )


def _hostnames(pools: tuple[Any, ...]) -> Iterator[str]:
    for raw in pools:
        pool = _mapping(raw)
        name, count = pool.get("name"), pool.get("count")
        if isinstance(name, str) and isinstance(count, int) and count > 0:
            yield from (hostname(name, count, i) for i in range(1, count + 1))


def _nic_ports(shipped: Catalog, extra: Mapping[str, Any], model: str) -> int | None:
    if model in shipped.nics and model not in _mapping(extra.get("nics")):
        return shipped.nics[model].ports
    ports = _mapping(_mapping(_mapping(extra.get("nics")).get(model))).get("ports", 1)
    return ports if isinstance(ports, int) else None


def _port_names(
    group: Mapping[str, Any], ports: int | None, source: SourceMap, path: Path
) -> Iterator[Problem]:
    count = group.get("count")
    if ports is None or not isinstance(count, int):
        return
    for field in ("devices", "interfaces"):
        names = _sequence(group.get(field))
        if names and len(names) != count * ports:
            yield source.problem(
                (*path, field),
                f"{len(names)} {field} named for {count} card(s) of {ports} port(s)",
                f"name one per port: {count * ports}",
            )
