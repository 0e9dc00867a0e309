"""Bare metal in image mode: a node installs its profile's baked root file system over PXE.

When the spec's bring-up mode resolves to `image` and `myriad image build` has recorded an
image with a root file system archive for a node's profile (`<state>/<cluster>/images/
<profile>.json`, `ImageManifest.archive`), the node's autoinstall changes in one place, its
`late-commands`. Ubuntu's autoinstall still partitions the disk (the spec's `os_disk`),
installs the boot loader and the stock system; then, in the installer's environment with the
new system mounted at /target (autoinstall reference, `late-commands`), the node

1. fetches the archive from the PXE server (`<http>/node-images/<file>`) and checks it
   against the sha256 the image record holds, before anything is unpacked;
2. unpacks it over /target, keeping what belongs to this install and this disk rather than
   to the build host: fstab, host name and machine id, netplan, the mdadm config, SSH host
   keys, cloud-init's state (the installed system's first boot still applies the
   autoinstall's user, keys and files), the EFI system partition;
3. rebuilds the initramfs and GRUB's menu in the target (`curtin in-target`, the installer's
   documented way to run a command in the installed system), so the boot uses the image's
   kernel with this disk's layout, and enables `myriad-converge.service`, which the image
   must hold (the command fails, and so the install, when it does not);
4. fetches the node's seed (`<http>/seeds/<node>.tar.gz?token=...`, the install's one-time
   token read from the kernel line; myriad.provision.pxe_state) and its `.sha256`, checks
   it, and unpacks it to /var/lib/myriad/seed (0700), so myriad-converge runs at first boot.

Why the archive over the stock install, and not curtin's own `sources` (curtin's
configuration reference: an http tarball is fetched and extracted to the target): Ubuntu's
autoinstall passes no `sources` through to curtin, and curtin's extract checks no digest. The
late-commands do the same extraction with the digest checked first.

What the archive must be: a root file system of the spec's `software.os` with a kernel, GRUB
and cloud-init installed (the build host's), made with GNU tar with numeric owners and
xattrs. The seed holds the munge key: the PXE server gives `/seeds/<node>.*` only to that
node's own address (`myriad.provision.pxe_server`), the seed itself only while the node is
flagged, once, for its install's token, and the files are 0600 in the bundle.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from myriad.fsutil import atomic_write_text
from myriad.plan.node_images import ImageManifest
from myriad.plan.nodes import NodeRecord
from myriad.spec.bringup import resolved_mode
from myriad.spec.models import Cluster
from stacks.interface import StackError

# Where the bundle keeps what image-mode installs fetch, under its `http/` folder.
ARCHIVE_FOLDER = "node-images"
SEED_FOLDER = "seeds"
# On the installed node: the seed myriad-converge reads, and the unit that reads it.
SEED_DIR = "/var/lib/myriad/seed"
CONVERGE_UNIT = "myriad-converge.service"
# What the archive never overwrites: this install's identity, disk layout and first-boot
# state. GNU tar patterns, anchored (an unanchored `sys` would also drop every `.../sys/`
# deep in the tree), each given as `p` and `./p`: anchored matching does not strip the `./`
# that `tar -C root .` puts before every name.
KEEP = (
    "etc/fstab",
    "etc/hostname",
    "etc/hosts",
    "etc/machine-id",
    "var/lib/dbus/machine-id",
    "etc/netplan",
    "etc/mdadm",
    "etc/cloud",
    "var/lib/cloud",
    "etc/ssh/ssh_host_*",
    "boot/efi",
    "dev",
    "proc",
    "sys",
    "run",
    "tmp",
)
_WORK = "/tmp/myriad"
_CURL = "curl -fsS --retry 10 --retry-delay 3 --retry-all-errors"
_CHUNK = 1 << 20


@dataclass(frozen=True, slots=True)
class ImageInstall:
    """What a node's autoinstall fetches in image mode."""

    profile: str
    content_hash: str
    archive_url: str
    archive_sha256: str
    seed_url: str
    # The PXE server's CA (PEM) when seeds go over TLS: curl checks the server with it.
    seed_ca: str | None = None


def node_count(spec: Cluster) -> int:
    return sum(pool.count for pool in spec.pools)


def image_mode(spec: Cluster) -> bool:
    return resolved_mode(spec.bringup, node_count(spec)) == "image"


def manifest_file(images_dir: Path, profile: str) -> Path:
    """`<state>/<cluster>/images/<profile>.json`, where `myriad image build` records an image."""
    return images_dir / f"{profile}.json"


def read_manifest(path: Path) -> ImageManifest | None:
    """The image record at `path`; None when there is none."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise StackError(f"{path}: cannot read the image record: {exc}") from None
    except ValueError as exc:
        raise StackError(
            f"{path}: the image record is not JSON ({exc}); build it again with "
            "`myriad image build`"
        ) from None
    try:
        return ImageManifest.from_dict(data)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise StackError(
            f"{path}: the image record lacks or mistypes {exc}; build it again with "
            "`myriad image build`"
        ) from None


def load_records(
    spec: Cluster, images_dir: Path, carries: Callable[[ImageManifest], object]
) -> dict[str, ImageManifest]:
    """Profile → image record, for the profiles the spec's pools use whose record `carries`
    what the stack needs (bare metal: an archive; AWS: a kit). Empty in push mode: a
    push-mode rendering never reads the state folder. A record of another cluster or
    profile is refused."""
    if not image_mode(spec):
        return {}
    found: dict[str, ImageManifest] = {}
    for profile in sorted({pool.profile for pool in spec.pools}):
        path = manifest_file(images_dir, profile)
        manifest = read_manifest(path)
        if manifest is None or carries(manifest) is None:
            continue
        if manifest.cluster != spec.metadata.name or manifest.profile != profile:
            raise StackError(
                f"{path} records an image of cluster {manifest.cluster} profile "
                f"{manifest.profile}, not {spec.metadata.name} {profile}; build it again with "
                f"`myriad image build --profile {profile}`"
            )
        found[profile] = manifest
    return found


def load_images(spec: Cluster, images_dir: Path) -> dict[str, ImageManifest]:
    """Profile → image record with an archive (what the PXE install unpacks)."""
    return load_records(spec, images_dir, lambda manifest: manifest.archive)


def installs_for(
    spec: Cluster,
    nodes: Iterable[NodeRecord],
    images: Mapping[str, ImageManifest],
    http: str,
    media: str | None = None,
    seeds: str | None = None,
    seed_ca: str | None = None,
) -> dict[str, ImageInstall]:
    """Node name → what it installs from, for the nodes whose profile has an archive.

    The archive comes from the media web server (`media`), the seed from the PXE server
    (`seeds`: its TLS listener when it has one, checked against `seed_ca`; else `http`),
    which gives it only to its node's address.
    """
    if not images or not image_mode(spec):
        return {}
    installs: dict[str, ImageInstall] = {}
    for node in nodes:
        manifest = images.get(node.profile)
        if manifest is None or manifest.archive is None:
            continue
        installs[node.name] = ImageInstall(
            profile=node.profile,
            content_hash=manifest.content_hash,
            archive_url=f"{media or http}/{ARCHIVE_FOLDER}/{manifest.archive.file}",
            archive_sha256=manifest.archive.sha256,
            seed_url=f"{seeds or http}/{SEED_FOLDER}/{node.name}.tar.gz",
            seed_ca=seed_ca,
        )
    return installs


def late_commands(node: str, install: ImageInstall) -> list[str]:
    """The autoinstall late-commands that put the image and the seed on the node.

    Each runs with `sh -c` in the installer; any that fails fails the install, which then
    never reports itself installed (the provisioning wait shows it).
    """
    archive = f"{_WORK}/root.tar.gz"
    seed = f"{_WORK}/{node}.tar.gz"
    excludes = " ".join(
        f"--exclude='{prefix}{pattern}'" for pattern in KEEP for prefix in ("", "./")
    )
    in_target = "curtin in-target --target=/target --"
    ca = f"{_WORK}/pxe-ca.pem"
    trust = f" --cacert {ca}" if install.seed_ca else ""
    # The CA is public; base64 keeps its PEM out of the shell's quoting.
    write_ca = (
        [
            f"mkdir -p {_WORK} && echo "
            f"{base64.b64encode(install.seed_ca.encode()).decode()} | base64 -d > {ca}"
        ]
        if install.seed_ca
        else []
    )
    return [
        f"mkdir -p {_WORK} && {_CURL} -o {archive} {install.archive_url}",
        f"echo '{install.archive_sha256}  {archive}' | sha256sum -c -",
        f"tar -xzpf {archive} -C /target --numeric-owner --xattrs --xattrs-include='*' "
        f"--anchored {excludes} && rm -f {archive}",
        f"{in_target} update-initramfs -u -k all",
        f"{in_target} update-grub",
        f"{in_target} systemctl enable {CONVERGE_UNIT}",
        # The install's one-time seed token, from the kernel line the PXE server wrote.
        *write_ca,
        "token=$(sed -n 's/.*myriad[.]seed_token=\\([^ ]*\\).*/\\1/p' /proc/cmdline) && "
        f'{_CURL}{trust} -o {seed} "{install.seed_url}?token=$token" && '
        f"{_CURL}{trust} -o {seed}.sha256 {install.seed_url}.sha256",
        f"cd {_WORK} && sha256sum -c {node}.tar.gz.sha256",
        f"install -d -m 0700 /target{SEED_DIR} && tar -xzf {seed} -C /target{SEED_DIR} "
        f"--no-same-owner && chown -R 0:0 /target{SEED_DIR} && rm -f {seed}",
    ]


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        while chunk := stream.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _place(source: Path, target: Path, mode: int) -> None:
    """`source` at `target` (a hard link where it can be, else a copy), atomically."""
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    os.close(handle)
    scratch = Path(temporary)
    try:
        scratch.unlink()
        try:
            os.link(source, scratch)
        except OSError:
            shutil.copyfile(source, scratch)
        os.chmod(scratch, mode)
        os.replace(scratch, target)
    finally:
        scratch.unlink(missing_ok=True)


def publish_archives(
    images: Mapping[str, ImageManifest], images_dir: Path, out: Path
) -> list[Path]:
    """Put each image's archive under the bundle's `http/node-images/`, its sha256 checked.

    An archive already there with the record's size and digest is left as it is.
    """
    placed: list[Path] = []
    for profile, manifest in sorted(images.items()):
        archive = manifest.archive
        if archive is None:
            continue
        source = images_dir / archive.file
        target = out / "http" / ARCHIVE_FOLDER / archive.file
        if (
            target.is_file()
            and target.stat().st_size == archive.bytes
            and sha256_of(target) == archive.sha256
        ):
            placed.append(target)
            continue
        if not source.is_file():
            raise StackError(
                f"{source} is missing: the image record of profile {profile} names it; build "
                f"the image again with `myriad image build --profile {profile}`"
            )
        found = sha256_of(source)
        if found != archive.sha256:
            raise StackError(
                f"{source} has sha256 {found}, but its image record says {archive.sha256}: "
                f"the archive changed after the build; build it again with "
                f"`myriad image build --profile {profile}`"
            )
        _place(source, target, 0o644)
        placed.append(target)
    return placed


def publish_seeds(seeds_dir: Path, nodes: Sequence[str], out: Path) -> list[str]:
    """Put each node's seed and its `.sha256` under the bundle's `http/seeds/` (0600).

    Returns the nodes without a seed in `seeds_dir`: their image installs fail at the seed
    step until one is published.
    """
    missing: list[str] = []
    for name in nodes:
        source = seeds_dir / f"{name}.tar.gz"
        if not source.is_file():
            missing.append(name)
            continue
        target = out / "http" / SEED_FOLDER / source.name
        _place(source, target, 0o600)
        sidecar = target.with_name(f"{source.name}.sha256")
        _write_private(sidecar, f"{sha256_of(target)}  {source.name}\n")
    return missing


def _write_private(path: Path, text: str) -> None:
    atomic_write_text(path, text, mode=0o600)
