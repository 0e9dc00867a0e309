"""What a baked image carries so a node can converge itself: `/opt/myriad`.

The controller's own Ansible (ansible-core, the three collections the roles use, and their
pure-Python dependencies), Myriad's playbooks and roles, the node package (myriad-node.pyz,
the one artefact of `myriad.node` the health role installs and `myriad-converge` runs from),
`myriad-converge` and its systemd unit. The node runs the
same Ansible and the same roles the controller would push, so the two modes cannot drift; a
change to any of it changes the bundle's digest, and with it the image's content hash.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.metadata
import io
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import ansible  # type: ignore[import-untyped]

from myriad import paths
from myriad.node import artefact

HOME = "/opt/myriad"
# The node package, where myriad.node.converge tells the health role to take it from.
NODE_ARTEFACT = f"{HOME}/{artefact.NAME}"
CONVERGE_PROGRAM = "/usr/local/sbin/myriad-converge"
CONVERGE_UNIT = "/etc/systemd/system/myriad-converge.service"
# Importable packages the node-side ansible-playbook needs, and every collection a role names
# (the play loads every role when it starts, also those no node of this image runs).
LIBRARY = (
    "ansible",
    "jinja2",
    "markupsafe",
    "yaml",
    "packaging",
    "resolvelib",
    "ansible_collections/ansible/posix",
    "ansible_collections/community/general",
    "ansible_collections/community/mysql",
    "ansible_collections/kubernetes/core",
    # Mitogen keeps one interpreter for the whole play instead of one per task, as in push mode.
    "ansible_mitogen",
    "mitogen",
)
# Distributions whose versions the image record lists (what `ansible --version` would say).
VERSIONED = ("ansible-core", "ansible", "Jinja2", "PyYAML")
_SKIP = ("__pycache__", ".pyc", "/molecule/", "/tests/")

# Started at boot once a seed is there; `systemctl start` runs it again on demand (a oneshot
# returns when the play has ended).
UNIT = f"""[Unit]
Description=Myriad: converge this node from its seed
Wants=network-online.target
After=network-online.target
ConditionPathExists=/var/lib/myriad/seed/seed.json

[Service]
Type=oneshot
ExecStart={CONVERGE_PROGRAM}
TimeoutStartSec=infinity

[Install]
WantedBy=multi-user.target
"""


def site_packages() -> Path:
    return Path(next(iter(ansible.__path__))).parent


def _skipped(path: Path) -> bool:
    text = path.as_posix()
    return any(part in text for part in _SKIP)


def _tree(root: Path, prefix: str) -> Iterator[tuple[str, Path]]:
    for path in sorted(root.rglob("*")):
        if path.is_file() and not _skipped(path):
            yield f"{prefix}/{path.relative_to(root).as_posix()}", path


def project_members() -> Iterator[tuple[str, Path]]:
    """Myriad's side of the bundle (by its path inside HOME): what a role change changes."""
    yield from _tree(paths.project_root() / "playbooks", "playbooks")
    yield from _tree(paths.roles_dir(), "roles")


# Distributions whose metadata must come along: ansible-core reads its dependencies'
# versions with importlib.metadata when it starts.
DISTRIBUTIONS = ("ansible_core", "jinja2", "markupsafe", "pyyaml", "packaging", "resolvelib")


def library_members() -> Iterator[tuple[str, Path]]:
    base = site_packages()
    for name in LIBRARY:
        yield from _tree(base / name, f"lib/{name}")
    for folder in sorted(base.glob("*.dist-info")):
        if folder.name.split("-", 1)[0].lower() in DISTRIBUTIONS:
            yield from _tree(folder, f"lib/{folder.name}")


def versions() -> dict[str, str]:
    found = {}
    for name in VERSIONED:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return found


def converge_program() -> bytes:
    """myriad-converge: the node package's `converge` command, standard library only."""
    return (
        "#!/bin/sh\n"
        "# myriad-converge: this node converges itself from its seed (myriad.node.converge).\n"
        f'exec /usr/bin/python3 -I -S {NODE_ARTEFACT} converge "$@"\n'
    ).encode()


def bundle_digest() -> str:
    """The project's files and the node package by content, the library by version: hashing
    50 MB of site-packages on every `up` would cost more than it tells."""
    digest = hashlib.sha256()
    for arcname, path in project_members():
        digest.update(arcname.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    for name, version in sorted(versions().items()):
        digest.update(f"{name}=={version}\0".encode())
    digest.update(converge_program() + UNIT.encode())
    digest.update(hashlib.sha256(artefact.build()).digest())
    return digest.hexdigest()


def role_digests() -> dict[str, str]:
    """Role name → sha256 over its files; the playbooks under "playbooks" (the image record)."""
    found: dict[str, hashlib._Hash] = {}
    for arcname, path in project_members():
        parts = arcname.split("/")
        if parts[0] == "roles" and len(parts) > 2:
            key = parts[1]
        elif parts[0] == "playbooks":
            key = "playbooks"
        else:
            continue
        if key:
            entry = found.setdefault(key, hashlib.sha256())
            entry.update(arcname.encode() + b"\0" + path.read_bytes())
    return {name: entry.hexdigest() for name, entry in sorted(found.items())}


def write_bundle(out: IO[bytes]) -> None:
    """The bundle as a tar stream rooted at `/` (for `docker cp -` or a chroot's tar -x)."""
    with tarfile.open(fileobj=out, mode="w|") as archive:
        write_members(archive)


def write_members(archive: tarfile.TarFile) -> None:
    for arcname, path in [*project_members(), *library_members()]:
        archive.add(path, arcname=f"{HOME.lstrip('/')}/{arcname}", recursive=False)
    _add_bytes(archive, NODE_ARTEFACT.lstrip("/"), artefact.build(), artefact.MODE)
    _add_bytes(archive, CONVERGE_PROGRAM.lstrip("/"), converge_program(), 0o755)
    _add_bytes(archive, CONVERGE_UNIT.lstrip("/"), UNIT.encode(), 0o644)


def _add_bytes(archive: tarfile.TarFile, name: str, content: bytes, mode: int) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(content), mode
    archive.addfile(info, io.BytesIO(content))


def write_kit(out: Path, build_inventory: Path) -> tuple[str, int]:
    """AWS's build kit: the bundle and the build inventory (under HOME/image-build), gzip'd;
    (sha256, bytes) of the file."""
    partial = out.with_name(f".{out.name}.partial")
    try:
        with (
            gzip.open(partial, "wb", compresslevel=6) as packed,
            tarfile.open(fileobj=packed, mode="w|") as archive,
        ):
            write_members(archive)
            for path in sorted(build_inventory.rglob("*")):
                if path.is_file():
                    relative = path.relative_to(build_inventory).as_posix()
                    archive.add(path, arcname=f"{HOME.lstrip('/')}/image-build/{relative}")
        digest = hashlib.sha256(partial.read_bytes()).hexdigest()
        partial.replace(out)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return digest, out.stat().st_size
