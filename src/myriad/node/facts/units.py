"""The systemd units a check may ask about (`systemctl is-active UNIT...`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from myriad.node.facts.declare import Declared, Probe, ProbeRecord, Reading
from myriad.node.facts.fact import Fact
from myriad.node.facts.probe import run
from myriad.node.parsers import ParseFailure

# What the gatherer asks about unless told otherwise (--units).
DEFAULT_UNITS = (
    "chrony",
    "chronyd",
    "systemd-timesyncd",
    "munge",
    "slurmd",
    "slurmctld",
    "slurmdbd",
    "docker",
    "containerd",
    "kubelet",
    "nvidia-persistenced",
    "nvidia-fabricmanager",
    "nvidia-imex",
    "opensm",
    "myriad-roce-qos",
)
PROBE = Probe("units", lambda o: run(["systemctl", "is-active", *o.units], o.timeout))


def _units(names: list[str]) -> Callable[[str], Mapping[str, str]]:
    def parse(text: str) -> Mapping[str, str]:
        states = [line.strip() for line in text.splitlines() if line.strip()]
        if len(states) != len(names):
            raise ParseFailure(
                "systemctl is-active", f"{len(states)} answers for {len(names)} units"
            )
        return dict(zip(names, states, strict=True))

    return parse


def _has_stdout(probe: ProbeRecord) -> bool:
    return bool(probe.stdout.strip())


def _read(r: Reading) -> Fact[Mapping[str, str]]:
    # `units` answers come back in the order the gatherer was asked them (its args).
    names = [str(u) for u in r.args.get("units", [])]
    # systemctl is-active exits 3 when any unit is not active; the states are still read.
    return r.read(PROBE.name, "systemctl is-active", _units(names), accept_rc=_has_stdout)


UNITS: Declared[Fact[Mapping[str, str]]] = Declared("units", (PROBE,), _read)
