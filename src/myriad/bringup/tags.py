"""The tags `myriad bringup --tags` accepts, read from the playbook and roles themselves.

Ansible runs nothing, and says nothing, for a tag that no task carries: `--tags slurmm`
would "succeed" having applied nothing. So the tags are checked before the run against
the ones that exist: every play's tags in playbooks/site.yml (each role's play is tagged
with the role's name) and the tags on tasks inside the roles, plus Ansible's own special
tags. Read from the files each time, so a new role or tag needs no list kept by hand.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import yaml

from myriad import paths
from myriad.errors import BadArguments

# Ansible's special tags (docs: "Tags" → "Special tags").
SPECIAL_TAGS = frozenset({"all", "always", "never", "tagged", "untagged"})


def _tags_of(node: Any) -> Iterator[str]:
    """Every `tags:` value anywhere in a parsed playbook or task file."""
    if isinstance(node, dict):
        tags = node.get("tags")
        if isinstance(tags, str):
            yield from (t.strip() for t in tags.split(",") if t.strip())
        elif isinstance(tags, list):
            yield from (str(t) for t in tags)
        for value in node.values():
            yield from _tags_of(value)
    elif isinstance(node, list):
        for item in node:
            yield from _tags_of(item)


def _load(path: Path) -> Any:
    try:
        return yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError):
        return None


def site_roles(playbook: Path | None = None) -> list[str]:
    """The roles site.yml applies, in order."""
    plays = _load(playbook or paths.playbook("site.yml")) or []
    roles: list[str] = []
    for play in plays if isinstance(plays, list) else []:
        for role in play.get("roles", []) if isinstance(play, dict) else []:
            name = role.get("role") if isinstance(role, dict) else role
            if isinstance(name, str) and name not in roles:
                roles.append(name)
    return roles


def known_tags(playbook: Path | None = None, roles_dir: Path | None = None) -> set[str]:
    """The play tags of site.yml and the task tags of the roles it applies."""
    playbook = playbook or paths.playbook("site.yml")
    roles_dir = roles_dir or paths.roles_dir()
    found = set(_tags_of(_load(playbook)))
    for role in site_roles(playbook):
        for folder in ("tasks", "handlers"):
            for path in sorted((roles_dir / role / folder).glob("**/*.yml")):
                found.update(_tags_of(_load(path)))
    return found - SPECIAL_TAGS


def check_tags(
    tags: Sequence[str] | None, playbook: Path | None = None, roles_dir: Path | None = None
) -> None:
    """BadArguments naming each unknown tag, a near spelling, and the valid ones."""
    if not tags:
        return
    known = known_tags(playbook, roles_dir)
    unknown = [tag for tag in tags if tag not in known and tag not in SPECIAL_TAGS]
    if not unknown:
        return
    roles = site_roles(playbook or paths.playbook("site.yml"))
    raise BadArguments(
        "--tags: "
        + "; ".join(_unknown(tag, known) for tag in unknown)
        + f". Roles: {', '.join(roles)}. Other tags: {_listed(known - set(roles))}"
    )


def _unknown(tag: str, known: Iterable[str]) -> str:
    near = difflib.get_close_matches(tag, sorted(known), n=1)
    return f"no role or task has the tag {tag!r}" + (
        f" (did you mean {near[0]!r}?)" if near else ""
    )


def _listed(tags: Iterable[str]) -> str:
    return ", ".join(sorted(tags)) or "none"
