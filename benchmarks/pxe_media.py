"""Install media to many nodes at once: the Python PXE server against the bundle's nginx.conf.

Every bare-metal install fetches the Ubuntu live ISO (2-3 GB). Served by
`myriad.provision.pxe_server` (Python's http.server, each file copied through user space),
the PXE host is the bottleneck; the bundle's `nginx.conf` serves the same folder with
`sendfile`. This serves one file of `--mib` MiB to `--clients` concurrent HTTP clients on
loopback, from each server in turn, and reports the aggregate throughput (every byte read
and counted by curl; the file is in the page cache after a first pass, as an ISO is during
a fleet install). Loopback has no NIC limit, so the figures are each server's own ceiling on
this machine's CPUs, the part a 1-25 GbE link does not decide.

Clients are curl processes; the figure that matters is the server's CPU seconds per GiB
served (its processes' user + system time, /proc), since on a busy shared machine wall time
is noisy. Target: nginx spends at most half the Python server's CPU per GiB. Exits 1 when it
does not, and 2 without an nginx binary ($MYRIAD_NGINX or PATH; see
tests/stacks/media_server.py).

Run: MYRIAD_NGINX=... .venv/bin/python benchmarks/pxe_media.py [--mib 256] [--clients 8]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "stacks"))

from conditions import measured  # noqa: E402  (benchmarks/ is on sys.path)
from media_server import NGINX, free_port, running_nginx  # noqa: E402

TEMPLATE = ROOT / "templates" / "pxe" / "nginx.conf.j2"
ISO = "images/ubuntu-24.04/live-server.iso"
CPU_RATIO_MIN = 2.0
_CHUNK = 1 << 20


def _bundle(folder: Path, mib: int, port: int) -> Path:
    import jinja2

    bundle = folder / "bundle"
    (bundle / "http" / ISO).parent.mkdir(parents=True)
    block = bytes(range(256)) * 4096  # 1 MiB
    with (bundle / "http" / ISO).open("wb") as stream:
        for _ in range(mib):
            stream.write(block)
    (bundle / "hosts.json").write_text("{}\n")
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True, autoescape=False)
    conf = env.from_string(TEMPLATE.read_text()).render(
        cluster="bench", source="benchmarks/pxe_media.py", media_port=port, folders=["images"]
    )
    (bundle / "nginx.conf").write_text(conf)
    return bundle


def _wait_for(port: int) -> None:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
            return
        time.sleep(0.05)
    raise SystemExit(f"nothing listens on port {port}")


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of `pid` and its live children (nginx's workers)."""
    ticks = os.sysconf("SC_CLK_TCK")
    pids = [pid]
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                if int(fields[1]) == pid:
                    pids.append(int(entry.name))
    total = 0.0
    for each in pids:
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{each}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / ticks
    return total


def _fetch_all(port: int, clients: int, size: int, server_pid: int) -> tuple[float, float]:
    """Wall seconds and the server's CPU seconds for `clients` concurrent downloads of the
    ISO by curl processes (no client GIL in the way), each checked for its full size."""
    url = f"http://127.0.0.1:{port}/{ISO}"
    command = ["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code} %{size_download}", url]
    cpu_before = _cpu_s(server_pid)
    started = time.perf_counter()
    downloads = [
        subprocess.Popen(command, stdout=subprocess.PIPE, text=True) for _ in range(clients)
    ]
    answers = [d.communicate(timeout=300)[0].split() for d in downloads]
    took = time.perf_counter() - started
    cpu = _cpu_s(server_pid) - cpu_before
    bad = [a for a in answers if a != ["200", str(size)]]
    if bad:
        raise SystemExit(f"transfer failed: {bad[0]}")
    return took, cpu


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--mib", type=int, default=256)
    parser.add_argument("--clients", type=int, default=8)
    args = parser.parse_args(argv)
    if NGINX is None:
        print("no nginx binary: set MYRIAD_NGINX (tests/stacks/media_server.py)", file=sys.stderr)
        return 2
    size = args.mib << 20
    wall: dict[str, float] = {}
    cpu: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="myriad-media-") as scratch:
        port = free_port()
        bundle = _bundle(Path(scratch), args.mib, port)
        python_port = free_port()
        python = subprocess.Popen(
            [sys.executable, "-m", "myriad.provision.pxe_server", "--root", str(bundle),
             "--bind", "127.0.0.1", "--port", str(python_port)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            _wait_for(python_port)
            _fetch_all(python_port, 1, size, python.pid)  # warm the page cache
            wall["python"], cpu["python"] = _fetch_all(python_port, args.clients, size, python.pid)
        finally:
            python.terminate()
            python.wait(timeout=10)
        with running_nginx(bundle, port) as nginx:
            wall["nginx"], cpu["nginx"] = _fetch_all(port, args.clients, size, nginx.pid)
    gib = args.mib * args.clients / 1024
    cpu_per_gib = {name: round(seconds / gib, 3) for name, seconds in cpu.items()}
    saving = cpu_per_gib["python"] / max(cpu_per_gib["nginx"], 1e-3)
    report = {
        "file_mib": args.mib,
        "clients": args.clients,
        "wall_s": {k: round(v, 2) for k, v in wall.items()},
        "mib_per_s": {k: round(args.mib * args.clients / v, 1) for k, v in wall.items()},
        "server_cpu_s_per_gib": cpu_per_gib,
        "cpu_ratio": round(saving, 1),
        "target_cpu_ratio": CPU_RATIO_MIN,
    }
    print(json.dumps(report, indent=1))
    return 0 if saving >= CPU_RATIO_MIN else 1


if __name__ == "__main__":
    raise SystemExit(measured(main))
