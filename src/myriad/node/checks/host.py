"""Host checks every node gets from the common role: its name, /etc/hosts, time, memlock."""

from __future__ import annotations

import sys
from functools import lru_cache
from typing import Any

from myriad.node.checks.model import (
    Check,
    ClusterView,
    Context,
    Expect,
    Outcome,
    Skip,
    bringup_fix,
    explain_unit,
    failed,
    listed,
    passed,
    unavailable,
    unit_active,
    verdict,
)
from myriad.node.facts import NodeFacts

EVERY = "pools (every node)"
TIME_UNITS = {"chrony": "chrony", "timesyncd": "systemd-timesyncd"}
_UNLIMITED = {"unlimited", "infinity", "-1"}


# --- host.name -------------------------------------------------------------------------------


def _derive_name(c: Context) -> Expect | Skip:
    return Expect(c.node, f"pools.{c.pool.name}", bringup_fix("common", f"hostname {c.node}"))


def _evaluate_name(expected: str, facts: NodeFacts, view: ClusterView, node: str) -> Outcome:
    if not facts.hostname.ok:
        return unavailable(facts.hostname)
    name = facts.hostname.get()
    return passed(name) if name.split(".")[0] == expected else failed(name)


HOST_NAME = Check(
    id="host.name",
    title="host name is the inventory name",
    spec_fields=("pools",),
    derive=_derive_name,
    evaluate=_evaluate_name,
    per_node=True,
)


# --- hosts.file ------------------------------------------------------------------------------


def hosts_block(hosts: list[Any]) -> dict[str, Any]:
    """The cluster's hosts, [address, [names]] each, and the managed block of /etc/hosts
    exactly as roles/common/templates/hosts-block.j2 writes it. The text is interned, as
    facts/hosts.py interns the node's block, so 12,500 equal blocks compare by identity."""
    entries = [
        [str(h["address"]), [str(h["name"]), *(str(a) for a in h.get("aliases") or ())]]
        for h in hosts
    ]
    text = "\n".join(f"{address:<15} {' '.join(names)}" for address, names in entries)
    return {"entries": entries, "text": sys.intern(text)}


def _derive_hosts(c: Context) -> Expect | Skip:
    block = hosts_block(list(c.variables.get("common_hosts") or []))
    if not block["entries"]:
        return Skip("pools", "the inventory lists no cluster hosts")
    return Expect(
        block,
        "pools, network.addressing.management",
        bringup_fix("common", "the cluster's hosts block in /etc/hosts is incomplete"),
    )


def _evaluate_hosts(
    expected: dict[str, Any], facts: NodeFacts, view: ClusterView, node: str
) -> Outcome:
    if not facts.hosts_file.ok:
        return unavailable(facts.hosts_file)
    hosts = facts.hosts_file.get()
    text, entries = expected["text"], expected["entries"]
    # The common role writes the same block everywhere: identity (interned) or one compare.
    if hosts.block is text or hosts.block == text:
        return passed(f"all {len(entries)} hosts in the managed block")
    names_of: dict[str, set[str]] = {}
    listed_here: list[tuple[str, tuple[str, ...]]] = []
    for source in (hosts.block or "", hosts.rest):
        for line in source.splitlines():
            fields = line.split("#", 1)[0].split()
            if len(fields) >= 2:
                names_of.setdefault(fields[0], set()).update(fields[1:])
                if source is hosts.block:
                    listed_here.append((fields[0], tuple(fields[1:])))
    problems = [
        f"missing {address} {names[0]}"
        for address, names in entries
        if not set(names) <= names_of.get(address, set())
    ]
    wanted = {(address, tuple(names)) for address, names in entries}
    problems += [
        f"not in the spec: {a} {' '.join(n)}" for a, n in listed_here if (a, n) not in wanted
    ]
    where = "" if hosts.block is not None else " (no managed block: listed elsewhere)"
    return verdict(problems, f"all {len(entries)} hosts listed{where}")


def _explain_hosts(expected: dict[str, Any]) -> str:
    entries = expected["entries"]
    return f"{len(entries)} hosts: " + listed([f"{a} {' '.join(n)}" for a, n in entries])


HOSTS_FILE = Check(
    id="hosts.file",
    title="/etc/hosts lists the cluster hosts",
    spec_fields=("pools", "network.addressing.management"),
    derive=_derive_hosts,
    evaluate=_evaluate_hosts,
    explain=_explain_hosts,
)


# --- time.sync, time.synchronised ----------------------------------------------------------


def _time_unit(c: Context) -> str | None:
    return TIME_UNITS.get(str(c.variables.get("common_time_sync", "chrony")))


def _derive_time_sync(c: Context) -> Expect | Skip:
    unit = _time_unit(c)
    if unit is None:
        return Skip(EVERY, "common_time_sync is none: time is left alone")
    return Expect(
        unit, EVERY, bringup_fix("common", f"start {unit}: systemctl enable --now {unit}")
    )


TIME_SYNC = Check(
    id="time.sync",
    title="time synchronisation service active",
    spec_fields=("pools",),
    derive=_derive_time_sync,
    evaluate=unit_active,
    explain=explain_unit,
)


def _derive_synchronised(c: Context) -> Expect | Skip:
    if _time_unit(c) is None:
        return Skip(EVERY, "common_time_sync is none")
    if c.spec.provider.kind == "local":
        return Skip(
            "provider.kind", "local containers run on the host's clock; chronyd only tracks it"
        )
    return Expect(
        True, EVERY, "check the NTP sources answer: chronyc sources -v (common_time_servers)"
    )


def _evaluate_synchronised(
    expected: bool, facts: NodeFacts, view: ClusterView, node: str
) -> Outcome:
    if not facts.time.ok:
        return unavailable(facts.time)
    sync = facts.time.get()
    if sync.synchronised:
        return passed(f"synchronised ({sync.source})")
    return failed(f"not synchronised ({sync.source})")


TIME_SYNCHRONISED = Check(
    id="time.synchronised",
    title="clock synchronised to its sources",
    spec_fields=("pools",),
    derive=_derive_synchronised,
    evaluate=_evaluate_synchronised,
    explain=lambda expected: "synchronised",
)


# --- limits.memlock, limits.memlock-session --------------------------------------------------


def _limit(value: str) -> str:
    return "unlimited" if value.lower() in _UNLIMITED else value


def _memlock(c: Context) -> str:
    return str(c.variables.get("common_limits_memlock", "unlimited"))


def _derive_limits(c: Context) -> Expect | Skip:
    return Expect(
        _memlock(c),
        EVERY,
        bringup_fix("common", "RDMA registers memory and needs memlock unlimited"),
    )


def _evaluate_limits(expected: str, facts: NodeFacts, view: ClusterView, node: str) -> Outcome:
    if not facts.limits.ok:
        return unavailable(facts.limits)
    return _memlock_lines(tuple(sorted(facts.limits.get().items())), _limit(expected))


@lru_cache(maxsize=256)
def _memlock_lines(files: tuple[tuple[str, str], ...], want: str) -> Outcome:
    """Nodes share their limits files (the texts are interned): read each set once."""
    covered: dict[str, set[str]] = {"*": set(), "root": set()}
    problems = []
    # pam_limits: a line for root applies to root only, `*` to everyone else; any memlock
    # line for either that sets another value than the spec's leaves some session short,
    # and each needs both its soft and hard limit set ("-" sets both).
    for path, text in files:
        for line in text.splitlines():
            fields = line.split("#", 1)[0].split()
            if len(fields) != 4 or fields[2] != "memlock" or fields[0] not in covered:
                continue
            if fields[1] in ("-", "soft", "hard"):
                if _limit(fields[3]) != want:
                    problems.append(f"{path}: {' '.join(fields)}")
                else:
                    covered[fields[0]] |= {"soft", "hard"} if fields[1] == "-" else {fields[1]}
    problems += [
        f"no memlock line for {domain}"
        if not kinds
        else f"no {'hard' if 'soft' in kinds else 'soft'} memlock line for {domain}"
        for domain, kinds in covered.items()
        if len(kinds) < 2
    ]
    return verdict(problems, f"memlock {want} for * and root")


LIMITS_MEMLOCK = Check(
    id="limits.memlock",
    title="memlock unlimited in limits.d",
    spec_fields=("pools",),
    derive=_derive_limits,
    evaluate=_evaluate_limits,
    explain=lambda expected: f"memlock {expected}",
)


def _derive_session(c: Context) -> Expect | Skip:
    # A container (provider local) cannot raise a limit above what its engine gave PID 1,
    # so there that ceiling is the most a session can show.
    return Expect(
        {"value": _memlock(c), "container": c.spec.provider.kind == "local"},
        EVERY,
        bringup_fix("common", "log in afresh after fixing limits.d"),
    )


def _evaluate_session(
    expected: dict[str, Any], facts: NodeFacts, view: ClusterView, node: str
) -> Outcome:
    if not facts.memlock.ok:
        return unavailable(facts.memlock)
    limits = facts.memlock.get()
    soft, hard = _limit(limits.soft), _limit(limits.hard)
    actual = f"soft {soft}, hard {hard}"
    want = _limit(expected["value"])
    if soft == want and hard == want:
        return passed(actual)
    ceiling = _limit(limits.ceiling) if limits.ceiling is not None else None
    if expected["container"] and ceiling not in (None, "unlimited") and soft == hard == ceiling:
        # The container engine caps PID 1 and nothing inside may raise it (no
        # CAP_SYS_RESOURCE in the host's namespace); limits.memlock checks the node's part.
        return Outcome(
            "not-applicable",
            f"{actual} KiB: the container engine's ceiling, which a container cannot raise",
        )
    return failed(actual)


def _explain_session(expected: dict[str, Any]) -> str:
    ceiling = " (or a container engine's ceiling)" if expected["container"] else ""
    return f"memlock {expected['value']}{ceiling}"


LIMITS_MEMLOCK_SESSION = Check(
    id="limits.memlock-session",
    title="memlock unlimited in a login session",
    spec_fields=("pools",),
    derive=_derive_session,
    evaluate=_evaluate_session,
    explain=_explain_session,
)


# --- host.kernel -----------------------------------------------------------------------------


def _derive_kernel(c: Context) -> Expect | Skip:
    release = str(c.variables.get("common_kernel_release") or "")
    if not release:
        return Skip("software.kernel", "the spec names no kernel: the installed one is held")
    return Expect(
        release,
        "software.kernel",
        f"reboot the node into {release} (myriad roll, or myriad bringup --tags reboot "
        "--limit {node}), after the common role installed it (myriad bringup --tags common "
        "--limit {node}); a node that booted another kernel shows it in GRUB's menu order",
    )


def _evaluate_kernel(expected: str, facts: NodeFacts, view: ClusterView, node: str) -> Outcome:
    if not facts.kernel_release.ok:
        return unavailable(facts.kernel_release)
    booted = facts.kernel_release.get()
    return passed(booted) if booted == expected else failed(f"booted {booted}")


HOST_KERNEL = Check(
    id="host.kernel",
    title="the node booted the spec's kernel",
    spec_fields=("software.kernel",),
    derive=_derive_kernel,
    evaluate=_evaluate_kernel,
)
