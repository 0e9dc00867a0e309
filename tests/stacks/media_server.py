"""Run the bundle's nginx.conf (the install media server) for tests and the media benchmark.

nginx is found at $MYRIAD_NGINX or on PATH. Debian's `nginx` package starts a service on
port 80 when installed, so scripts/bootstrap does not install it; an nginx binary alone
(`apt-get download nginx && dpkg -x nginx_*.deb DIR`, then MYRIAD_NGINX=DIR/usr/sbin/nginx)
runs these without one.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

NGINX = os.environ.get("MYRIAD_NGINX") or shutil.which("nginx")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def nginx_command(bundle: Path, *extra: str) -> list[str]:
    assert NGINX is not None
    # -e: the start-up log before the file's error_log applies; `user root` only where run
    # as root (the test's folders are root's), else nginx ignores it with a warning.
    globals_ = "daemon off;" + (" user root;" if os.geteuid() == 0 else "")
    return [NGINX, "-p", f"{bundle}/", "-c", "nginx.conf", "-e", "stderr", "-g", globals_, *extra]


@contextlib.contextmanager
def running_nginx(bundle: Path, port: int) -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen(
        nginx_command(bundle), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 15
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
                break
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"nginx did not start: {process.stderr.read()!r}")  # type: ignore[union-attr]
            time.sleep(0.05)
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
