"""The rendered dnsmasq configuration at fleet scale, read and run by the real dnsmasq.

Exercised: stacks.pxe's dnsmasq.conf for roce-10k (1,257 hosts) and h100-100k (12,519),
checked with Debian's dnsmasq (`dnsmasq --test`), and the roce-10k one run in network
namespaces this test creates (a veth pair between a server and a client namespace; nothing
reaches the host's own interfaces) against `dhcp_clients.py`, one raw-socket DHCP client per
host MAC, each asking for and acknowledging its lease.

Where the facts live (dnsmasq(8), Debian's dnsmasq 2.90): `--dhcp-lease-max` defaults to 1000
leases and `--tftp-max` to 50 concurrent transfers; TFTP needs about one file descriptor per
transfer, (2*n)+10 for different files, and dnsmasq lowers tftp-max to what its open-files
limit allows ("restricting maximum simultaneous TFTP transfers to %d", src/dnsmasq.c), which
is why the configuration states the limit to run it with.
Not exercised: a DHCP relay, real PXE ROMs and iPXE, TFTP under load.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from myriad.spec.models import Cluster
from stacks import pxe
from stacks.settings import PxeSettings

from stack_harness import ADMIN_KEY, REPO, spec_with

DNSMASQ = shutil.which("dnsmasq") or (
    "/usr/sbin/dnsmasq" if Path("/usr/sbin/dnsmasq").exists() else None
)
IP = shutil.which("ip") or ("/usr/sbin/ip" if Path("/usr/sbin/ip").exists() else None)
CLIENTS = Path(__file__).with_name("dhcp_clients.py")
SERVER = "10.0.0.2"


def _settings(interface: str | None = "eno1", tftp_root: str = "/srv/tftp") -> PxeSettings:
    return PxeSettings(
        server=SERVER,
        gateway="10.0.0.1",
        dns=("10.0.0.1",),
        ssh_authorized_keys=(ADMIN_KEY,),
        interface=interface,
        tftp_root=tftp_root,
    )


@pytest.fixture(scope="module")
def roce() -> Cluster:
    return spec_with(REPO / "inventories/roce-10k/cluster.yaml", hosts=True)


def _option(conf: str, name: str) -> int:
    (value,) = re.findall(rf"^{name}=(\d+)$", conf, re.MULTILINE)
    return int(value)


def _check_limits(spec: Cluster) -> str:
    hosts = len(spec.provider.hosts)
    conf = pxe.render_pxe(spec, _settings(), source="cluster.yaml")["dnsmasq.conf"]
    limits = pxe.dnsmasq_limits(hosts)
    # Every host may hold a lease at once (they are `infinite`), and then some: see the margin.
    assert _option(conf, "dhcp-lease-max") == limits.lease_max >= hosts + 64
    # Every host may network-boot at once (a whole-site power restore): one transfer each.
    assert _option(conf, "tftp-max") == limits.tftp_max >= hosts
    # What dnsmasq needs to keep tftp-max: (2*n)+10 descriptors for different files (dnsmasq(8)).
    assert limits.open_files >= 2 * limits.tftp_max + 10
    assert f"LimitNOFILE={limits.open_files}" in conf
    return conf


def test_roce_10k_has_room_for_every_host(roce: Cluster) -> None:
    assert len(roce.provider.hosts) == 1257
    _check_limits(roce)


@pytest.mark.slow
def test_h100_100k_has_room_for_every_host() -> None:
    spec = spec_with(REPO / "inventories/h100-100k/cluster.yaml", hosts=True)
    assert len(spec.provider.hosts) == 12519
    conf = _check_limits(spec)
    if DNSMASQ is not None:
        _syntax_check(conf)


def test_the_margin_is_stated_and_small_fleets_keep_room() -> None:
    assert pxe.dnsmasq_limits(11).lease_max == 11 + 64
    assert pxe.dnsmasq_limits(1257).lease_max == 1257 + 1257 // 4
    assert pxe.dnsmasq_limits(1257).tftp_max == 1257 + 1257 // 4


def _syntax_check(conf: str, tmp: Path | None = None) -> None:
    assert DNSMASQ is not None
    folder = tmp or Path(os.environ.get("TMPDIR", "/tmp"))
    path = folder / f"dnsmasq-{os.getpid()}.conf"
    path.write_text(conf)
    try:
        result = subprocess.run(
            [DNSMASQ, "--test", f"--conf-file={path}"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        path.unlink(missing_ok=True)
    assert result.returncode == 0, result.stderr
    assert "syntax check OK" in result.stderr + result.stdout


@pytest.mark.skipif(DNSMASQ is None, reason="dnsmasq is not installed (scripts/bootstrap)")
def test_real_dnsmasq_accepts_the_rendered_configuration(roce: Cluster, tmp_path: Path) -> None:
    for prefix in (None, 24):
        spec = roce
        if prefix is not None:
            spec = spec_with(
                REPO / "inventories/roce-10k/cluster.yaml",
                hosts=True,
                edit=lambda d: d["provider"].update(baremetal={"dhcp_subnet_prefix": 24}),
            )
        conf = pxe.render_pxe(spec, _settings(), source="cluster.yaml")["dnsmasq.conf"]
        _syntax_check(conf, tmp_path)


def _ip(*args: str) -> subprocess.CompletedProcess[str]:
    assert IP is not None
    return subprocess.run([IP, *args], capture_output=True, text=True, timeout=30, check=False)


@contextlib.contextmanager
def _namespaces(tag: str) -> Iterator[tuple[str, str, str, str]]:
    """A server and a client namespace joined by a veth pair; both deleted afterwards."""
    server_ns, client_ns = f"myriad-{tag}-srv", f"myriad-{tag}-cli"
    server_if, client_if = f"mys{tag}"[:15], f"myc{tag}"[:15]
    made = _ip("netns", "add", server_ns)
    if made.returncode != 0:
        pytest.skip(f"cannot create a network namespace here (ip netns add: {made.stderr.strip()})")
    try:
        commands = [
            ("netns", "add", client_ns),
            ("link", "add", server_if, "type", "veth", "peer", "name", client_if),
            ("link", "set", server_if, "netns", server_ns),
            ("link", "set", client_if, "netns", client_ns),
            ("-n", server_ns, "addr", "add", f"{SERVER}/20", "dev", server_if),
            ("-n", server_ns, "link", "set", "lo", "up"),
            ("-n", server_ns, "link", "set", server_if, "up"),
            ("-n", client_ns, "link", "set", client_if, "up"),
        ]
        for command in commands:
            done = _ip(*command)
            assert done.returncode == 0, f"ip {' '.join(command)}: {done.stderr}"
        yield server_ns, client_ns, server_if, client_if
    finally:
        _ip("netns", "del", client_ns)
        _ip("netns", "del", server_ns)


def _raise_open_files(limit: int) -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))


@pytest.mark.slow
@pytest.mark.skipif(
    DNSMASQ is None or IP is None, reason="dnsmasq or iproute2 is not installed (scripts/bootstrap)"
)
def test_real_dnsmasq_leases_every_host_of_roce_10k(roce: Cluster, tmp_path: Path) -> None:
    tag = str(os.getpid() % 100000)
    tftp = tmp_path / "tftp"
    tftp.mkdir()
    with _namespaces(tag) as (server_ns, client_ns, server_if, client_if):
        conf_text = pxe.render_pxe(roce, _settings(server_if, str(tftp)), source="cluster.yaml")[
            "dnsmasq.conf"
        ]
        conf = tmp_path / "dnsmasq.conf"
        conf.write_text(conf_text)
        log, leases = tmp_path / "dnsmasq.log", tmp_path / "dnsmasq.leases"
        limits = pxe.dnsmasq_limits(len(roce.provider.hosts))
        assert IP is not None and DNSMASQ is not None
        server = subprocess.Popen(
            [
                IP,
                "netns",
                "exec",
                server_ns,
                DNSMASQ,
                "--keep-in-foreground",
                f"--conf-file={conf}",
                f"--dhcp-leasefile={leases}",
                f"--pid-file={tmp_path / 'dnsmasq.pid'}",
                f"--log-facility={log}",
                "--user=root",
                "--group=root",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            # As the configuration says to run it (LimitNOFILE under systemd).
            preexec_fn=lambda: _raise_open_files(limits.open_files),
        )
        try:
            deadline = time.monotonic() + 15
            while "TFTP root is" not in (log.read_text() if log.exists() else ""):
                assert server.poll() is None, f"dnsmasq exited: {server.stderr.read()!r}"  # type: ignore[union-attr]
                assert time.monotonic() < deadline, "dnsmasq did not start"
                time.sleep(0.1)
            hosts = {h.mac: h.address for h in roce.provider.hosts}
            macs = tmp_path / "macs"
            macs.write_text("\n".join(hosts) + "\n")
            out = tmp_path / "clients.json"
            started = time.monotonic()
            client = subprocess.run(
                [
                    IP,
                    "netns",
                    "exec",
                    client_ns,
                    sys.executable,
                    str(CLIENTS),
                    client_if,
                    str(macs),
                    str(out),
                    "--deadline",
                    "40",
                ],
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
            elapsed = time.monotonic() - started
            assert client.returncode == 0, client.stderr
        finally:
            server.terminate()
            server.wait(timeout=10)
        result = json.loads(out.read_text())
        acked: dict[str, str] = result["acked"]
        text = log.read_text()
        missing = sorted(set(hosts) - set(acked))
        assert not missing, (
            f"{len(missing)} of {len(hosts)} hosts got no lease (first {missing[:3]}); "
            f"dnsmasq log: {[line for line in text.splitlines() if 'limit' in line][:3]}"
        )
        wrong = {mac: got for mac, got in acked.items() if hosts[mac] != got}
        assert wrong == {}, "hosts given another address than their static lease"
        assert result["naks"] == 0
        # Every lease is recorded, each at its planned address.
        recorded = [line.split() for line in leases.read_text().splitlines()]
        assert len(recorded) == len(hosts)
        assert {r[1]: r[2] for r in recorded} == hosts
        assert all(
            ipaddress.ip_address(r[2]) in ipaddress.ip_network("10.0.0.0/20") for r in recorded
        )
        # dnsmasq kept the configured tftp-max under the stated open-files limit.
        assert "restricting maximum simultaneous TFTP transfers" not in text
        assert elapsed < 50
        print(f"{len(acked)} leases in {result['seconds']} s")
