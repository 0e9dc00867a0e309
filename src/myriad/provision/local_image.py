"""Baked node images on Docker: the build container, the commit, the root file system archive.

The build container starts from the node image (`node_image.IMAGE_TAG`) as a node would,
systemd and all, on the cluster's network (the Debian mirror is reachable from there); the
image phase runs in it through Ansible like any node; then it is committed as
`myriad-image-<cluster>-<profile>:<hash>` with its record in `/etc/myriad/image.json` and in
labels, and removed. For bare metal the same file system is exported as a gzip'd tar.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import shutil
import subprocess
import tarfile
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from myriad.errors import LocalClusterError
from myriad.plan.node_images import IMAGE_RECORD_PATH
from myriad.provision.local import (
    SYSTEMD_RUN_OPTIONS,
    docker,
    ensure_network,
    network_name,
    wait_booted,
)
from myriad.provision.node_image import IMAGE_TAG
from myriad.spec.models import Cluster

BUILD_LABEL = "myriad.image-build"
HASH_LABEL = "myriad.image.hash"
PROFILE_LABEL = "myriad.image.profile"


def image_repository(cluster: str, profile: str) -> str:
    return f"myriad-image-{cluster}-{profile}".lower()


def image_tag(cluster: str, profile: str, content_hash: str) -> str:
    return f"{image_repository(cluster, profile)}:{content_hash[:12]}"


def image_id(ref: str) -> str | None:
    """The image's id, or None where Docker has no such image."""
    out = docker("image", "inspect", "--format", "{{.Id}}", ref, check=False).strip()
    return out if out.startswith("sha256:") else None


def base_image_id() -> str:
    found = image_id(IMAGE_TAG)
    if found is None:
        raise LocalClusterError(f"the node image {IMAGE_TAG} is missing: run scripts/bootstrap")
    return found


@contextmanager
def build_container(spec: Cluster, profile: str) -> Iterator[str]:
    """A booted container of the node image, removed afterwards whatever happens."""
    ensure_network(spec)
    name = f"myriad-build-{spec.metadata.name}-{profile}-{uuid.uuid4().hex[:8]}".lower()
    docker(
        "run", "--detach", "--name", name, "--hostname", "image-build",
        "--label", f"{BUILD_LABEL}={spec.metadata.name}",
        "--network", network_name(spec),
        *SYSTEMD_RUN_OPTIONS,
        IMAGE_TAG, "/lib/systemd/systemd",
    )  # fmt: skip
    try:
        wait_booted(name)
        yield name
    finally:
        docker("rm", "--force", name, check=False, timeout=120)


def leftover_builds(cluster: str) -> list[str]:
    out = docker("ps", "-a", "--filter", f"label={BUILD_LABEL}={cluster}", "--format", "{{.Names}}")
    return out.split()


def copy_tar(container: str, write: Callable[[IO[bytes]], None], timeout: float = 600) -> None:
    """Unpack a tar stream at the container's `/` (`write` produces the stream)."""
    process = subprocess.Popen(
        ["docker", "cp", "-", f"{container}:/"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdin is not None and process.stderr is not None
    try:
        write(process.stdin)
        process.stdin.close()
        process.wait(timeout=timeout)
        err = process.stderr.read()
    except BaseException:
        process.kill()
        process.wait()
        raise
    if process.returncode != 0:
        raise LocalClusterError(f"copying into {container} failed: {err.decode().strip()}")


def installed_packages(container: str) -> dict[str, str]:
    out = docker("exec", container, "dpkg-query", "-W", "-f", "${Package}\t${Version}\n")
    return dict(line.split("\t", 1) for line in out.splitlines() if "\t" in line)


# What the committed image must not keep from its build: the identity of the build container
# (an empty machine-id makes every node generate its own), a seed, a converge result, apt's
# downloaded packages, and the state of a container engine the build started (each node's
# own; a directory from the image's layer cannot even be renamed on overlayfs, and dockerd
# renames its runtimes folder when it starts).
_RESET = (
    "systemctl stop docker.socket docker.service containerd.service >/dev/null 2>&1;"
    " systemctl enable myriad-converge.service >/dev/null 2>&1"
    " && rm -rf /var/lib/myriad /var/cache/apt/archives/*.deb /var/lib/docker /var/lib/containerd"
    " && : > /etc/machine-id && rm -f /var/lib/dbus/machine-id"
)


def commit(container: str, tag: str, record: Mapping[str, Any]) -> str:
    """Write the image record, reset what is per machine, commit; returns the image id."""
    text = json.dumps(record, indent=2, sort_keys=True) + "\n"
    _write_file(container, IMAGE_RECORD_PATH, text)
    docker("exec", container, "sh", "-c", _RESET)
    docker(
        "commit",
        "--change", f"LABEL {HASH_LABEL}={record['content_hash']}",
        "--change", f"LABEL {PROFILE_LABEL}={record['profile']}",
        "--change", 'CMD ["/lib/systemd/systemd"]',
        container, tag,
        timeout=900,
    )  # fmt: skip
    found = image_id(tag)
    if found is None:
        raise LocalClusterError(f"docker commit of {container} left no image {tag}")
    return found


def _write_file(container: str, path: str, text: str) -> None:
    def write(stream: IO[bytes]) -> None:
        with tarfile.open(fileobj=stream, mode="w|") as archive:
            info = tarfile.TarInfo(path.lstrip("/"))
            data = text.encode()
            info.size, info.mode = len(data), 0o644
            archive.addfile(info, io.BytesIO(data))

    copy_tar(container, write)


def export_rootfs(container: str, out: Path) -> tuple[str, int]:
    """`docker export` of the container, gzip'd into `out`; (sha256, bytes) of the archive."""
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(f".{out.name}.partial")
    process = subprocess.Popen(["docker", "export", container], stdout=subprocess.PIPE)
    assert process.stdout is not None
    try:
        with partial.open("wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as packed:
            shutil.copyfileobj(process.stdout, packed, 1 << 20)
        if process.wait(timeout=600) != 0:
            raise LocalClusterError(f"docker export {container} failed")
        digest = hashlib.sha256()
        with partial.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        partial.replace(out)
    except BaseException:
        process.kill()
        partial.unlink(missing_ok=True)
        raise
    return digest.hexdigest(), out.stat().st_size


def remove_images(cluster: str) -> list[str]:
    """The cluster's baked images (`myriad down`): every tag of every profile's repository."""
    out = docker(
        "image", "ls", "--format", "{{.Repository}}:{{.Tag}}",
        "--filter", f"reference=myriad-image-{cluster.lower()}-*",
    )  # fmt: skip
    tags = out.split()
    if tags:
        docker("image", "rm", "--force", *tags, check=False, timeout=300)
    return tags
