"""The node image that stands in for cluster nodes.

Tests marked `docker` use the real Docker daemon, debootstrap and the host's Debian mirror: they
build the image (or reuse it), boot systemd in a container made from it and use apt inside.
The mirror discovery tests are plain unit tests fed sample apt source files.
"""

from __future__ import annotations

import contextlib
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from myriad.provision.local import SYSTEMD_RUN_OPTIONS
from myriad.provision.node_image import (
    MIRROR_ENV,
    RECIPE_LABEL,
    DebianMirrors,
    NodeImageError,
    NodeImageRecipe,
    discover_mirrors,
    ensure_node_image,
    node_image_recipe,
)

BOOT_TIMEOUT_S = 90.0
COMMAND_TIMEOUT_S = 180.0
# Reusing the image is one `docker info` and one `docker image inspect`; a rebuild takes minutes.
REUSE_LIMIT_S = 10.0


def _docker(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        ["docker", *args], capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, check=False
    )
    if check and result.returncode != 0:
        pytest.fail(f"docker {' '.join(args)} failed ({result.returncode}):\n{result.stderr}")
    return result


@dataclass(frozen=True)
class BuiltImage:
    recipe: NodeImageRecipe
    image_id: str


@pytest.fixture(scope="module")
def node_image(docker_available: None) -> BuiltImage:
    recipe = node_image_recipe()
    return BuiltImage(recipe, ensure_node_image(recipe))


@contextlib.contextmanager
def _node_container(image_id: str) -> Iterator[str]:
    """A started node container, removed on exit whatever happened inside."""
    name = f"myriad-node-test-{uuid.uuid4().hex[:10]}"
    try:
        # Inside the try: a run that fails to start still leaves a created container behind.
        _docker("run", "--detach", "--name", name, *SYSTEMD_RUN_OPTIONS, image_id)
        yield name
    finally:
        _docker("rm", "--force", "--volumes", name, check=False)


def _exec(name: str, *command: str) -> subprocess.CompletedProcess[str]:
    return _docker("exec", name, *command, check=False)


def _wait_until_booted(name: str) -> str:
    deadline = time.monotonic() + BOOT_TIMEOUT_S
    state = ""
    while time.monotonic() < deadline:
        # Before D-Bus is up this fails with "Failed to connect to bus"; that means "not yet".
        state = _exec(name, "systemctl", "is-system-running").stdout.strip()
        if state in ("running", "degraded"):
            return state
        time.sleep(1)
    failed = _exec(name, "systemctl", "--failed", "--no-pager").stdout
    jobs = _exec(name, "systemctl", "list-jobs", "--no-pager").stdout
    logs = _docker("logs", "--tail", "50", name, check=False)
    pytest.fail(
        f"systemd in {name} is still {state!r} after {BOOT_TIMEOUT_S:.0f}s\n"
        f"failed units:\n{failed}\npending jobs:\n{jobs}\nlogs:\n{logs.stdout}{logs.stderr}"
    )


@pytest.fixture(scope="module")
def booted_node(node_image: BuiltImage) -> Iterator[str]:
    with _node_container(node_image.image_id) as name:
        _wait_until_booted(name)
        yield name


# --- image -------------------------------------------------------------------------------------


@pytest.mark.docker
def test_second_ensure_reuses_the_image(node_image: BuiltImage) -> None:
    started = time.monotonic()
    again = ensure_node_image(node_image.recipe)
    elapsed = time.monotonic() - started

    assert again == node_image.image_id
    assert elapsed < REUSE_LIMIT_S, f"reuse took {elapsed:.1f}s; it must not rebuild"


@pytest.mark.docker
def test_image_is_labelled_and_configured_for_systemd(node_image: BuiltImage) -> None:
    template = (
        '{{index .Config.Labels "' + RECIPE_LABEL + '"}}|{{.Config.StopSignal}}|'
        "{{json .Config.Cmd}}|{{json .Config.Env}}"
    )
    fields = _docker("image", "inspect", "--format", template, node_image.image_id)
    label, stop_signal, cmd, env = fields.stdout.strip().split("|")

    assert label == node_image.recipe.digest()
    assert stop_signal == "SIGRTMIN+3"
    assert cmd == '["/lib/systemd/systemd"]'
    assert '"container=docker"' in env


# --- a booted node -----------------------------------------------------------------------------


@pytest.mark.docker
def test_systemd_is_pid_1_and_boots(booted_node: str) -> None:
    assert _exec(booted_node, "cat", "/proc/1/comm").stdout.strip() == "systemd"
    state = _exec(booted_node, "systemctl", "is-system-running").stdout.strip()
    assert state in ("running", "degraded")
    # A background apt run would hold the dpkg lock while roles install packages.
    assert _exec(booted_node, "systemctl", "is-enabled", "apt-daily.timer").stdout.strip() == (
        "masked"
    )


@pytest.mark.docker
def test_python3_with_apt_bindings_works(booted_node: str) -> None:
    result = _exec(booted_node, "python3", "-c", "import apt, sys; print(sys.version_info[0])")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "3"


@pytest.mark.docker
def test_apt_get_update_reaches_the_mirror(booted_node: str, node_image: BuiltImage) -> None:
    update = _exec(booted_node, "apt-get", "update")

    assert update.returncode == 0, update.stdout + update.stderr
    assert node_image.recipe.mirror in update.stdout
    assert "Err:" not in update.stdout, update.stdout
    # non-free is configured, so roles can install NVIDIA user-space tools from Debian.
    policy = _exec(booted_node, "apt-cache", "policy", "nvidia-smi").stdout
    assert "Candidate:" in policy
    assert "Candidate: (none)" not in policy


@pytest.mark.docker
def test_node_container_is_removed_even_when_the_test_fails(node_image: BuiltImage) -> None:
    with pytest.raises(RuntimeError), _node_container(node_image.image_id) as name:
        assert _docker("container", "inspect", name).returncode == 0
        raise RuntimeError("the test body failed")

    gone = _docker("container", "inspect", name, check=False)
    assert gone.returncode != 0
    assert "no such container" in gone.stderr.lower()


# --- mirror discovery (no Docker) --------------------------------------------------------------

ONE_LINE_SOURCES = """\
# deb cdrom:[Debian GNU/Linux 12.5.0 _Bookworm_ - Official amd64 DVD]/ bookworm main
deb-src http://src.example.org/debian bookworm main
deb [arch=amd64 signed-by=/etc/apt/debian.gpg] http://ftp.fr.debian.org/debian/ bookworm main
deb http://ftp.fr.debian.org/debian/ bookworm-updates main
deb http://security.debian.org/debian-security bookworm-security main  # security
"""

DEB822_SOURCES = """\
Types: deb
# http://snapshot.debian.org/archive/debian/20250520T000000Z
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
# http://snapshot.debian.org/archive/debian-security/20250520T000000Z
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
"""

DISABLED_DEB822 = """\
Types: deb
URIs: http://disabled.example.org/debian
Suites: bookworm
Components: main
Enabled: no
"""

THIRD_PARTY_DEB822 = """\
Types: deb
URIs: https://deb.nodesource.com/node_20.x
Suites: nodistro
Components: main
Signed-By:
 -----BEGIN PGP PUBLIC KEY BLOCK-----
 .
 mQINBFdDN1ABEACiAe3zGhKZsx2zH5e9YYRTbr9m
 -----END PGP PUBLIC KEY BLOCK-----
"""


def _apt_dir(tmp_path: Path, main_list: str | None, parts: dict[str, str]) -> Path:
    apt_dir = tmp_path / "apt"
    (apt_dir / "sources.list.d").mkdir(parents=True)
    if main_list is not None:
        (apt_dir / "sources.list").write_text(main_list)
    for name, text in parts.items():
        (apt_dir / "sources.list.d" / name).write_text(text)
    return apt_dir


def test_mirror_from_one_line_sources_list(tmp_path: Path) -> None:
    apt_dir = _apt_dir(tmp_path, ONE_LINE_SOURCES, {})

    assert discover_mirrors("bookworm", apt_dir) == DebianMirrors(
        archive="http://ftp.fr.debian.org/debian",
        security="http://security.debian.org/debian-security",
    )


def test_mirror_from_deb822_sources(tmp_path: Path) -> None:
    # Debian 12's default: an empty or absent sources.list and a debian.sources file.
    apt_dir = _apt_dir(
        tmp_path,
        "",
        {
            "00-disabled.sources": DISABLED_DEB822,
            "debian.sources": DEB822_SOURCES,
            "nodesource.sources": THIRD_PARTY_DEB822,
            # apt ignores other extensions, so a parked file must not be picked up.
            "aaa.sources.disabled-by-farm": DEB822_SOURCES.replace("deb.debian.org", "parked"),
        },
    )

    assert discover_mirrors("bookworm", apt_dir) == DebianMirrors(
        archive="http://deb.debian.org/debian",
        security="http://deb.debian.org/debian-security",
    )


def test_one_line_list_files_in_sources_list_d_count_too(tmp_path: Path) -> None:
    apt_dir = _apt_dir(tmp_path, None, {"debian.list": ONE_LINE_SOURCES})

    assert discover_mirrors("bookworm", apt_dir).archive == "http://ftp.fr.debian.org/debian"


def test_no_debian_source_says_what_to_do(tmp_path: Path) -> None:
    apt_dir = _apt_dir(tmp_path, None, {"nodesource.sources": THIRD_PARTY_DEB822})

    with pytest.raises(NodeImageError, match=MIRROR_ENV):
        discover_mirrors("bookworm", apt_dir)


def test_recipe_digest_follows_the_mirror(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(MIRROR_ENV, raising=False)
    recipe = node_image_recipe(apt_dir=_apt_dir(tmp_path, None, {"d.sources": DEB822_SOURCES}))
    monkeypatch.setenv(MIRROR_ENV, "http://mirror.example.org/debian/")
    overridden = node_image_recipe(apt_dir=tmp_path / "nonexistent")

    assert recipe.mirror == "http://deb.debian.org/debian"
    assert overridden.mirror == "http://mirror.example.org/debian"
    assert recipe.digest() == replace(recipe).digest()
    assert recipe.digest() != overridden.digest()
