"""Build the Debian 12 systemd image that stands in for a cluster node, once, and reuse it.

No container image hub is reachable from where Myriad runs its tests, so the image is made with
debootstrap from the Debian mirror the host's apt already uses and imported into Docker. It is
labelled with a hash of its recipe so that `ensure_node_image()` rebuilds only when the recipe
changes.

    python -m myriad.provision.node_image [--force]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import fcntl
import hashlib
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from myriad.errors import NodeImageError

logger = logging.getLogger(__name__)
logger.addHandler(logging.NullHandler())

IMAGE_TAG = "myriad-node:bookworm"
SUITE = "bookworm"
RECIPE_LABEL = "org.myriad.node-image.recipe"
MIRROR_LABEL = "org.myriad.node-image.mirror"
# Escape hatch for hosts whose apt does not point at a Debian mirror (e.g. an Ubuntu runner).
MIRROR_ENV = "MYRIAD_DEBIAN_MIRROR"
# Bump whenever the build steps below change what ends up in the image, so that existing
# images with an older recipe hash get rebuilt.
SCRIPT_VERSION = 2

NODE_PACKAGES: tuple[str, ...] = (
    "systemd",
    "systemd-sysv",
    "dbus",
    "python3",
    "python3-apt",
    "sudo",
    "iproute2",
    "procps",
    "ca-certificates",
    "gnupg",
    "curl",
    "less",
    "kmod",
)
# Roles install firmware and NVIDIA user-space tools, which live outside main.
IMAGE_COMPONENTS: tuple[str, ...] = ("main", "contrib", "non-free", "non-free-firmware")
# systemd 252 already skips most hardware units in a container (their conditions fail), so
# the image boots to "running" without masks. These are masked for what roles do later:
MASKED_UNITS: tuple[str, ...] = (
    # Background apt runs grab the dpkg lock and make role apt tasks fail at random.
    "apt-daily.timer",
    "apt-daily-upgrade.timer",
    # Roles pull udev in (rdma-core depends on it); a container has no devices for it to manage.
    "systemd-udevd.service",
    "systemd-udevd-control.socket",
    "systemd-udevd-kernel.socket",
    "systemd-udev-trigger.service",
    "systemd-udev-settle.service",
    # Nobody logs in on a console; under `docker run -t` a getty would take the terminal.
    "getty.target",
    "console-getty.service",
    # The empty machine-id makes a container's first start a systemd first boot; the
    # first-boot wizard must never wait for a console answer there.
    "systemd-firstboot.service",
)

_SBIN_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_ARCHIVE_KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"

DOCKER_QUERY_TIMEOUT_S = 60.0
DEBOOTSTRAP_TIMEOUT_S = 1800.0
IMPORT_TIMEOUT_S = 900.0
CLEANUP_TIMEOUT_S = 60.0
LOCK_TIMEOUT_S = DEBOOTSTRAP_TIMEOUT_S + 2 * IMPORT_TIMEOUT_S


@dataclass(frozen=True)
class AptSource:
    """One apt source entry, in either the one-line or the deb822 format."""

    types: tuple[str, ...]
    uris: tuple[str, ...]
    suites: tuple[str, ...]
    components: tuple[str, ...]


@dataclass(frozen=True)
class DebianMirrors:
    """Where the Debian archive and its security updates come from."""

    archive: str
    security: str | None


@dataclass(frozen=True)
class NodeImageRecipe:
    """Everything that decides the content of the node image; its digest labels the image."""

    tag: str
    suite: str
    mirror: str
    security_mirror: str | None
    packages: tuple[str, ...]
    components: tuple[str, ...]
    masked_units: tuple[str, ...]
    script_version: int

    def digest(self) -> str:
        payload = json.dumps(dataclasses.asdict(self), sort_keys=True)
        return hashlib.sha256(payload.encode()).hexdigest()


# --- mirror discovery -------------------------------------------------------------------------


def parse_one_line_sources(text: str) -> list[AptSource]:
    """Parse the classic `deb [options] uri suite component...` format."""
    sources = []
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        # Options such as [arch=amd64 signed-by=...] say nothing about where packages live.
        line = re.sub(r"^(\S+)\s+\[[^\]]*\]", r"\1", line)
        fields = line.split()
        if len(fields) < 3:
            continue
        kind, uri, suite, *components = fields
        sources.append(AptSource((kind,), (uri,), (suite,), tuple(components)))
    return sources


def parse_deb822_sources(text: str) -> list[AptSource]:
    """Parse the deb822 `.sources` format (Debian 12's default), skipping disabled stanzas."""
    sources = []
    for stanza in _deb822_stanzas(text):
        if stanza.get("enabled", "yes").strip().lower() == "no":
            continue
        sources.append(
            AptSource(
                types=tuple(stanza.get("types", "").split()),
                uris=tuple(stanza.get("uris", "").split()),
                suites=tuple(stanza.get("suites", "").split()),
                components=tuple(stanza.get("components", "").split()),
            )
        )
    return sources


def _deb822_stanzas(text: str) -> Iterator[dict[str, str]]:
    fields: dict[str, str] = {}
    key: str | None = None
    for raw in text.splitlines():
        if raw.startswith("#"):
            continue
        if not raw.strip():
            if fields:
                yield fields
            fields, key = {}, None
            continue
        if raw[0] in " \t":
            # Folded field (e.g. an inline Signed-By key block) continues the previous one.
            if key is not None:
                fields[key] += " " + raw.strip()
            continue
        name, sep, value = raw.partition(":")
        if sep:
            key = name.strip().lower()
            fields[key] = value.strip()
    if fields:
        yield fields


def read_apt_sources(apt_dir: Path = Path("/etc/apt")) -> list[AptSource]:
    """All enabled source entries, in the order apt reads them."""
    sources = []
    main_list = apt_dir / "sources.list"
    if main_list.is_file():
        sources += parse_one_line_sources(main_list.read_text())
    parts = apt_dir / "sources.list.d"
    if parts.is_dir():
        # apt ignores files with other extensions (.disabled, .dpkg-old ...), and so do we.
        for path in sorted(parts.iterdir()):
            if path.suffix == ".list" and path.is_file():
                sources += parse_one_line_sources(path.read_text())
            elif path.suffix == ".sources" and path.is_file():
                sources += parse_deb822_sources(path.read_text())
    return sources


def discover_mirrors(suite: str = SUITE, apt_dir: Path = Path("/etc/apt")) -> DebianMirrors:
    """The Debian archive (and security) mirror that the host's apt uses for `suite`."""
    archive: str | None = None
    security: str | None = None
    for source in read_apt_sources(apt_dir):
        # debootstrap and the containers can only use network mirrors, not file:, cdrom: ...
        uris = [u for u in source.uris if u.startswith(("http://", "https://"))]
        if "deb" not in source.types or not uris:
            continue
        if archive is None and suite in source.suites and "main" in source.components:
            archive = uris[0].rstrip("/")
        if security is None and f"{suite}-security" in source.suites:
            security = uris[0].rstrip("/")
    if archive is None:
        raise NodeImageError(
            f"no apt source for Debian {suite} (main) in {apt_dir}/sources.list or "
            f"{apt_dir}/sources.list.d/; add one, or set {MIRROR_ENV} to a Debian mirror URL"
        )
    return DebianMirrors(archive=archive, security=security)


def node_image_recipe(*, apt_dir: Path = Path("/etc/apt")) -> NodeImageRecipe:
    """The recipe for this host: the standard node packages from the host's Debian mirror."""
    override = os.environ.get(MIRROR_ENV, "").strip()
    if override:
        mirrors = DebianMirrors(archive=override.rstrip("/"), security=None)
    else:
        mirrors = discover_mirrors(SUITE, apt_dir)
    return NodeImageRecipe(
        tag=IMAGE_TAG,
        suite=SUITE,
        mirror=mirrors.archive,
        security_mirror=mirrors.security,
        packages=NODE_PACKAGES,
        components=IMAGE_COMPONENTS,
        masked_units=MASKED_UNITS,
        script_version=SCRIPT_VERSION,
    )


# --- subprocess helpers -----------------------------------------------------------------------


def _run(
    args: Sequence[str],
    *,
    timeout: float,
    input_text: str | None = None,
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run a command to completion or kill it, with everything it started, at `timeout`."""
    try:
        # A session of its own lets a timeout or Ctrl-C take down grandchildren too
        # (debootstrap runs dpkg in the chroot), not just the direct child.
        proc = subprocess.Popen(
            list(args),
            stdin=subprocess.PIPE if input_text is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=dict(env) if env is not None else None,
            start_new_session=True,
        )
    except FileNotFoundError as exc:
        raise NodeImageError(f"{args[0]} is not installed; on Debian run .ci/docker.sh") from exc
    try:
        out, err = proc.communicate(input_text, timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        raise NodeImageError(
            f"`{' '.join(args[:3])} ...` did not finish in {timeout:.0f}s"
        ) from None
    except BaseException:
        _kill_group(proc)
        raise
    return subprocess.CompletedProcess(list(args), proc.returncode, out, err)


def _kill_group(proc: subprocess.Popen[str]) -> None:
    # The session's process group, in one call, and not a walk of the tree by parentage
    # (psutil's children(recursive=True)): a grandchild whose parent has exited is reparented
    # to init, out of any such walk, but stays in the group; and this module needs only the
    # standard library, so that the image build runs from a bare checkout.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()


def _tail(text: str, lines: int = 20) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def _require_docker() -> None:
    result = _run(
        ["docker", "info", "--format", "{{.ServerVersion}}"], timeout=DOCKER_QUERY_TIMEOUT_S
    )
    if result.returncode != 0:
        raise NodeImageError(
            "the Docker daemon does not answer "
            f"({_tail(result.stderr, 3)}); start it (as root on Debian: .ci/docker.sh) "
            "or point DOCKER_HOST at one"
        )


# --- image lookup -----------------------------------------------------------------------------


def _inspect_image(ref: str) -> tuple[str, dict[str, str]] | None:
    """(id, labels) of a local image, or None if there is no such image."""
    result = _run(["docker", "image", "inspect", ref], timeout=DOCKER_QUERY_TIMEOUT_S)
    if result.returncode != 0:
        if "no such image" in result.stderr.lower():
            return None
        raise NodeImageError(f"docker image inspect {ref} failed: {_tail(result.stderr, 3)}")
    info = json.loads(result.stdout)[0]
    return info["Id"], info.get("Config", {}).get("Labels") or {}


def _matching_image(recipe: NodeImageRecipe) -> str | None:
    found = _inspect_image(recipe.tag)
    if found is None or found[1].get(RECIPE_LABEL) != recipe.digest():
        return None
    return found[0]


def ensure_node_image(recipe: NodeImageRecipe, *, force: bool = False) -> str:
    """Return the id of the node image for `recipe`, building it only if it is missing, was
    built from a different recipe, or `force` is set."""
    _require_docker()
    if not force and (image_id := _matching_image(recipe)):
        logger.info("reusing %s (%s)", recipe.tag, image_id)
        return image_id
    with _build_lock():
        # Another process may have finished the same build while this one waited for the lock.
        if not force and (image_id := _matching_image(recipe)):
            logger.info("reusing %s (%s), built meanwhile", recipe.tag, image_id)
            return image_id
        previous = _inspect_image(recipe.tag)
        if previous is None:
            logger.info("%s does not exist yet; building it", recipe.tag)
        else:
            reason = "as forced" if force else "its recipe changed"
            logger.info("rebuilding %s (%s): %s", recipe.tag, previous[0], reason)
        image_id = _build_image(recipe)
        if previous is not None and previous[0] != image_id:
            _remove_image_quietly(previous[0])
        return image_id


@contextlib.contextmanager
def _build_lock() -> Iterator[None]:
    # flock is released when its holder dies, so a crashed build never leaves a stale lock.
    lock_path = Path(tempfile.gettempdir()) / "myriad-node-image.lock"
    with lock_path.open("a") as handle:
        deadline = time.monotonic() + LOCK_TIMEOUT_S
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise NodeImageError(
                        f"another node image build has held {lock_path} for over "
                        f"{LOCK_TIMEOUT_S:.0f}s; find it with `fuser {lock_path}` and stop it"
                    ) from None
                time.sleep(1)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _remove_image_quietly(image_id: str) -> None:
    # The old image may still back running containers; then it stays until they are gone.
    result = _run(["docker", "image", "rm", image_id], timeout=DOCKER_QUERY_TIMEOUT_S)
    if result.returncode != 0:
        logger.info("kept previous image %s: %s", image_id, _tail(result.stderr, 1))


# --- building ---------------------------------------------------------------------------------


def _build_image(recipe: NodeImageRecipe) -> str:
    debootstrap = _require_build_tools()
    started = time.monotonic()
    with _build_dir() as work:
        rootfs = work / "rootfs"
        logger.info("debootstrap %s from %s into %s", recipe.suite, recipe.mirror, rootfs)
        _debootstrap(debootstrap, recipe, rootfs)
        _configure_rootfs(rootfs, recipe)
        logger.info("importing the root filesystem into Docker")
        imported = _import_rootfs(rootfs)
    image_id = _finish_image(imported, recipe)
    logger.info("built %s (%s) in %.0fs", recipe.tag, image_id, time.monotonic() - started)
    return image_id


def _require_build_tools() -> str:
    if os.geteuid() != 0:
        raise NodeImageError(
            "building the node image needs root (debootstrap chroots and creates device "
            "files); run `sudo .venv/bin/python -m myriad.provision.node_image` once, "
            "later runs reuse the image"
        )
    debootstrap = shutil.which("debootstrap", path=_SBIN_PATH)
    if debootstrap is None:
        raise NodeImageError("debootstrap is not installed; run .ci/docker.sh as root")
    return debootstrap


@contextlib.contextmanager
def _build_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="myriad-node-image-")).resolve()
    try:
        yield path
    finally:
        _remove_build_dir(path)


def _mounts_below(path: Path) -> list[str]:
    prefix = f"{path}/"
    mounts = []
    with open("/proc/self/mountinfo") as mountinfo:
        for line in mountinfo:
            # Field 5 is the mount point, with spaces and the like escaped as octal.
            point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), line.split()[4])
            if point.startswith(prefix):
                mounts.append(point)
    return sorted(mounts, key=len, reverse=True)


def _remove_build_dir(path: Path) -> None:
    # A debootstrap that failed half-way (or ran inside a container, where it bind-mounts the
    # host's /dev) leaves mounts in the tree; rmtree would descend into them and delete real
    # files, so unmount first and refuse to delete while anything is still mounted.
    for point in _mounts_below(path):
        _run(["umount", "--lazy", point], timeout=CLEANUP_TIMEOUT_S)
    if leftover := _mounts_below(path):
        logger.error("left %s in place, still mounted below it: %s", path, ", ".join(leftover))
        return
    shutil.rmtree(path, ignore_errors=True)


def _debootstrap(debootstrap: str, recipe: NodeImageRecipe, rootfs: Path) -> None:
    # Keeps proxy settings from the environment; sbin is needed for the chroot steps.
    env = {**os.environ, "PATH": _SBIN_PATH, "LC_ALL": "C", "DEBIAN_FRONTEND": "noninteractive"}
    args = [
        debootstrap,
        "--variant=minbase",
        f"--include={','.join(recipe.packages)}",
        "--components=main",
        recipe.suite,
        str(rootfs),
        recipe.mirror,
    ]
    result = _run(args, timeout=DEBOOTSTRAP_TIMEOUT_S, env=env)
    if result.returncode != 0:
        # The output names the failing step; the log (kept only on failure) has dpkg's reason.
        log = rootfs / "debootstrap" / "debootstrap.log"
        details = _tail(log.read_text(errors="replace")) if log.is_file() else "(none)"
        raise NodeImageError(
            f"debootstrap of {recipe.suite} from {recipe.mirror} failed "
            f"(exit {result.returncode}); check that the mirror is reachable and has "
            f"{recipe.suite}, or set {MIRROR_ENV}\n--- output:\n"
            f"{_tail(result.stdout + result.stderr)}\n--- debootstrap.log:\n{details}"
        )


def _configure_rootfs(rootfs: Path, recipe: NodeImageRecipe) -> None:
    _write_apt_sources(rootfs, recipe)
    _mask_units(rootfs, recipe.masked_units)
    _reset_identity(rootfs)
    _trim(rootfs)


def _write_apt_sources(rootfs: Path, recipe: NodeImageRecipe) -> None:
    components = " ".join(recipe.components)
    stanzas = [
        (recipe.mirror, f"{recipe.suite} {recipe.suite}-updates"),
    ]
    if recipe.security_mirror:
        stanzas.append((recipe.security_mirror, f"{recipe.suite}-security"))
    text = "\n".join(
        f"Types: deb\nURIs: {uri}\nSuites: {suites}\nComponents: {components}\n"
        f"Signed-By: {_ARCHIVE_KEYRING}\n"
        for uri, suites in stanzas
    )
    (rootfs / "etc/apt/sources.list").unlink(missing_ok=True)
    (rootfs / "etc/apt/sources.list.d/debian.sources").write_text(text)


def _mask_units(rootfs: Path, units: Sequence[str]) -> None:
    # What `systemctl mask` does, done directly so the host needs no systemctl.
    unit_dir = rootfs / "etc/systemd/system"
    unit_dir.mkdir(parents=True, exist_ok=True)
    for unit in units:
        link = unit_dir / unit
        link.unlink(missing_ok=True)
        link.symlink_to("/dev/null")


def _reset_identity(rootfs: Path) -> None:
    # An empty machine-id makes systemd generate a fresh one in every container, so nodes do
    # not share one identity (journald, D-Bus and Ansible facts key on it).
    (rootfs / "etc/machine-id").write_text("")
    (rootfs / "var/lib/dbus/machine-id").unlink(missing_ok=True)
    # debootstrap copies these from the build host; Docker provides its own per container.
    (rootfs / "etc/hostname").write_text("localhost\n")
    (rootfs / "etc/resolv.conf").unlink(missing_ok=True)


def _trim(rootfs: Path) -> None:
    # Package caches and indexes are stale as soon as the image is built; nodes run
    # `apt-get update` before installing anything, as on a real machine.
    for pattern in (
        "var/cache/apt/archives/*.deb",
        "var/cache/apt/*.bin",
        "var/lib/apt/lists/*_*",
        "var/log/*.log",
        "var/log/apt/*",
    ):
        for path in rootfs.glob(pattern):
            if path.is_file():
                path.unlink()
    # apt's cache_valid_time (Ansible's apt module) judges freshness by the lists folder's
    # mtime when there is no update stamp: dated to the epoch, the empty lists count as stale
    # and the first install on a node refreshes them instead of finding no packages.
    (rootfs / "var/lib/apt/periodic/update-success-stamp").unlink(missing_ok=True)
    os.utime(rootfs / "var/lib/apt/lists", (0, 0))
    _drop_docs(rootfs)


# Documentation and translations are close to a third of the installed system and no node
# reads them; the dpkg filter keeps packages that roles install later from bringing them back.
_DPKG_DOC_FILTER = """\
path-exclude=/usr/share/doc/*
path-include=/usr/share/doc/*/copyright
path-exclude=/usr/share/man/*
path-exclude=/usr/share/info/*
path-exclude=/usr/share/locale/*
path-include=/usr/share/locale/locale.alias
"""


def _drop_docs(rootfs: Path) -> None:
    (rootfs / "etc/dpkg/dpkg.cfg.d/myriad-node-nodoc").write_text(_DPKG_DOC_FILTER)
    share = rootfs / "usr/share"
    _empty_dir(share / "man", keep=frozenset())
    _empty_dir(share / "info", keep=frozenset())
    _empty_dir(share / "locale", keep=frozenset({"locale.alias"}))
    for package_docs in (share / "doc").iterdir():
        # Some doc entries are symlinks to another package's directory; those stay as they are.
        if package_docs.is_dir() and not package_docs.is_symlink():
            _empty_dir(package_docs, keep=frozenset({"copyright"}))


def _empty_dir(directory: Path, *, keep: frozenset[str]) -> None:
    if not directory.is_dir():
        return
    for child in directory.iterdir():
        if child.name in keep:
            continue
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()


def _import_rootfs(rootfs: Path) -> str:
    """Stream the tree into `docker import` and return the new, untagged image id."""
    tar_args = ["tar", "--numeric-owner", "--one-file-system", "-C", str(rootfs), "-c", "."]
    import_args = [
        "docker",
        "import",
        "--change",
        'CMD ["/lib/systemd/systemd"]',
        "--change",
        "ENV container=docker",
        "-",
    ]
    with tempfile.TemporaryFile() as tar_errors:
        tar = subprocess.Popen(
            tar_args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=tar_errors
        )
        importer: subprocess.Popen[bytes] | None = None
        try:
            importer = subprocess.Popen(
                import_args, stdin=tar.stdout, stdout=subprocess.PIPE, stderr=subprocess.PIPE
            )
            # Only docker import may hold the read end, so tar gets SIGPIPE if import dies.
            if tar.stdout is not None:
                tar.stdout.close()
            out, err = importer.communicate(timeout=IMPORT_TIMEOUT_S)
            tar_rc = tar.wait(timeout=CLEANUP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise NodeImageError(
                f"docker import did not finish in {IMPORT_TIMEOUT_S:.0f}s; check the "
                "Docker daemon's free disk space and its log"
            ) from None
        finally:
            for proc in (importer, tar):
                if proc is not None and proc.poll() is None:
                    proc.kill()
                    proc.wait()
        tar_errors.seek(0)
        tar_message = tar_errors.read().decode(errors="replace")
    returncode = importer.returncode
    if tar_rc != 0 or returncode != 0:
        raise NodeImageError(
            "streaming the root filesystem into docker import failed: "
            f"{_tail(tar_message + err.decode(errors='replace'), 5)}"
        )
    return out.decode().strip()


def _finish_image(imported: str, recipe: NodeImageRecipe) -> str:
    """Add what `docker import --change` cannot set, tag the image and return its id.

    Docker 20.10 (Debian 12's docker.io) rejects STOPSIGNAL in --change, so a one-step build
    adds it. The recipe label goes on in the same step: an image that carries the label is
    therefore always a finished one.
    """
    dockerfile = (
        f"FROM {imported}\n"
        "STOPSIGNAL SIGRTMIN+3\n"
        f'LABEL {RECIPE_LABEL}="{recipe.digest()}" {MIRROR_LABEL}="{recipe.mirror}"\n'
    )
    # The classic builder works offline from a local image id; BuildKit may try a registry.
    env = {**os.environ, "DOCKER_BUILDKIT": "0"}
    result = _run(
        ["docker", "build", "--quiet", "--tag", recipe.tag, "-"],
        timeout=IMPORT_TIMEOUT_S,
        input_text=dockerfile,
        env=env,
    )
    if result.returncode != 0:
        _remove_image_quietly(imported)
        raise NodeImageError(f"docker build (final image step) failed: {_tail(result.stderr, 5)}")
    found = _inspect_image(recipe.tag)
    if found is None:
        raise NodeImageError(f"docker build finished but {recipe.tag} does not exist")
    return found[0]


# --- command line -----------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m myriad.provision.node_image",
        description=f"Build {IMAGE_TAG} (the systemd node image) if needed and print its id.",
    )
    parser.add_argument("--force", action="store_true", help="rebuild even if up to date")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stderr)
    try:
        recipe = node_image_recipe()
        image_id = ensure_node_image(recipe, force=args.force)
    except NodeImageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"{recipe.tag} {image_id}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
