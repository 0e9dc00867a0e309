"""How long `pulumi up` holds a bare-metal fleet now that `create` does not wait for installs.

Pulumi's Python dynamic-provider host serves four requests at once. When `create` waited for
each install (up to an hour), 1,250 nodes took 1,250 / 4 hours: days. Now `create` flags the
node, sets the one-time network boot and powers it on (or queues it), then returns; this
measures that call against sushy-tools' BMC emulator (fake driver, several emulator
processes, as a fleet has one BMC per server) at Pulumi's concurrency, and extrapolates to
1,250 nodes. It also times one round of `myriad provision wait`'s SSH probes over 1,250
addresses (loopback, nothing listening: the cost of a round while installs run).

Target (issue #20): starting the installs of 1,250 nodes takes minutes, not days.

Run: .venv/bin/python benchmarks/provision_scale.py [--nodes 200] [--bmcs 8] [--threads 4]
(needs sushy-tools, as the stack tests do; a real BMC answers slower than the emulator on
loopback, so read the figure as the provider's own cost plus the emulator's).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from conditions import measured  # noqa: E402  (benchmarks/ is on sys.path)

from myriad.plan.nodes import iter_nodes  # noqa: E402 - after the program folder is on the path
from myriad.provision.pxe_state import PxeState  # noqa: E402
from myriad.provision.redfish import RedfishNodeProvider, probe_ssh  # noqa: E402
from myriad.spec import load_spec  # noqa: E402
from stacks import pxe as pxe_bundle  # noqa: E402
from stacks.settings import PxeSettings  # noqa: E402

USER, PASSWORD = "admin", "bench-Passw0rd"
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMyriadBenchKeyOnlyForBenchmarks00000000 bench@local"
# The fake driver applies a power change 1 to 11 s after the request; pinned to 2 s.
LAUNCHER = (
    "import random, sys\n"
    "random.randint = lambda low, high: low + 1\n"
    "from sushy_tools.emulator.main import main\n"
    "sys.exit(main())\n"
)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def emulator(workdir: Path, systems: dict[str, str]) -> Iterator[str]:
    import bcrypt

    workdir.mkdir(parents=True)
    digest = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=4)).decode()
    (workdir / "htpasswd").write_text(f"{USER}:{digest}\n")
    fake = [
        {"uuid": uid, "name": name, "power_state": "Off", "external_notifier": False, "nics": []}
        for name, uid in systems.items()
    ]
    config = workdir / "emulator.conf"
    config.write_text(
        f"SUSHY_EMULATOR_STATE_DIR = {str(workdir / 'state')!r}\n"
        f"SUSHY_EMULATOR_AUTH_FILE = {str(workdir / 'htpasswd')!r}\n"
        f"SUSHY_EMULATOR_FAKE_SYSTEMS = {fake!r}\n"
    )
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [
        sys.executable, "-c", LAUNCHER, "--config", str(config),
        "--interface", "127.0.0.1", "--port", str(port), "--fake",
    ]  # fmt: skip
    with (workdir / "log").open("wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    urllib.request.urlopen(f"{url}/redfish/v1/", timeout=2).close()
                    break
                except urllib.error.HTTPError:
                    break
                except OSError:
                    if process.poll() is not None or time.monotonic() > deadline:
                        message = f"sushy-emulator did not start; see {workdir / 'log'}"
                        raise SystemExit(message) from None
                    time.sleep(0.2)
            yield url
        finally:
            process.terminate()
            process.wait(timeout=10)


def spec_file(path: Path, nodes: int, bmc_urls: list[str]) -> Any:
    data = yaml.safe_load((ROOT / "inventories/starter-64/cluster.yaml").read_text())
    for pool in data["pools"]:
        if pool["name"] == "gpu":
            pool["count"] = nodes - 3
    data["network"]["addressing"]["management"] = "127.0.0.0/16"
    data["provider"]["baremetal"] = {"parallel_installs": 64}
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    names = [node.name for node in iter_nodes(load_spec(path).spec)]
    data["provider"]["hosts"] = [
        {
            "name": name,
            "mac": "02:00:" + ":".join(f"{b:02x}" for b in index.to_bytes(4, "big")),
            "bmc_address": bmc_urls[(index - 1) * len(bmc_urls) // len(names)],
            "redfish_system": name,
            "address": f"127.0.{index // 250 + 1}.{index % 250 + 1}",
        }
        for index, name in enumerate(names, start=1)
    ]
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return load_spec(path).spec


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=200)
    parser.add_argument("--bmcs", type=int, default=8, help="emulator processes")
    parser.add_argument("--threads", type=int, default=4, help="Pulumi's provider host: 4")
    args = parser.parse_args()
    with (
        tempfile.TemporaryDirectory(prefix="myriad-provision-") as tmp,
        contextlib.ExitStack() as stack,
    ):
        work = Path(tmp)
        probe = spec_file(work / "probe.yaml", args.nodes, [f"bmc{i}" for i in range(args.bmcs)])
        groups: dict[str, dict[str, str]] = {}
        for host in probe.provider.hosts:
            uid = str(uuid.uuid5(uuid.NAMESPACE_DNS, host.name))
            groups.setdefault(host.bmc_address, {})[host.name] = uid
        urls = [
            stack.enter_context(emulator(work / f"bmc{i}", systems))
            for i, systems in enumerate(groups.values())
        ]
        spec = spec_file(work / "cluster.yaml", args.nodes, urls)
        settings = PxeSettings(
            server="127.0.0.1", gateway="127.0.0.1", dns=("127.0.0.1",), ssh_authorized_keys=(KEY,)
        )
        pxe_bundle.write_bundle(pxe_bundle.render_pxe(spec, settings, source="bench"), work / "pxe")
        provider = RedfishNodeProvider()

        def create(host: Any) -> float:
            started = time.perf_counter()
            provider.create(
                {
                    "name": host.name, "mac": host.mac, "bmc_address": host.bmc_address,
                    "redfish_system": host.redfish_system, "address": host.address,
                    "os": spec.software.os, "reimage_token": None, "pxe_root": str(work / "pxe"),
                    "parallel_installs": 64, "boot_mode": "UEFI", "power_timeout_s": 60.0,
                    "request_timeout_s": 30.0, "verify_tls": True, "ca_file": None,
                    "poll_s": 1.0, "bmc_username": USER, "bmc_password": PASSWORD,
                }
            )  # fmt: skip
            return time.perf_counter() - started

        started = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(max_workers=args.threads) as pool:
            latencies = sorted(pool.map(create, spec.provider.hosts))
        total = time.perf_counter() - started
        states = [r.state for r in PxeState(work / "pxe").records()]
        fleet = 1250 / args.nodes * total
        print(f"{args.nodes} creates, {args.threads} at a time, {args.bmcs} emulated BMCs")
        print(
            f"  total {total:.1f} s; per create p50 {statistics.median(latencies) * 1000:.0f} ms, "
            f"p95 {latencies[int(len(latencies) * 0.95) - 1] * 1000:.0f} ms"
        )
        print(f"  {states.count('installing')} installing, {states.count('queued')} queued")
        print(f"  1,250 nodes at this rate: {fleet / 60:.1f} min (was 1,250 / 4 installs: days)")

        addresses = [f"127.0.{i // 250 + 1}.{i % 250 + 1}" for i in range(1250)]
        port = free_port()
        started = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(max_workers=64) as pool:
            seen = list(
                pool.map(lambda a: probe_ssh(a, port, banner_marker="m", timeout_s=5.0), addresses)
            )
        probe_round = time.perf_counter() - started
        assert not any(ok for ok, _ in seen)
        print(f"one wait round of SSH probes over 1,250 addresses: {probe_round:.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(measured(main))
