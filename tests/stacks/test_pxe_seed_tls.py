"""Image mode's seeds over TLS: rendered for the installer, and served by the PXE server.

Exercised: stacks.pxe with `myriad:pxeTlsCaFile` (the late-commands write the CA and fetch the
seed with `curl --cacert` from the TLS listener), and myriad.provision.pxe_server's TLS
listener beside its plain one, with a certificate made here by openssl for 127.0.0.1: the
seed goes over TLS (verified against the CA) and the plain listener refuses it.
Not exercised: curl in a real installer.
"""

from __future__ import annotations

import base64
import json
import re
import shutil
import ssl
import subprocess
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_pxe_images import image_spec, manifest

from myriad.provision.pxe_server import make_server
from myriad.provision.pxe_state import HOSTS_FILE, PxeState, served_path
from stacks import pxe, pxe_images
from stacks.settings import StackFileConfig, pxe_settings

from stack_harness import ADMIN_KEY, stack_config

OPENSSL = shutil.which("openssl")


def _certificate(folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (its own CA), and its key."""
    assert OPENSSL is not None
    cert, key = folder / "pxe.crt", folder / "pxe.key"
    subprocess.run(
        [
            OPENSSL, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
            "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "2",
            "-subj", "/CN=myriad-pxe", "-addext", "subjectAltName=IP:127.0.0.1",
        ],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    return cert, key


def _files(tmp_path: Path, ca: Path) -> dict[str, str]:
    config = {
        **stack_config("starter-64"),
        "myriad:sshAuthorizedKeys": [ADMIN_KEY],
        "myriad:pxeTlsCaFile": str(ca),
    }
    spec = image_spec()
    return pxe.render_pxe(
        spec,
        pxe_settings(StackFileConfig(config), spec),
        source="x",
        images={"h100-node": manifest()},
    )


@pytest.mark.skipif(OPENSSL is None, reason="openssl is not installed")
def test_the_installer_fetches_its_seed_over_tls(tmp_path: Path) -> None:
    cert, _ = _certificate(tmp_path)
    files = _files(tmp_path, cert)
    commands: list[str] = yaml.safe_load(files["http/nodes/gpu03/user-data"])["autoinstall"][
        "late-commands"
    ]
    (write_ca,) = [c for c in commands if "pxe-ca.pem" in c and "base64 -d" in c]
    encoded = re.search(r"echo ([A-Za-z0-9+/=]+) \| base64 -d", write_ca)
    assert encoded and base64.b64decode(encoded.group(1)).decode() == cert.read_text()
    (fetch,) = [c for c in commands if "/seeds/" in c]
    assert (
        '--cacert /tmp/myriad/pxe-ca.pem -o /tmp/myriad/gpu03.tar.gz "https://10.10.0.2:8443'
        in (fetch)
    )
    assert "https://10.10.0.2:8443/seeds/gpu03.tar.gz.sha256" in fetch
    assert commands.index(write_ca) < commands.index(fetch)


def test_a_ca_file_that_is_not_a_certificate_is_refused(tmp_path: Path) -> None:
    bogus = tmp_path / "ca.pem"
    bogus.write_text("not a certificate\n")
    with pytest.raises(pxe.StackError, match=r"pxeTlsCaFile .*ca\.pem holds no PEM certificate"):
        _files(tmp_path, bogus)


@pytest.mark.skipif(OPENSSL is None, reason="openssl is not installed")
def test_the_pxe_server_gives_seeds_over_tls_only(tmp_path: Path) -> None:
    cert, key = _certificate(tmp_path)
    files = _files(tmp_path, cert)
    root = tmp_path / "pxe"
    pxe.write_bundle(files, root)
    hosts: dict[str, Any] = json.loads(files[HOSTS_FILE])
    hosts["gpu02"]["address"] = "127.0.0.1"
    (root / HOSTS_FILE).write_text(json.dumps(hosts))
    seeds = tmp_path / "seeds"
    seeds.mkdir()
    (seeds / "gpu02.tar.gz").write_bytes(b"gpu02 seed")
    pxe_images.publish_seeds(seeds, ["gpu02"], root)
    PxeState(root).flag("gpu02", hosts["gpu02"]["mac"], "i1", limit=8)
    script = (root / served_path(hosts["gpu02"]["mac"])).read_text()
    (token,) = re.findall(r" myriad\.seed_token=([A-Za-z0-9_-]{32}) ", script)
    plain = make_server(root, "127.0.0.1", 0, seeds_need_tls=True)
    secure = make_server(root, "127.0.0.1", 0, tls=(cert, key))
    for server in (plain, secure):
        threading.Thread(target=server.serve_forever, daemon=True).start()
    trusted = ssl.create_default_context(cafile=str(cert))
    path = f"/seeds/gpu02.tar.gz?token={token}"
    try:
        with pytest.raises(urllib.error.HTTPError, match=r"403.*over TLS only"):
            urllib.request.urlopen(f"http://127.0.0.1:{plain.server_address[1]}{path}", timeout=5)
        https = f"https://127.0.0.1:{secure.server_address[1]}"
        with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
            urllib.request.urlopen(https + path, timeout=5)  # the system CAs do not know it
        with urllib.request.urlopen(https + path, timeout=5, context=trusted) as answer:
            assert answer.read() == b"gpu02 seed"  # the refusals above spent nothing
        with urllib.request.urlopen(
            f"{https}/seeds/gpu02.tar.gz.sha256", timeout=5, context=trusted
        ) as answer:
            assert answer.read().decode().endswith("  gpu02.tar.gz\n")
        # Boot scripts stay on plain HTTP, for iPXE.
        base = f"http://127.0.0.1:{plain.server_address[1]}"
        with urllib.request.urlopen(f"{base}/boot.ipxe", timeout=5) as answer:
            assert answer.status == 200
    finally:
        for server in (plain, secure):
            server.shutdown()
            server.server_close()
