"""Bare metal in image mode: the PXE bundle installs a profile's baked archive and the seed.

Exercised: stacks.pxe_images (image records, the late-commands, publishing archives and
seeds), stacks.pxe rendering and its CLI with `--state`, the bare-metal stack's digest under
mocks, the PXE server's seed rule on a loopback port, and the archive, digest and seed
commands themselves run by `sh` against a scratch folder standing in for /target.
Not exercised: a real installer (curl against the server, `curtin in-target`, the boot).
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import re
import subprocess
import tarfile
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pulumi
import pytest
import yaml

from myriad.plan.node_images import ImageArchive, ImageManifest
from myriad.provision.pxe_server import make_server
from myriad.provision.pxe_state import (
    HOSTS_FILE,
    SEED_TOKEN_MARK,
    PxeState,
    installer_path,
    served_path,
)
from myriad.spec.models import Cluster
from stacks import pxe, pxe_images
from stacks.interface import StackError
from stacks.program import build
from stacks.settings import PxeSettings, StackFileConfig, pxe_settings, read_settings

from stack_harness import (
    ADMIN_KEY,
    BMC_PASSWORD,
    BMC_USER,
    REPO,
    run_program,
    spec_with,
    stack_config,
)

STARTER = REPO / "inventories/starter-64/cluster.yaml"
SOURCE = "inventories/starter-64/cluster.yaml"
ARCHIVE_BYTES = b"not a real root file system, only bytes with a digest"
ARCHIVE_SHA = hashlib.sha256(ARCHIVE_BYTES).hexdigest()
CONTENT = "c0ffee" + "0" * 58
ARCHIVE_FILE = f"h100-node-{CONTENT[:12]}.tar.gz"


def image_spec(mode: str | None = "image") -> Cluster:
    def edit(data: dict[str, Any]) -> None:
        if mode is not None:
            data["bringup"] = {"mode": mode}

    return spec_with(STARTER, hosts=True, edit=edit)


def manifest(profile: str = "h100-node", cluster: str = "starter-64") -> ImageManifest:
    return ImageManifest(
        cluster=cluster,
        profile=profile,
        content_hash=CONTENT,
        tag=f"myriad-{cluster}-{profile}:{CONTENT[:12]}",
        built_at="2026-12-01T22:00:00Z",
        base="ubuntu-22.04",
        archive=ImageArchive(ARCHIVE_FILE, ARCHIVE_SHA, len(ARCHIVE_BYTES)),
    )


@pytest.fixture(scope="module")
def settings() -> PxeSettings:
    config = {**stack_config("starter-64"), "myriad:sshAuthorizedKeys": [ADMIN_KEY]}
    return pxe_settings(StackFileConfig(config), image_spec())


def install_of(files: dict[str, str], node: str) -> dict[str, Any]:
    install: dict[str, Any] = yaml.safe_load(files[f"http/nodes/{node}/user-data"])["autoinstall"]
    return install


def test_push_mode_renders_the_same_bytes_with_or_without_an_image(
    settings: PxeSettings,
) -> None:
    push = image_spec(mode=None)  # 11 nodes: push, below the image-mode threshold
    plain = pxe.render_pxe(push, settings, source=SOURCE)
    assert pxe.render_pxe(push, settings, source=SOURCE, images={"h100-node": manifest()}) == plain
    forced = image_spec(mode="push")
    assert pxe.render_pxe(forced, settings, source=SOURCE, images={"h100-node": manifest()}) == (
        pxe.render_pxe(forced, settings, source=SOURCE)
    )
    assert install_of(plain, "gpu01")["late-commands"][0].startswith("curl -fsS")
    assert "node-images" not in "".join(plain.values())


def test_image_mode_installs_the_archive_after_checking_its_digest(
    settings: PxeSettings,
) -> None:
    files = pxe.render_pxe(image_spec(), settings, source=SOURCE, images={"h100-node": manifest()})
    commands = install_of(files, "gpu03")["late-commands"]
    archive_url = f"http://10.10.0.2:8080/node-images/{ARCHIVE_FILE}"  # the media server
    fetch = next(i for i, c in enumerate(commands) if archive_url in c)
    check = next(i for i, c in enumerate(commands) if f"echo '{ARCHIVE_SHA}  " in c)
    unpack = next(i for i, c in enumerate(commands) if c.startswith("tar -xzpf "))
    assert fetch < check < unpack  # nothing is unpacked before the digest is checked
    assert "sha256sum -c -" in commands[check]
    assert " -C /target " in commands[unpack] and "--exclude='etc/fstab'" in commands[unpack]
    assert (
        "curtin in-target --target=/target -- systemctl enable myriad-converge.service" in commands
    )
    seed_url = "http://10.10.0.2/seeds/gpu03.tar.gz"
    seed = next(i for i, c in enumerate(commands) if f' "{seed_url}?token=$token" ' in c)
    assert f"{seed_url}.sha256" in commands[seed]
    assert commands[seed + 1] == "cd /tmp/myriad && sha256sum -c gpu03.tar.gz.sha256"
    assert "/target/var/lib/myriad/seed" in commands[seed + 2]
    assert unpack < seed
    # The callback comes last: the PXE server hears "installed" only once all of it worked.
    assert "-X POST http://10.10.0.2/installed/gpu03 " in commands[-1]
    assert len(commands) == 10
    text = files["http/nodes/gpu03/user-data"]
    assert f"profile h100-node's baked image\n    # (content {CONTENT[:12]})" in text


def test_each_node_fetches_its_own_seed_and_other_profiles_install_stock(
    settings: PxeSettings,
) -> None:
    spec = image_spec()
    files = pxe.render_pxe(spec, settings, source=SOURCE, images={"h100-node": manifest()})
    for host in spec.provider.hosts:
        commands = install_of(files, host.name)["late-commands"]
        seeds = [c for c in commands if "/seeds/" in c]
        if host.name.startswith("gpu"):
            # The seed's one-time token comes from the kernel line of the installer script,
            # which the PXE server writes when it flags the node (myriad.provision.pxe_state).
            assert seeds == [
                "token=$(sed -n 's/.*myriad[.]seed_token=\\([^ ]*\\).*/\\1/p' /proc/cmdline) && "
                f"curl -fsS --retry 10 --retry-delay 3 --retry-all-errors -o "
                f"/tmp/myriad/{host.name}.tar.gz "
                f'"http://10.10.0.2/seeds/{host.name}.tar.gz?token=$token" && '
                f"curl -fsS --retry 10 --retry-delay 3 --retry-all-errors -o "
                f"/tmp/myriad/{host.name}.tar.gz.sha256 "
                f"http://10.10.0.2/seeds/{host.name}.tar.gz.sha256"
            ]
            script = files[installer_path(host.mac)]
            assert f" myriad.seed_token={SEED_TOKEN_MARK} " in script
        else:  # profile head has no image record: the stock install, the callback alone
            assert seeds == [] and len(commands) == 1
    # A new image is a new bundle digest: `pulumi preview` shows the stale PXE server.
    newer = ImageManifest.from_dict(
        {**manifest().to_dict(), "archive": {"file": "x.tar.gz", "sha256": "ab" * 32, "bytes": 1}}
    )
    again = pxe.render_pxe(spec, settings, source=SOURCE, images={"h100-node": newer})
    assert pxe.bundle_digest(again) != pxe.bundle_digest(files)


def write_record(images: Path, record: ImageManifest) -> Path:
    images.mkdir(parents=True, exist_ok=True)
    path = pxe_images.manifest_file(images, record.profile)
    path.write_text(json.dumps(record.to_dict()))
    return path


def test_image_records_are_read_only_in_image_mode(tmp_path: Path) -> None:
    images = tmp_path / "images"
    write_record(images, manifest())
    assert pxe_images.load_images(image_spec(mode=None), images) == {}
    assert pxe_images.load_images(image_spec(), images) == {"h100-node": manifest()}
    # A record without an archive (a local Docker image) installs nothing on bare metal.
    write_record(images, dataclasses.replace(manifest(), archive=None))
    assert pxe_images.load_images(image_spec(), images) == {}


def test_broken_or_foreign_image_records_are_refused(tmp_path: Path) -> None:
    images = tmp_path / "images"
    path = write_record(images, manifest(cluster="other"))
    with pytest.raises(StackError, match=r"records an image of cluster other profile h100-node"):
        pxe_images.load_images(image_spec(), images)
    path.write_text("{not json")
    with pytest.raises(StackError, match=rf"{path}: the image record is not JSON"):
        pxe_images.load_images(image_spec(), images)
    path.write_text(json.dumps({"cluster": "starter-64"}))
    with pytest.raises(StackError, match=r"lacks or mistypes 'profile'"):
        pxe_images.load_images(image_spec(), images)


def state_folder(root: Path, seeds: tuple[str, ...]) -> Path:
    state = root / "state"
    write_record(state / "images", manifest())
    (state / "images" / ARCHIVE_FILE).write_bytes(ARCHIVE_BYTES)
    (state / "seeds").mkdir(parents=True)
    for name in seeds:
        (state / "seeds" / f"{name}.tar.gz").write_bytes(f"seed of {name}".encode())
    return state


def cli(tmp_path: Path, spec: Cluster, *extra: str) -> tuple[int, Path]:
    spec_file = tmp_path / "cluster.yaml"
    spec_file.write_text(
        yaml.safe_dump(spec.model_dump(mode="json", by_alias=True, exclude_defaults=True))
    )
    stack_file = tmp_path / "Pulumi.lab.yaml"
    config = {
        **stack_config("starter-64"),
        "myriad:spec": str(spec_file),
        "myriad:sshAuthorizedKeys": [ADMIN_KEY],
    }
    stack_file.write_text(yaml.safe_dump({"config": config}))
    out = tmp_path / "bundle"
    return pxe.main(["--stack-file", str(stack_file), "--out", str(out), *extra]), out


def test_cli_serves_the_archive_and_the_seeds_it_finds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = state_folder(tmp_path, seeds=("gpu01", "gpu02"))
    code, out = cli(tmp_path, image_spec(), "--state", str(state))
    assert code == 0
    served = out / "http/node-images" / ARCHIVE_FILE
    assert served.read_bytes() == ARCHIVE_BYTES
    seed = out / "http/seeds/gpu01.tar.gz"
    assert seed.read_bytes() == b"seed of gpu01" and seed.stat().st_mode & 0o777 == 0o600
    sidecar = (out / "http/seeds/gpu01.tar.gz.sha256").read_text()
    assert sidecar == f"{hashlib.sha256(b'seed of gpu01').hexdigest()}  gpu01.tar.gz\n"
    # The sidecar is what the node's late-command checks: sha256sum reads it as written.
    subprocess.run(["sha256sum", "-c", "gpu01.tar.gz.sha256"], cwd=seed.parent, check=True)
    assert not (out / "http/seeds/ctl01.tar.gz").exists()  # profile head: no image install
    err = capsys.readouterr().err
    assert "profile head has no image archive" in err
    assert "no seed in" in err and "for gpu03, gpu04, gpu05, gpu06, gpu07, gpu08:" in err
    user_data = (out / "http/nodes/gpu01/user-data").read_text()
    assert f"http://10.10.0.2:8080/node-images/{ARCHIVE_FILE}" in user_data


def test_cli_refuses_an_archive_that_changed_after_the_build(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = state_folder(tmp_path, seeds=())
    (state / "images" / ARCHIVE_FILE).write_bytes(b"tampered")
    code, out = cli(tmp_path, image_spec(), "--state", str(state))
    assert code == 2
    err = capsys.readouterr().err
    assert f"but its image record says {ARCHIVE_SHA}" in err
    assert not (out / "http/node-images" / ARCHIVE_FILE).exists()


def test_the_bare_metal_stack_digest_follows_the_image(tmp_path: Path) -> None:
    spec = image_spec()
    state = state_folder(tmp_path, seeds=())

    def digest(**config: Any) -> str:
        def body() -> dict[str, Any]:
            settings = read_settings(pulumi.Config("myriad"), spec, STARTER)
            return dict(build(spec, settings).outputs)

        built = run_program(
            body,
            config={
                **stack_config("starter-64"),
                "myriad:sshAuthorizedKeys": [ADMIN_KEY],
                "myriad:bmc-admin": {"username": BMC_USER, "password": BMC_PASSWORD},
                **config,
            },
            secret_keys=("myriad:bmc-admin",),
        )
        return str(built.outputs["pxe_sha256"])

    config = {**stack_config("starter-64"), "myriad:sshAuthorizedKeys": [ADMIN_KEY]}
    settings = pxe_settings(StackFileConfig(config), spec)
    expected = pxe.bundle_digest(
        pxe.render_pxe(spec, settings, source=SOURCE, images={"h100-node": manifest()})
    )
    assert digest(**{"myriad:stateDir": str(state)}) == expected
    assert digest(**{"myriad:stateDir": str(tmp_path / "empty")}) != expected


def _tarball(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


@pytest.mark.parametrize("prefix", ["./", ""])
def test_the_digest_and_unpack_commands_do_what_they_say(tmp_path: Path, prefix: str) -> None:
    """The late-commands' check and unpack, run by sh with a scratch folder for /target.

    Archives name their members `./etc/...` (`tar -C root .`) or `etc/...`: both are kept.
    """
    members = {
        "etc/fstab": b"the build host's disks",
        "etc/hostname": b"buildhost",
        "etc/ssh/ssh_host_ed25519_key": b"the build host's key",
        "etc/ssh/sshd_config": b"# baked",
        "etc/netplan/50-cloud-init.yaml": b"network: {}",
        "dev/console": b"not a device",
        "usr/local/sbin/myriad-converge": b"#!/bin/sh",
        # Deep paths named like a kept one are the image's: they must arrive.
        "usr/lib/python3/dist-packages/pkg/sys/module.py": b"# deep sys",
        "usr/share/doc/pkg/etc/hosts": b"# an example",
    }
    data = _tarball({prefix + name: content for name, content in members.items()})
    work, target = tmp_path / "work", tmp_path / "target"
    work.mkdir()
    (target / "etc").mkdir(parents=True)
    (target / "etc/fstab").write_text("this install's disks")
    (work / "root.tar.gz").write_bytes(data)
    install = pxe_images.ImageInstall(
        "h100-node", CONTENT, "http://x/a.tar.gz", hashlib.sha256(data).hexdigest(), "http://x/s"
    )
    commands = pxe_images.late_commands("gpu01", install)

    def run(command: str) -> subprocess.CompletedProcess[str]:
        local = command.replace("/tmp/myriad", str(work)).replace("/target", str(target))
        return subprocess.run(["sh", "-c", local], capture_output=True, text=True, check=False)

    assert run(commands[1]).returncode == 0
    bad = pxe_images.late_commands("gpu01", dataclasses.replace(install, archive_sha256="0" * 64))
    assert run(bad[1]).returncode != 0  # a wrong digest stops the install before tar runs
    unpacked = run(commands[2])
    assert unpacked.returncode == 0, unpacked.stderr
    assert (target / "usr/local/sbin/myriad-converge").read_bytes() == b"#!/bin/sh"
    assert (target / "etc/ssh/sshd_config").exists()
    assert (target / "etc/fstab").read_text() == "this install's disks"
    for kept in ("etc/hostname", "etc/ssh/ssh_host_ed25519_key", "etc/netplan", "dev"):
        assert not (target / kept).exists(), kept
    for deep in ("usr/lib/python3/dist-packages/pkg/sys/module.py", "usr/share/doc/pkg/etc/hosts"):
        assert (target / deep).read_bytes() == members[deep], deep
    assert not (work / "root.tar.gz").exists()


def test_the_pxe_server_gives_a_seed_to_its_node_only(
    tmp_path: Path, settings: PxeSettings
) -> None:
    spec = image_spec()
    files = pxe.render_pxe(spec, settings, source=SOURCE, images={"h100-node": manifest()})
    root = tmp_path / "pxe"
    pxe.write_bundle(files, root)
    hosts = json.loads(files[HOSTS_FILE])
    hosts["gpu02"]["address"] = "127.0.0.1"  # loopback stands in for gpu02's address
    (root / HOSTS_FILE).write_text(json.dumps(hosts))
    seeds = tmp_path / "seeds"
    seeds.mkdir()
    for name in ("gpu01", "gpu02"):
        (seeds / f"{name}.tar.gz").write_bytes(name.encode())
    assert pxe_images.publish_seeds(seeds, ["gpu01", "gpu02", "gpu03"], root) == ["gpu03"]
    state = PxeState(root)
    server = make_server(root, "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"

    def refused(path: str, code: str) -> None:
        with pytest.raises(urllib.error.HTTPError, match=code):
            urllib.request.urlopen(f"{base}{path}", timeout=5)

    try:
        refused("/seeds/gpu02.tar.gz", "403")  # not flagged: no install asks for it
        state.flag("gpu02", hosts["gpu02"]["mac"], "i1", limit=8)
        served = (root / served_path(hosts["gpu02"]["mac"])).read_text()
        (token,) = re.findall(r" myriad\.seed_token=([A-Za-z0-9_-]{32}) ", served)
        assert SEED_TOKEN_MARK not in served
        refused("/seeds/gpu02.tar.gz", "403")  # from its address, but without the token
        refused("/seeds/gpu02.tar.gz?token=" + "x" * 32, "403")
        with urllib.request.urlopen(f"{base}/seeds/gpu02.tar.gz?token={token}", timeout=5) as a:
            assert a.read() == b"gpu02"
        refused(f"/seeds/gpu02.tar.gz?token={token}", "403")  # once only
        with urllib.request.urlopen(f"{base}/seeds/gpu02.tar.gz.sha256", timeout=5) as answer:
            assert answer.read().decode().endswith("  gpu02.tar.gz\n")
        for path, code in (
            ("/seeds/gpu01.tar.gz", "403"),  # another node's seed (its munge key)
            ("/seeds/gpu01.tar.gz.sha256", "403"),
            ("/seeds/", "404"),
            ("/seeds/gpu02.tar", "404"),
        ):
            refused(path, code)
        # A reimage flags it again, with a new token.
        state.advance("gpu02", "failed", "test")
        state.flag("gpu02", hosts["gpu02"]["mac"], "i2", limit=8)
        served = (root / served_path(hosts["gpu02"]["mac"])).read_text()
        (again,) = re.findall(r" myriad\.seed_token=([A-Za-z0-9_-]{32}) ", served)
        assert again != token
        # The flagged installer script, which holds the token, goes to its node only.
        gpu01 = state.flag("gpu01", hosts["gpu01"]["mac"], "i1", limit=8)
        refused("/" + served_path(gpu01.mac).removeprefix("http/"), "404")  # as if unflagged
        with urllib.request.urlopen(
            f"{base}/{served_path(hosts['gpu02']['mac']).removeprefix('http/')}", timeout=5
        ) as answer:
            assert answer.status == 200
        with urllib.request.urlopen(f"{base}/boot.ipxe", timeout=5) as answer:
            assert answer.status == 200  # everything else as before
    finally:
        server.shutdown()
        server.server_close()
