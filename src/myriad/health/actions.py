"""The action each node health finding asks for: the map in `actions.yaml`, read and checked.

A finding is a failing check of a drained node (`gpu.xid`, `hca.state`, ...), with its detail
where the check has one: the XID number for `gpu.xid`, the driver's GPU Recovery Action for
`gpu.recovery-action`. The map gives it one `Action` and says where that comes from (NVIDIA's
XID catalog bucket, the driver's recovery action, or Myriad's own reason for a check), so
`myriad health --explain CHECK` and every decision of the remediation core
(`myriad.health.remedy`) can say why.

The map is data. `load_action_map` reads it with locations, so a bad entry is reported as
`file:line:column: path: what is wrong`, every problem at once (`ActionMapError`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Literal, cast

from myriad.errors import ActionMapError, Problem
from myriad.spec.yaml_source import SourceMap, parse_document

Action = Literal["none", "reset-gpu", "reboot", "power-cycle", "needs-hardware"]
# Mildest first: a node that fails again climbs this ladder (myriad.health.remedy).
LADDER: tuple[Action, ...] = ("none", "reset-gpu", "reboot", "power-cycle", "needs-hardware")
# A check entry may hand the decision to a table of the map instead of naming an action.
_DEFERRED = {"by-xid": "xid", "by-recovery-action": "recovery_action"}
UNREACHABLE = "node.unreachable"
XID_CHECK = "gpu.xid"
RECOVERY_CHECK = "gpu.recovery-action"
_SECTIONS = ("catalog", "buckets", "recovery_action", "checks", "xid")


@dataclass(frozen=True, slots=True)
class Rule:
    """One entry: the action and why. `source` says whose word it is, `bucket` NVIDIA's."""

    action: Action
    why: str
    source: str
    bucket: str | None = None
    name: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "why": self.why,
            "source": self.source,
            **({"bucket": self.bucket} if self.bucket is not None else {}),
            **({"name": self.name} if self.name is not None else {}),
        }


@dataclass(frozen=True, slots=True)
class Finding:
    """A failing check on a node, with its detail: an XID number, a recovery action value."""

    check: str
    detail: str | int | None = None

    def describe(self) -> str:
        return self.check if self.detail is None else f"{self.check}:{self.detail}"


@dataclass(frozen=True, slots=True)
class ActionMap:
    catalog_source: str
    last_xid: int
    buckets: Mapping[str, Rule]
    xid: Mapping[int, Rule]
    recovery_action: Mapping[str, Rule]
    checks: Mapping[str, Rule | str]  # a Rule, or the table ("xid", "recovery_action") it defers to

    def for_xid(self, xid: int) -> Rule:
        rule = self.xid.get(xid)
        if rule is not None:
            return rule
        # Newer than the catalog read here: unknown is never healthy.
        return Rule(
            "needs-hardware",
            f"XID {xid} is not in the catalog read here (1..{self.last_xid}): an operator "
            "looks it up",
            "myriad",
        )

    def for_recovery_action(self, value: str) -> Rule:
        return self.recovery_action.get(value) or self.recovery_action["unknown"]

    def resolve(self, finding: Finding) -> Rule:
        """The rule of one finding. A check decided per XID or per recovery action that comes
        without its detail asks a person (needs-hardware): unknown is never healthy."""
        entry = self.checks.get(finding.check, self.checks["default"])
        if entry == "xid":
            if isinstance(finding.detail, int):
                return self.for_xid(finding.detail)
            return Rule("needs-hardware", f"{finding.check} without an XID number", "myriad")
        if entry == "recovery_action":
            if isinstance(finding.detail, str):
                return self.for_recovery_action(finding.detail)
            return Rule("needs-hardware", f"{finding.check} without its value", "myriad")
        return cast(Rule, entry)

    def explain(self, name: str) -> list[tuple[str, Rule]]:
        """The entries `--explain NAME` shows: a check (`hca.state`), a check's table
        (`gpu.xid`, `gpu.recovery-action`), one entry of it (`gpu.xid:79`,
        `gpu.recovery-action:Reset`), or `xid:79`. Empty when nothing has that name."""
        check, _, detail = name.partition(":")
        if check == "xid":
            check = XID_CHECK
        entry = self.checks.get(check)
        if entry == "xid":
            if detail:
                return (
                    [(f"{XID_CHECK}:{detail}", self.for_xid(int(detail)))]
                    if detail.isdigit()
                    else []
                )
            return [(f"{XID_CHECK}:{x}", rule) for x, rule in sorted(self.xid.items())]
        if entry == "recovery_action":
            table = self.recovery_action
            if detail:
                return [(f"{RECOVERY_CHECK}:{detail}", self.for_recovery_action(detail))]
            return [(f"{RECOVERY_CHECK}:{value}", rule) for value, rule in table.items()]
        if isinstance(entry, Rule) and not detail:
            return [(check, entry)]
        return []

    def names(self) -> list[str]:
        return sorted(c for c in self.checks if c != "default")


# --- reading ------------------------------------------------------------------------------


def _text(value: Any) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None


class _Reader:
    def __init__(self, source: SourceMap) -> None:
        self.source = source
        self.problems: list[Problem] = []

    def fail(self, path: tuple[str | int, ...], message: str, hint: str = "") -> None:
        self.problems.append(self.source.problem(path, message, hint))

    def mapping(self, value: Any, path: tuple[str | int, ...]) -> Mapping[Any, Any]:
        if isinstance(value, Mapping):
            return value
        self.fail(path, f"expected a mapping, got {type(value).__name__}")
        return {}

    def rule(
        self,
        value: Any,
        path: tuple[str | int, ...],
        source: str,
        *,
        deferring: bool = False,
        inherit: Rule | None = None,
        keys: frozenset[str] = frozenset({"action", "why"}),
    ) -> Rule | str | None:
        entry = self.mapping(value, path)
        for key in entry:
            if key not in keys:
                self.fail(
                    (*path, key), f"unknown key '{key}'", f"expected {', '.join(sorted(keys))}"
                )
        action = entry.get("action")
        why = _text(entry.get("why"))
        if action is None and inherit is not None:
            return Rule(inherit.action, inherit.why, source, name=_text(entry.get("name")))
        if deferring and action in _DEFERRED:
            if why is None:
                self.fail((*path, "why"), "every entry says why")
            return _DEFERRED[action]
        if action not in LADDER:
            allowed = [*LADDER, *(_DEFERRED if deferring else ())]
            self.fail(
                (*path, "action"),
                f"unknown action {action!r}",
                f"one of {', '.join(allowed)}",
            )
            return None
        if why is None:
            self.fail((*path, "why"), "every entry says why")
            return None
        return Rule(cast(Action, action), why, source, name=_text(entry.get("name")))


def read_action_map(text: str, file: str) -> ActionMap:
    """Read and check an action map; `ActionMapError` lists every problem with its place."""
    document = parse_document(text, file)
    reader = _Reader(document.source)
    data = reader.mapping(document.data, ())
    for key in data:
        if key not in _SECTIONS:
            reader.fail((key,), f"unknown section '{key}'", f"expected {', '.join(_SECTIONS)}")
    catalog = reader.mapping(data.get("catalog"), ("catalog",))
    source = _text(catalog.get("source")) or ""
    if not source:
        reader.fail(("catalog", "source"), "the catalog's address is missing")
    last = catalog.get("last_xid")
    if not isinstance(last, int) or isinstance(last, bool) or last < 1:
        reader.fail(("catalog", "last_xid"), f"expected a positive whole number, got {last!r}")
        last = 0

    buckets: dict[str, Rule] = {}
    for name, value in reader.mapping(data.get("buckets"), ("buckets",)).items():
        rule = reader.rule(value, ("buckets", name), "nvidia-xid-catalog")
        if isinstance(rule, Rule):
            buckets[str(name)] = rule

    xids: dict[int, Rule] = {}
    xid_keys = frozenset({"xid", "bucket", "name", "action", "why"})
    entries = data.get("xid")
    if not isinstance(entries, (list, tuple)):
        reader.fail(("xid",), "expected a list of entries, one per XID")
        entries = []
    for index, value in enumerate(entries):
        path: tuple[str | int, ...] = ("xid", index)
        entry = reader.mapping(value, path)
        number = entry.get("xid")
        if not isinstance(number, int) or isinstance(number, bool) or not 1 <= number <= last:
            reader.fail((*path, "xid"), f"XID {number!r} is not a number in 1..{last}")
            continue
        if number in xids:
            reader.fail((*path, "xid"), f"XID {number} has two entries")
            continue
        bucket = _text(entry.get("bucket"))
        if bucket is None or bucket not in buckets:
            reader.fail(
                (*path, "bucket"),
                f"unknown bucket {bucket!r}",
                f"one of {', '.join(sorted(buckets))}" if buckets else "",
            )
            continue
        own = "action" in entry
        if own and "why" not in entry:
            reader.fail((*path, "why"), "an XID whose action is not its bucket's says why")
            continue
        if not own and bucket == "NONE_GIVEN":
            reader.fail(path, "the catalog gives this XID no action: name one, and why")
            continue
        rule = reader.rule(
            value,
            path,
            "myriad" if own else "nvidia-xid-catalog",
            inherit=None if own else buckets[bucket],
            keys=xid_keys,
        )
        if isinstance(rule, Rule):
            xids[number] = Rule(rule.action, rule.why, rule.source, bucket, rule.name)
    missing = [x for x in range(1, last + 1) if x not in xids]
    if missing and not reader.problems:
        reader.fail(
            ("xid",), f"no entry for XID {_ranges(missing)}", "every XID of the catalog has one"
        )

    recovery: dict[str, Rule] = {}
    sources = ("nvidia-recovery-action", "myriad")
    table = reader.mapping(data.get("recovery_action"), ("recovery_action",))
    for value_name, value in table.items():
        path = ("recovery_action", value_name)
        # An entry is the driver's instruction unless it says it is Myriad's reading of it.
        whose = reader.mapping(value, path).get("source", sources[0])
        if whose not in sources:
            reader.fail(
                (*path, "source"), f"unknown source {whose!r}", f"one of {', '.join(sources)}"
            )
            continue
        rule = reader.rule(value, path, whose, keys=frozenset({"action", "why", "source"}))
        if isinstance(rule, Rule):
            recovery[str(value_name)] = rule
    if "unknown" not in recovery and not reader.problems:
        reader.fail(("recovery_action",), "no 'unknown' entry for values the map does not know")

    checks: dict[str, Rule | str] = {}
    for check, value in reader.mapping(data.get("checks"), ("checks",)).items():
        rule = reader.rule(value, ("checks", check), "myriad", deferring=True)
        if rule is not None:
            checks[str(check)] = rule
    for needed in ("default", UNREACHABLE):
        if needed not in checks and not reader.problems:
            reader.fail(("checks",), f"no '{needed}' entry")

    if reader.problems:
        raise ActionMapError(reader.problems)
    return ActionMap(source, last, buckets, xids, recovery, checks)


def _ranges(numbers: list[int]) -> str:
    spans: list[str] = []
    start = prev = numbers[0]
    for n in [*numbers[1:], None]:
        if n is not None and n == prev + 1:
            prev = n
            continue
        spans.append(str(start) if start == prev else f"{start}-{prev}")
        if n is not None:
            start = prev = n
    return ", ".join(spans)


def load_action_map(path: Path | None = None) -> ActionMap:
    """The map shipped with the package, or the one at `path`."""
    if path is None:
        text = resources.files("myriad.health").joinpath("actions.yaml").read_text("utf-8")
        return read_action_map(text, "myriad/health/actions.yaml")
    return read_action_map(path.read_text(encoding="utf-8"), str(path))
