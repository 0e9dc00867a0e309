"""A sysfs tree as one text file: what a node's discovery read, replayable anywhere.

One entry per line, paths relative to the sysfs root, sorted:

    dir  devices/pci0000:15/0000:15:01.0
    link bus/pci/devices/0000:18:00.0 ../../../devices/pci0000:15/0000:15:01.0/0000:18:00.0
    file devices/pci0000:15/0000:15:01.0/0000:18:00.0/vendor "0x15b3"

A file's value is a JSON string (sysfs attributes are text; JSON keeps any character).
Lines starting with `#` are comments: where the tree came from. `capture` writes the part
of a live root that discovery reads; `materialise` builds the tree under a folder, with real
links, so discovery runs on it exactly as on `/sys`.
"""

from __future__ import annotations

import json
import os

from myriad.node.hardware.discover import discover
from myriad.node.hardware.sysfs import Recorder, Sysfs


class TreeError(ValueError):
    pass


def render(recorder: Recorder, comments: tuple[str, ...] = ()) -> str:
    lines = [f"# {c}" for c in comments]
    entries: list[tuple[str, str]] = []
    entries += [(path, f"dir {path}") for path in recorder.folders]
    entries += [(path, f"link {path} {target}") for path, target in recorder.links.items()]
    entries += [(path, f"file {path} {json.dumps(v)}") for path, v in recorder.files.items()]
    lines += [line for _, line in sorted(entries)]
    return "\n".join(lines) + "\n"


def capture(root: str = "/sys", comments: tuple[str, ...] = ()) -> str:
    """The part of `root` that discovery reads, as a tree file."""
    recorder = Recorder(Sysfs(root))
    discover(recorder)
    return render(recorder, comments)


def _safe(base: str, rel: str, where: str) -> str:
    if rel.startswith("/") or ".." in rel.split("/") or not rel:
        raise TreeError(f"{where}: path {rel!r} must stay inside the tree (relative, no ..)")
    return os.path.join(base, rel)


def materialise(text: str, base: str, source: str = "<tree>") -> None:
    """Build the tree described by `text` under the folder `base`."""
    links: list[tuple[str, str, str]] = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        where = f"{source}:{number}"
        if not line or line.startswith("#"):
            continue
        kind, _, rest = line.partition(" ")
        if kind == "dir":
            os.makedirs(_safe(base, rest, where), exist_ok=True)
        elif kind == "link":
            path, _, target = rest.partition(" ")
            if not target or target.startswith("/"):
                raise TreeError(f"{where}: a link needs a relative target: {line!r}")
            links.append((_safe(base, path, where), target, where))
        elif kind == "file":
            path, _, value = rest.partition(" ")
            try:
                content = json.loads(value)
            except ValueError as exc:
                raise TreeError(f"{where}: the value is not a JSON string: {value!r}") from exc
            if not isinstance(content, str):
                raise TreeError(f"{where}: the value is not a JSON string: {value!r}")
            full = _safe(base, path, where)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "w", encoding="utf-8") as f:
                f.write(content + "\n")
        else:
            raise TreeError(f"{where}: expected dir, link or file, got {kind!r}")
    for full, target, where in links:
        os.makedirs(os.path.dirname(full), exist_ok=True)
        if os.path.lexists(full):
            raise TreeError(f"{where}: {os.path.relpath(full, base)} is given twice")
        os.symlink(target, full)
