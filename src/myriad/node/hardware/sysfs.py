"""Reading a sysfs tree under any root, so the same code runs on `/sys` and on a capture.

Every path is relative to the root (`bus/pci/devices`, `class/infiniband/mlx5_0/fw_ver`).
A file that cannot be read is `None`, never an exception: sysfs refuses reads of some
attributes by state (`class/net/X/speed` of a link that is down fails with EINVAL), and a
missing attribute is a fact about the node, not a bug. `Recorder` wraps a reader and keeps
every file, link and folder it was asked about, which is how `tree.capture` takes exactly
the part of a live node that discovery reads.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Protocol


class Reader(Protocol):
    def read(self, rel: str) -> str | None: ...
    def listdir(self, rel: str) -> list[str]: ...
    def exists(self, rel: str) -> bool: ...
    def resolve(self, rel: str) -> str | None: ...


@dataclass(frozen=True, slots=True)
class Sysfs:
    root: str = "/sys"

    def _path(self, rel: str) -> str:
        return os.path.join(self.root, rel)

    def read(self, rel: str) -> str | None:
        try:
            with open(self._path(rel), encoding="utf-8", errors="replace") as f:
                return f.read().strip()
        except OSError:
            return None

    def listdir(self, rel: str) -> list[str]:
        try:
            return sorted(os.listdir(self._path(rel)))
        except OSError:
            return []

    def exists(self, rel: str) -> bool:
        return os.path.lexists(self._path(rel))

    def resolve(self, rel: str) -> str | None:
        """Where `rel` leads once every link on the way is followed, relative to the root."""
        path = self._path(rel)
        if not os.path.exists(path):
            return None
        real = os.path.realpath(path)
        base = os.path.realpath(self.root)
        return os.path.relpath(real, base) if real.startswith(base + os.sep) else None

    def links_on_the_way(self, rel: str) -> list[tuple[str, str]]:
        """(link, target) of each symbolic link met while resolving `rel` (for a capture)."""
        found: list[tuple[str, str]] = []
        parts = [p for p in rel.split("/") if p]
        current: list[str] = []
        for part in parts:
            current.append(part)
            here = "/".join(current)
            full = self._path(here)
            if os.path.islink(full):
                found.append((here, os.readlink(full)))
                resolved = self.resolve(here)
                if resolved is None:
                    break
                # The rest of the path continues from where the link leads.
                current = resolved.split("/")
        return found


@dataclass(slots=True)
class Recorder:
    """A reader that remembers what it was asked: files with their text, links, folders."""

    inner: Sysfs
    files: dict[str, str] = field(default_factory=dict)
    links: dict[str, str] = field(default_factory=dict)
    folders: set[str] = field(default_factory=set)

    def _canonical(self, rel: str) -> str:
        # Keep every value under its real path, so links and files never overlap.
        for link, target in self.inner.links_on_the_way(rel):
            self.links[link] = target
        parent, _, name = rel.rpartition("/")
        real_parent = self.inner.resolve(parent) if parent else ""
        return f"{real_parent}/{name}" if real_parent else rel

    def read(self, rel: str) -> str | None:
        value = self.inner.read(rel)
        if value is not None:
            self.files[self._canonical(rel)] = value
        return value

    def listdir(self, rel: str) -> list[str]:
        names = self.inner.listdir(rel)
        real = self.inner.resolve(rel)
        if real is not None:
            self._canonical(rel)
            self.folders.add(real)
            for name in names:
                child = f"{rel}/{name}"
                if os.path.islink(self.inner._path(child)):
                    self.links[f"{real}/{name}"] = os.readlink(self.inner._path(child))
                elif os.path.isdir(self.inner._path(child)):
                    self.folders.add(f"{real}/{name}")
        return names

    def exists(self, rel: str) -> bool:
        there = self.inner.exists(rel)
        if there:
            self._canonical(rel)
            full = self.inner._path(rel)
            if os.path.islink(full):
                parent, _, name = rel.rpartition("/")
                real_parent = self.inner.resolve(parent) if parent else ""
                self.links[f"{real_parent}/{name}" if real_parent else rel] = os.readlink(full)
        return there

    def resolve(self, rel: str) -> str | None:
        real = self.inner.resolve(rel)
        if real is not None:
            for link, target in self.inner.links_on_the_way(rel):
                self.links[link] = target
        return real
