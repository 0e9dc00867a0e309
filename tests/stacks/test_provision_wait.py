"""Fifty emulated servers provisioned at once, and the wait that follows them, killed and resumed.

Exercised, for real: the BareMetalNode provider's `create` for 50 nodes at once (threads, as
Pulumi's provider host would call it) against sushy-tools emulators serving 50 fake systems
(five BMC endpoints of ten systems each: the fake driver keeps its state in SQLite, which
one process cannot share among fifty busy clients); the PXE server's folder rendered by
`stacks.pxe` and its HTTP callback server (`myriad.provision.pxe_server`); `myriad provision
wait` run as a subprocess, killed with SIGKILL mid-way, and run again.

Stood in for: each server's firmware and installer. A `Fleet` thread watches the emulator;
a system that powers on while its node is flagged "installs" for a second, reports done to
the PXE server from the node's own address (127.0.1.N on loopback), then "reboots" into an
SSH server whose banner carries the installed system's marker. A system powered on while
not flagged boots from disk and installs nothing.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from myriad.plan.nodes import iter_nodes
from myriad.provision.pxe_server import make_server
from myriad.provision.pxe_state import PxeState
from myriad.provision.redfish import (
    RedfishClient,
    RedfishError,
    RedfishNodeProvider,
    ssh_banner_marker,
)
from myriad.provision.wait import WaitNode, WaitSettings, wait_for_installs
from myriad.spec import load_spec
from myriad.spec.models import Cluster
from stacks import pxe as pxe_bundle
from stacks.settings import PxeSettings

from conftest import Emulator, free_port, run_emulator
from stack_harness import ADMIN_KEY, REPO

NODES = 50
PARALLEL = 20
OS = "ubuntu-22.04"


BMCS = 5


def fifty_node_spec(path: Path, bmc_urls: list[str]) -> Cluster:
    """starter-64 grown to 50 nodes on a loopback management network, one host entry each."""
    data = yaml.safe_load((REPO / "inventories/starter-64/cluster.yaml").read_text())
    for pool in data["pools"]:
        if pool["name"] == "gpu":
            pool["count"] = NODES - 3
    data["network"]["addressing"]["management"] = "127.0.0.0/16"
    # The fake installers answer with OS's banner marker, whatever the example's release.
    data["software"]["os"] = OS
    data["provider"]["baremetal"] = {"parallel_installs": PARALLEL}
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    names = [node.name for node in iter_nodes(load_spec(path).spec)]
    data["provider"]["hosts"] = [
        {
            "name": name,
            "mac": f"02:00:00:00:01:{index:02x}",
            "bmc_address": bmc_urls[(index - 1) * len(bmc_urls) // NODES],
            "redfish_system": name,
            "address": f"127.0.1.{index}",
        }
        for index, name in enumerate(names, start=1)
    ]
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return load_spec(path).spec


@dataclass
class Lab:
    spec: Cluster
    spec_path: Path
    pxe: PxeState
    emulator: Emulator
    pxe_port: int
    ssh_port: int


class Fleet:
    """The servers' side: firmware that network-boots when flagged, and an installer."""

    def __init__(self, lab: Lab) -> None:
        self.lab = lab
        self.hosts = {h.name: h for h in lab.spec.provider.hosts}
        self.installed: set[str] = set()
        self.callbacks: dict[str, int] = {}
        self.listeners: list[socket.socket] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Fleet:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        for listener in self.listeners:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()

    def _run(self) -> None:
        credentials = _credentials(self.lab.emulator)
        clients = {
            url: RedfishClient(url, credentials, timeout_s=10)
            for url in {h.bmc_address for h in self.hosts.values()}
        }
        installing: dict[str, float] = {}
        while not self._stop.wait(0.2):
            for name, host in self.hosts.items():
                if name in self.installed:
                    continue
                if name in installing:
                    if time.monotonic() >= installing[name]:
                        self._finish(name, host.address)
                        del installing[name]
                    continue
                try:
                    system = clients[host.bmc_address].system(f"/redfish/v1/Systems/{name}")
                except RedfishError:
                    continue  # a busy emulator; look again next round, as firmware would
                if system.power_state == "On" and self.lab.pxe.flagged(host.mac):
                    installing[name] = time.monotonic() + 1.0  # the install takes a second

    def _finish(self, name: str, address: str) -> None:
        # The autoinstall late-command: POST from the node's own address.
        connection = http.client.HTTPConnection(
            "127.0.0.1", self.lab.pxe_port, timeout=5, source_address=(address, 0)
        )
        connection.request("POST", f"/installed/{name}")
        self.callbacks[name] = connection.getresponse().status
        connection.close()
        # The reboot into the installed system: sshd with the marker in its banner.
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((address, self.lab.ssh_port))
        listener.listen(8)
        self.listeners.append(listener)
        banner = f"SSH-2.0-OpenSSH_8.9p1 {ssh_banner_marker(name, OS)}\r\n".encode()
        threading.Thread(target=_serve, args=(listener, banner), daemon=True).start()
        self.installed.add(name)


def _serve(listener: socket.socket, banner: bytes) -> None:
    with contextlib.suppress(OSError):
        while True:
            conn, _ = listener.accept()
            with conn:
                conn.sendall(banner)


def _credentials(emulator: Emulator) -> Any:
    from myriad.provision.redfish import BmcCredentials

    return BmcCredentials(emulator.username, emulator.password)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    workdir = tmp_path_factory.mktemp("fleet")
    probe = fifty_node_spec(workdir / "probe.yaml", [f"http://127.0.0.1:{i}" for i in range(BMCS)])
    groups: dict[str, dict[str, str]] = {}
    for host in probe.provider.hosts:
        uid = str(uuid.uuid5(uuid.NAMESPACE_DNS, host.name))
        groups.setdefault(host.bmc_address, {})[host.name] = uid
    with contextlib.ExitStack() as stack:
        emulators = []
        for index, systems in enumerate(groups.values()):
            (workdir / f"bmc{index}").mkdir()
            emulators.append(stack.enter_context(run_emulator(workdir / f"bmc{index}", systems)))
        emulator = emulators[0]
        spec_path = workdir / "cluster.yaml"
        spec = fifty_node_spec(spec_path, [e.url for e in emulators])
        root = workdir / "pxe"
        server = make_server_after_render(spec, root)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield Lab(
                spec, spec_path, PxeState(root), emulator, server.server_address[1], free_port()
            )
        finally:
            server.shutdown()
            server.server_close()


def make_server_after_render(spec: Cluster, root: Path) -> Any:
    settings = PxeSettings(
        server="127.0.0.1", gateway="127.0.0.1", dns=("127.0.0.1",),
        ssh_authorized_keys=(ADMIN_KEY,),
    )  # fmt: skip
    files = pxe_bundle.render_pxe(spec, settings, source="cluster.yaml")
    pxe_bundle.write_bundle(files, root)
    return make_server(root, "127.0.0.1", 0)


def node_props(lab: Lab, name: str) -> dict[str, Any]:
    host = next(h for h in lab.spec.provider.hosts if h.name == name)
    return {
        "name": name,
        "mac": host.mac,
        "bmc_address": host.bmc_address,
        "redfish_system": host.redfish_system,
        "address": host.address,
        "os": OS,
        "reimage_token": None,
        "pxe_root": str(lab.pxe.root),
        "parallel_installs": PARALLEL,
        "boot_mode": "UEFI",
        "power_timeout_s": 30.0,
        "request_timeout_s": 10.0,
        "verify_tls": True,
        "ca_file": None,
        "poll_s": 0.5,
        "bmc_username": lab.emulator.username,
        "bmc_password": lab.emulator.password,
    }


def wait_command(lab: Lab) -> list[str]:
    return [
        sys.executable, "-m", "myriad.cli", "provision", "wait", str(lab.spec_path),
        "--pxe-root", str(lab.pxe.root), "--poll", "0.3", "--ssh-port", str(lab.ssh_port),
    ]  # fmt: skip


def wait_env(lab: Lab) -> dict[str, str]:
    return {
        **os.environ,
        "MYRIAD_BMC_USERNAME": lab.emulator.username,
        "MYRIAD_BMC_PASSWORD": lab.emulator.password,
    }


UP = re.compile(r"\] (?:.*?)(\d+) up")


@pytest.mark.slow
def test_fifty_nodes_install_at_once_and_the_wait_resumes_after_a_kill(lab: Lab) -> None:
    names = [h.name for h in lab.spec.provider.hosts]
    assert len(names) == NODES
    provider = RedfishNodeProvider()
    with Fleet(lab) as fleet:
        started = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(max_workers=NODES) as pool:
            created = list(pool.map(lambda n: provider.create(node_props(lab, n)), names))
        took = time.monotonic() - started
        states = [(c.outs or {})["install_state"] for c in created]
        # Every create returned without waiting for an install; the limit held.
        assert states.count("installing") == PARALLEL
        assert states.count("queued") == NODES - PARALLEL
        # Seconds, not the length of an install: a generous bound, as CI machines are shared.
        assert took < 120, f"50 creates took {took:.1f}s"
        assert not [r for r in lab.pxe.records() if r.state == "up"]

        # The wait, killed once it has seen some nodes up...
        first = subprocess.Popen(
            wait_command(lab), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            env=wait_env(lab),
        )  # fmt: skip
        seen: list[str] = []
        assert first.stdout is not None
        deadline = time.monotonic() + 180
        killed_at_up = 0
        for line in first.stdout:
            seen.append(line.rstrip())
            match = UP.search(line)
            if match and int(match.group(1)) >= 10:
                first.send_signal(signal.SIGKILL)
                killed_at_up = int(match.group(1))
                break
            assert time.monotonic() < deadline, "\n".join(seen[-20:])
        first.wait(timeout=10)
        assert first.returncode == -signal.SIGKILL, "\n".join(seen[-20:])
        assert 10 <= killed_at_up < NODES, "\n".join(seen)

        before = {r.name: r for r in lab.pxe.records()}
        up_before = {n for n, r in before.items() if r.state == "up"}
        assert len(up_before) >= killed_at_up

        # ...and run again: it carries on from the records, not from the start.
        second = subprocess.run(
            wait_command(lab), capture_output=True, text=True, timeout=300, env=wait_env(lab)
        )
        lines = second.stdout.splitlines()
        assert second.returncode == 0, second.stdout + second.stderr
        # Progress was shown as it went: a growing count of nodes up, line by line, across
        # both runs (the second starts at least where the first was killed).
        counts = [int(m.group(1)) for m in map(UP.search, seen + lines) if m]
        assert counts == sorted(counts) and len(set(counts)) >= 2, "\n".join(seen + lines)
        first_progress = next(line for line in lines if UP.search(line))
        assert int(UP.search(first_progress).group(1)) >= len(up_before)  # type: ignore[union-attr]
        reported_now = {line.split()[0] for line in lines if line.endswith(" up")}
        assert not reported_now & up_before  # nodes already up were not looked at again
        assert lines[-1] == f"{NODES} of {NODES} nodes up"
        # --json: the same outcome as a document on stdout, progress on stderr.
        as_json = subprocess.run(
            [*wait_command(lab), "--json"],
            capture_output=True,
            text=True,
            timeout=120,
            env=wait_env(lab),
        )
        assert as_json.returncode == 0, as_json.stderr
        document = json.loads(as_json.stdout)
        assert (document["format"], document["up"], document["failed"]) == (1, NODES, [])
        assert {n["state"] for n in document["nodes"]} == {"up"}
        assert as_json.stderr.splitlines()[-1] == f"{NODES} of {NODES} nodes up"
        # What an operator sees (pytest -rP shows it): the killed run, then the resumed one.
        print("\n".join(["$ myriad provision wait ...", *seen, "(killed)", "$ again", *lines]))

    records = lab.pxe.records()
    assert len(records) == NODES and {r.state for r in records} == {"up"}
    # No node is flagged any more: a reboot of any of them now boots its disk.
    assert not any(lab.pxe.flagged(h.mac) for h in lab.spec.provider.hosts)
    assert set(fleet.callbacks) == set(names) and set(fleet.callbacks.values()) == {200}

    # Pulumi records the result: a refresh reads each node's install state.
    read = provider.read("id", {**node_props(lab, names[0]), "install_state": "installing"})
    assert (read.outs or {})["install_state"] == "up"


def test_a_node_that_never_comes_up_fails_and_loses_its_flag(tmp_path: Path) -> None:
    root = tmp_path / "pxe"
    (root / "installers").mkdir(parents=True)
    (root / "installers/02-00-00-00-00-01.ipxe").write_text("#!ipxe\n")
    pxe = PxeState(root)
    pxe.flag("gpu01", "02:00:00:00:00:01", "ubuntu-22.04:initial", limit=4)
    nodes = {"gpu01": WaitNode("gpu01", "127.0.0.1", OS, "http://127.0.0.1:1")}
    now = [time.time()]
    shown: list[str] = []
    result = wait_for_installs(
        pxe,
        nodes,
        WaitSettings(parallel_installs=4, timeout_s=60, poll_s=30, ssh_port=free_port()),
        start=None,
        report=lambda p: shown.append(p.line()),
        clock=lambda: now[0],
        sleep=lambda s: now.__setitem__(0, now[0] + s),
    )
    (failed,) = result.failed
    assert failed.name == "gpu01" and "not up 1 min after its install started" in failed.detail
    assert not pxe.flagged("02:00:00:00:00:01")
    assert shown[0].endswith("1 installing of 1") and shown[-1].endswith("1 failed of 1")


def test_queued_nodes_need_the_bmc_credentials(tmp_path: Path) -> None:
    root = tmp_path / "pxe"
    (root / "installers").mkdir(parents=True)
    (root / "installers/02-00-00-00-00-01.ipxe").write_text("#!ipxe\n")
    pxe = PxeState(root)
    pxe.flag("gpu01", "02:00:00:00:00:01", "ubuntu-22.04:initial", limit=0)
    nodes = {"gpu01": WaitNode("gpu01", "127.0.0.1", OS, "http://127.0.0.1:1")}
    from myriad.provision.wait import WaitError

    with pytest.raises(WaitError, match="set MYRIAD_BMC_USERNAME and MYRIAD_BMC_PASSWORD"):
        wait_for_installs(
            pxe, nodes, WaitSettings(parallel_installs=1, timeout_s=60),
            start=None, report=lambda p: None,
        )  # fmt: skip


def test_the_command_says_what_is_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from myriad.cli import main
    from myriad.provision.wait import pxe_root_for, stack_pxe_root

    spec_path = tmp_path / "cluster.yaml"
    fifty_node_spec(spec_path, ["https://10.255.0.1"])
    empty = tmp_path / "pxe"
    assert main(["provision", "wait", str(spec_path), "--pxe-root", str(empty)]) == 2
    assert "no install records for starter-64's hosts" in capsys.readouterr().err
    local = REPO / "inventories/local/cluster.yaml"
    assert main(["provision", "wait", str(local), "--pxe-root", str(empty)]) == 2
    assert "only baremetal installs" in capsys.readouterr().err
    # --stack reads the committed stack file's myriad:pxeRoot.
    assert stack_pxe_root(REPO / "Pulumi.starter-64.yaml") == Path("/srv/myriad-pxe")
    assert pxe_root_for(None, empty) == empty
