"""Cross-references inside a spec: names that must point at something that exists.

These checks read the raw document rather than the validated models, so that a file with
a type error and a misspelt profile name gets both reported in one run. Values of the
wrong shape are skipped here: the model validation reports them.
"""

from __future__ import annotations

import difflib
import ipaddress
import re
import typing
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from myriad.errors import Path, Problem
from myriad.spec.catalog_models import Catalog
from myriad.spec.models import MAX_NODES, MAX_POOLS, Role, hostname
from myriad.spec.rules import RULES
from myriad.spec.yaml_source import SourceMap

NIC_PURPOSES = ("compute", "storage", "management")


def _model_numbers(name: str) -> set[str]:
    """The parts of a catalog name with a digit (H200, B200, 8GPU): what tells models apart."""
    return {part for part in re.split(r"[-_ ]+", name.lower()) if any(c.isdigit() for c in part)}


def close_names(name: str, known: Iterable[str]) -> list[str]:
    """The entries an unknown name most likely meant, most likely first.

    The closest spelling alone can be another model (HGX-H200-8GPU is one letter from
    HGX-H100-8GPU); an entry that has the model number the closest spelling lacks comes first.
    """
    lowered = {k.lower(): k for k in sorted(known)}
    close = difflib.get_close_matches(name.lower(), list(lowered), n=1, cutoff=0.5)
    missing = _model_numbers(name) - (_model_numbers(close[0]) if close else set())
    sharing = [k for low, k in lowered.items() if missing & _model_numbers(low)]
    return list(dict.fromkeys([*sharing[:2], *(lowered[c] for c in close)]))


def suggestion(name: str, known: Iterable[str], otherwise: str | None = None) -> str:
    """ "did you mean 'A' or 'B'?" for an unknown name; else `otherwise` (default: every
    known name)."""
    known = sorted(known)
    close = close_names(name, known)
    if close:
        return f"did you mean {' or '.join(repr(k) for k in close)}?"
    return f"known: {', '.join(known)}" if otherwise is None else otherwise


def _unknown(source: SourceMap, path: Path, what: str, name: str, known: Iterable[str]) -> Problem:
    return source.problem(path, f"unknown {what} '{name}'", suggestion(name, known))


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
    racks = _names(shipped, extra, "racks")
    for name, raw in _mapping(extra.get("servers")).items():
        rack = _mapping(raw).get("rack_system")
        if isinstance(rack, str) and rack not in racks:
            at: Path = ("catalog", "servers", name, "rack_system")
            yield _unknown(source, at, "rack-scale system", rack, racks)

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
    for index, raw in enumerate(_sequence(_mapping(data.get("network")).get("switches"))):
        model = _mapping(raw).get("model")
        if isinstance(model, str) and model not in switches:
            path: Path = ("network", "switches", index, "model")
            yield _unknown(source, path, "switch", model, switches)

    yield from _pool_names(pools, source)
    yield from _accepted_rules(data, source)
    yield from _node_total(pools, source)
    yield from _host_references(data, pools, source)
    yield from _aws_only_references(data, source)


def _accepted_rules(data: Mapping[str, Any], source: SourceMap) -> Iterator[Problem]:
    for index, raw in enumerate(_sequence(_mapping(data.get("lints")).get("accept"))):
        rule = _mapping(raw).get("rule")
        if not isinstance(rule, str):
            continue
        path: Path = ("lints", "accept", index, "rule")
        known = RULES.get(rule)
        if known is None:
            yield _unknown(source, path, "lint rule", rule, RULES)
        elif not known.acceptable:
            yield source.problem(
                path,
                f"{rule} is an error: it describes a cluster that cannot work as planned, so "
                "it is fixed, not accepted",
                f"myriad plan --explain {rule} says how to fix it",
            )


def _aws_only_references(data: Mapping[str, Any], source: SourceMap) -> Iterator[Problem]:
    """EFA and FSx for Lustre exist on AWS only."""
    kind = _mapping(data.get("provider")).get("kind")
    if not isinstance(kind, str) or kind == "aws":
        return
    if _mapping(data.get("network")).get("fabric") == "efa":
        yield source.problem(
            ("network", "fabric"),
            f"fabric efa is AWS's Elastic Fabric Adapter, but provider kind is {kind}",
            "use provider kind aws with an EFA instance type, or infiniband, roce or ethernet",
        )
    if _mapping(data.get("storage")).get("kind") == "fsx-lustre":
        yield source.problem(
            ("storage", "kind"),
            f"fsx-lustre is made by the aws stack, but provider kind is {kind}",
            "use kind lustre with the file system's server and export",
        )
    yield from _address_overlaps(data, source)


def _named_pools(pools: tuple[Any, ...]) -> list[tuple[int, str, int]]:
    """(index, name, count) of each pool whose name and count have the right shape."""
    named = []
    for index, raw in enumerate(pools):
        pool = _mapping(raw)
        name, count = pool.get("name"), pool.get("count")
        if isinstance(name, str) and type(count) is int and 0 < count <= MAX_NODES:
            named.append((index, name, count))
    return named


def _pool_names(pools: tuple[Any, ...], source: SourceMap) -> Iterator[Problem]:
    """Two pools with one name, or whose numbered host names meet, make one host two nodes."""
    named = _named_pools(pools)
    first: dict[str, int] = {}
    for index, name, _ in named:
        if name in first:
            yield source.problem(
                ("pools", index, "name"),
                f"pool name '{name}' is already used by pools[{first[name]}]: "
                "their hosts would have the same names",
                "give every pool its own name",
            )
        else:
            first.setdefault(name, index)
    distinct = [(i, n, c) for i, n, c in named if first[n] == i]
    if len(distinct) > MAX_POOLS:
        return  # the model refuses so many pools
    for later, (index, name, count) in enumerate(distinct):
        for other_index, other, other_count in distinct[:later]:
            shared = first_shared_host(other, other_count, name, count)
            if shared is not None:
                yield source.problem(
                    ("pools", index, "name"),
                    f"pools '{other}' (pools[{other_index}]) and '{name}' both produce the host "
                    f"name {shared}",
                    "host names are the pool name and a zero-padded index; rename a pool so "
                    "that neither name is the other followed by digits",
                )
                break


def pool_width(count: int) -> int:
    """Digits of a pool's host index, as `hostname` pads it."""
    return max(2, len(str(count)))


def host_index(host: str, pool: str, count: int) -> int | None:
    """The 1-based index of `host` in the pool, or None: arithmetic, not a list of names."""
    digits = host[len(pool) :]
    if not host.startswith(pool) or len(digits) != pool_width(count):
        return None
    if not (digits.isascii() and digits.isdigit()):
        return None
    index = int(digits)
    return index if 1 <= index <= count else None


def first_shared_host(a: str, a_count: int, b: str, b_count: int) -> str | None:
    """The first host name pools a and b (different names) would both produce, if any.

    Names are `name + index padded to w digits`. With a the shorter name, a collision needs
    b = a + s for digits s, and a's padded index = s + b's padded index: so w_a equals
    len(s) + w_b, and a's index s * 10**w_b + j (1 <= j <= b_count) must exist in a. The
    smallest such index is s * 10**w_b + 1.
    """
    if len(a) > len(b):
        a, a_count, b, b_count = b, b_count, a, a_count
    suffix = b[len(a) :]
    if a == b or not b.startswith(a) or not (suffix.isascii() and suffix.isdigit()):
        return None
    width_a, width_b = pool_width(a_count), pool_width(b_count)
    if width_a != len(suffix) + width_b:
        return None
    index = int(suffix) * 10**width_b + 1
    return hostname(a, a_count, index) if index <= a_count else None


def _node_total(pools: tuple[Any, ...], source: SourceMap) -> Iterator[Problem]:
    total = 0
    for index, _, count in _named_pools(pools):
        total += count
        if total > MAX_NODES:
            yield source.problem(
                ("pools", index, "count"),
                f"the pools up to this one add up to {total:,} nodes; a cluster spec may hold "
                f"at most {MAX_NODES:,}",
                "describe a larger site as several clusters, one spec each",
            )
            return


def _host_references(
    data: Mapping[str, Any], pools: tuple[Any, ...], source: SourceMap
) -> Iterator[Problem]:
    ib_nodes = _sequence(_mapping(_mapping(data.get("network")).get("infiniband")).get("sm_nodes"))
    bmc_hosts = _sequence(_mapping(data.get("provider")).get("hosts"))
    monitoring_servers = _sequence(_mapping(data.get("monitoring")).get("servers"))
    yield from _monitoring_server_default(data, pools, source)
    if not ib_nodes and not bmc_hosts and not monitoring_servers:
        return
    counts = {name: count for _, name, count in _named_pools(pools)}

    def is_host(name: str) -> bool:
        # Each way of splitting the name into pool and index; no list of all host names.
        return any(
            host_index(name, name[:cut], counts[name[:cut]]) is not None
            for cut in range(1, len(name))
            if name[:cut] in counts
        )

    def hint(name: str) -> str:
        for pool, count in counts.items():
            if name.startswith(pool) and name[len(pool) :].isdigit():
                first, last = hostname(pool, count, 1), hostname(pool, count, count)
                return f"pool '{pool}' has hosts {first} to {last}"
        return "host names are the pool name and a zero-padded index, such as gpu0001 or ctl01"

    for index, node in enumerate(ib_nodes):
        if isinstance(node, str) and not is_host(node):
            yield source.problem(
                ("network", "infiniband", "sm_nodes", index),
                f"'{node}' is not a host of any pool",
                hint(node),
            )
    for index, node in enumerate(monitoring_servers):
        if isinstance(node, str) and not is_host(node):
            yield source.problem(
                ("monitoring", "servers", index), f"'{node}' is not a host of any pool", hint(node)
            )
    for index, raw in enumerate(bmc_hosts):
        name = _mapping(raw).get("name")
        if isinstance(name, str) and not is_host(name):
            yield source.problem(
                ("provider", "hosts", index, "name"),
                f"'{name}' is not a host of any pool",
                hint(name),
            )


def _monitoring_server_default(
    data: Mapping[str, Any], pools: tuple[Any, ...], source: SourceMap
) -> Iterator[Problem]:
    monitoring = _mapping(data.get("monitoring"))
    if monitoring.get("enabled") is not True or monitoring.get("servers"):
        return
    if not any(_mapping(pool).get("role") == "controller" for pool in pools):
        yield source.problem(
            ("monitoring", "enabled"),
            "monitoring is enabled, but no pool has role controller to run Prometheus on",
            "name the hosts that run it: monitoring: {servers: [<host>]}",
        )


_NETWORKS = (
    (("network", "addressing", "management"), "management"),
    (("network", "addressing", "storage"), "storage"),
    (("network", "addressing", "compute"), "compute (IPoIB / RoCE)"),
    (("software", "kubernetes", "pod_cidr"), "Kubernetes pod"),
    (("software", "kubernetes", "service_cidr"), "Kubernetes service"),
)
# The defaults a spec gets when it names no network (models.Addressing, models.Kubernetes).
_DEFAULTS = {
    ("network", "addressing", "management"): "10.0.0.0/16",
    ("software", "kubernetes", "pod_cidr"): "10.244.0.0/16",
    ("software", "kubernetes", "service_cidr"): "10.96.0.0/12",
}


def _address_overlaps(data: Mapping[str, Any], source: SourceMap) -> Iterator[Problem]:
    """Each network a node joins needs its own range, or routes and ARP become ambiguous."""
    kubernetes = _mapping(data.get("software")).get("orchestrator") == "kubernetes"
    seen: list[tuple[Path, str, ipaddress.IPv4Network, bool]] = []
    for path, what in _NETWORKS:
        if path[0] == "software" and not kubernetes:
            continue
        raw: Any = data
        for part in path:
            raw = _mapping(raw).get(part)
        given = raw is not None
        value = raw if given else _DEFAULTS.get(path)
        if not isinstance(value, str):
            continue
        try:
            network = ipaddress.ip_network(value, strict=True)
        except ValueError:
            continue  # the model reports a malformed network
        if not isinstance(network, ipaddress.IPv4Network):
            continue
        for other_path, other_what, other, other_given in seen:
            # pod against service range: the Kubernetes model reports that one
            if path[0] == other_path[0] == "software" or not network.overlaps(other):
                continue
            this = f"{network}" + ("" if given else " (the default)")
            that = f"{other}" + ("" if other_given else " (the default)")
            yield source.problem(
                path if given else other_path,
                f"the {what} network {this} overlaps the {other_what} network {that}",
                "give each network its own range, e.g. management 10.0.0.0/16, storage "
                "10.32.0.0/16, compute 10.128.0.0/14",
            )
            break
        seen.append((path, what, network, given))


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
