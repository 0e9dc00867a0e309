"""The install media server: the bundle's nginx.conf, checked and run by a real nginx.

Exercised: stacks.pxe's nginx.conf (`nginx -t`, then nginx serving the bundle on a loopback
port), and the install scripts pointing their kernel, initrd and ISO at it. What it must
not serve is checked too: boot scripts, installers, seeds and callbacks stay with the PXE
server, which answers them per node. benchmarks/pxe_media.py measures it against the
Python server. nginx facts: `sendfile` and `tcp_nopush` (ngx_http_core_module docs).
Not exercised: a rack cache (the same file on another host; `myriad:pxeMediaHost`).
"""

from __future__ import annotations

import os
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from media_server import NGINX, free_port, nginx_command, running_nginx

from stacks import pxe
from stacks.settings import StackFileConfig, pxe_settings

from stack_harness import ADMIN_KEY, REPO, spec_with, stack_config

STARTER = REPO / "inventories/starter-64/cluster.yaml"
needs_nginx = pytest.mark.skipif(
    NGINX is None,
    reason="no nginx binary (Debian's package starts a service, so bootstrap does not install "
    "it): set MYRIAD_NGINX, see tests/stacks/media_server.py",
)


def _bundle(tmp_path: Path, port: int, **config: object) -> tuple[Path, dict[str, str]]:
    spec = spec_with(STARTER, hosts=True)
    values = {
        **stack_config("starter-64"),
        "myriad:sshAuthorizedKeys": [ADMIN_KEY],
        "myriad:pxeMediaPort": port,
        **config,
    }
    files = pxe.render_pxe(spec, pxe_settings(StackFileConfig(values), spec), source="x")
    bundle = tmp_path / "bundle"
    pxe.write_bundle(files, bundle)
    return bundle, files


def test_installers_fetch_media_from_the_media_server(tmp_path: Path) -> None:
    _, files = _bundle(tmp_path, 8080, **{"myriad:pxeMediaHost": "10.10.0.9"})
    script = next(text for path, text in files.items() if path.startswith("installers/"))
    kernel = next(line for line in script.splitlines() if line.startswith("kernel "))
    assert kernel.startswith("kernel http://10.10.0.9:8080/images/")  # a rack cache
    assert " url=http://10.10.0.9:8080/images/" in kernel
    assert "ds=nocloud-net;s=http://10.10.0.2/nodes/" in kernel  # per node: the PXE server
    assert "    sendfile on;" in files["nginx.conf"].splitlines()


def test_the_media_port_cannot_be_the_pxe_servers() -> None:
    spec = spec_with(STARTER, hosts=True)
    values = {**stack_config("starter-64"), "myriad:sshAuthorizedKeys": [ADMIN_KEY]}
    with pytest.raises(pxe.StackError, match="pxeMediaPort must be a TCP port other than"):
        pxe_settings(StackFileConfig({**values, "myriad:pxeMediaPort": 80}), spec)


@needs_nginx
def test_real_nginx_serves_the_media_and_nothing_else(tmp_path: Path) -> None:
    port = free_port()
    bundle, files = _bundle(tmp_path, port)
    checked = subprocess.run(
        nginx_command(bundle, "-t"), capture_output=True, text=True, timeout=30, check=False
    )
    assert checked.returncode == 0, checked.stderr
    os_ = spec_with(STARTER).software.os
    media = bundle / f"http/images/{os_}"
    media.mkdir(parents=True)
    payload = os.urandom(3 << 20)
    (media / "live-server.iso").write_bytes(payload)
    base = f"http://127.0.0.1:{port}"
    with running_nginx(bundle, port):
        with urllib.request.urlopen(f"{base}/images/{os_}/live-server.iso", timeout=10) as r:
            assert r.read() == payload
        # Whatever the PXE server answers per node is not served here.
        mac = next(path for path in files if path.startswith("installers/"))
        for path in ("/boot.ipxe", "/nodes/gpu01/user-data", f"/{mac}", "/hosts.json"):
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(base + path, timeout=10)
            assert refused.value.code == 404, path
        with pytest.raises(urllib.error.HTTPError) as listing:
            urllib.request.urlopen(f"{base}/images/{os_}/", timeout=10)
        assert listing.value.code in (403, 404)  # no listings
