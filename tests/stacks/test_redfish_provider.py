"""The Redfish client and the BareMetalNode dynamic provider against a real BMC emulator.

Exercised: myriad.provision.redfish over HTTP against sushy-tools' emulator (fake driver):
power state and boot override really change on the emulated BMC; timeouts, refused
connections and BMC error answers end in clear errors. A `FakeNode` stands in for the server's
operating system: it answers SSH on a loopback port only while the BMC reports it powered on,
and after a power-on with a PXE boot target it "runs" whatever OS the PXE server serves.
"""

from __future__ import annotations

import contextlib
import http.server
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from myriad.errors import NodeUnreachable, RedfishError, RedfishHttpError, RedfishTimeout
from myriad.provision.redfish import (
    SECRET_KEYS,
    BmcCredentials,
    RedfishClient,
    RedfishNodeProvider,
    read_node,
    ssh_banner_marker,
    target_from_props,
    wait_for_ssh,
)

from conftest import Emulator, free_port, silent_listener


class FakeNode:
    """A server seen from the network: SSH answers while its BMC says it is on."""

    def __init__(self, client: RedfishClient, system: str, name: str) -> None:
        self.client, self.name = client, name
        self.path = client.system_path(system)
        self.port = free_port()
        self.pxe_os = "ubuntu-22.04"
        self.installed: str | None = None
        self.boots = 0
        self._server: socket.socket | None = None
        self._stop = threading.Event()
        self._watcher = threading.Thread(target=self._watch, daemon=True)
        self._watcher.start()

    def _watch(self) -> None:
        was_on = False
        while not self._stop.wait(0.05):
            state = self.client.system(self.path)
            on = state.power_state == "On"
            if on and not was_on:
                self.boots += 1
                if state.boot_target == "Pxe":
                    self.installed = self.pxe_os
                self._listen()
            elif was_on and not on:
                self._close()
            was_on = on

    def _listen(self) -> None:
        if self.installed is None:
            return  # an empty disk: nothing answers
        server = socket.socket()
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", self.port))
        server.listen(8)
        banner = f"SSH-2.0-OpenSSH_9.6 {ssh_banner_marker(self.name, self.installed)}\r\n"
        self._server = server
        threading.Thread(target=self._serve, args=(server, banner.encode()), daemon=True).start()

    @staticmethod
    def _serve(server: socket.socket, banner: bytes) -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = server.accept()
                with conn:
                    conn.sendall(banner)

    def _close(self) -> None:
        if self._server is not None:
            # shutdown() wakes the thread blocked in accept(); close() alone would not, and
            # the port would stay bound.
            with contextlib.suppress(OSError):
                self._server.shutdown(socket.SHUT_RDWR)
            self._server.close()
            self._server = None

    def stop(self) -> None:
        self._stop.set()
        self._watcher.join(timeout=5)
        self._close()


def credentials(emulator: Emulator) -> BmcCredentials:
    return BmcCredentials(emulator.username, emulator.password)


def bmc(emulator: Emulator, **kwargs: Any) -> RedfishClient:
    return RedfishClient(emulator.url, credentials(emulator), timeout_s=5, **kwargs)


def props(emulator: Emulator, name: str, ssh_port: int, **overrides: Any) -> dict[str, Any]:
    values: dict[str, Any] = {
        "name": name,
        "mac": "02:00:00:00:00:01",
        "bmc_address": emulator.url,
        "redfish_system": name,
        "address": "127.0.0.1",
        "os": "ubuntu-22.04",
        "ssh_port": ssh_port,
        "ssh_timeout_s": 20.0,
        "power_timeout_s": 20.0,
        "request_timeout_s": 5.0,
        "verify_tls": True,
        "ca_file": None,
        "poll_s": 0.2,
        "bmc_username": emulator.username,
        "bmc_password": emulator.password,
    }
    values.update(overrides)
    return values


@pytest.fixture
def gpu01(redfish_emulator: Emulator) -> Iterator[FakeNode]:
    node = FakeNode(bmc(redfish_emulator), "gpu01", "gpu01")
    yield node
    node.stop()


def test_lifecycle_changes_power_and_boot_on_the_bmc(
    redfish_emulator: Emulator, gpu01: FakeNode
) -> None:
    provider = RedfishNodeProvider()
    client = bmc(redfish_emulator)
    path = client.system_path("gpu01")
    assert client.system(path).power_state == "Off"
    news = props(redfish_emulator, gpu01.name, gpu01.port)
    assert provider.check({}, news).failures == []

    # create: one-time PXE boot, power on, and the installed system answers with its marker
    created = provider.create(news)
    assert created.id == f"{redfish_emulator.url}/redfish/v1/Systems/gpu01"
    system = client.system(path)
    assert (system.power_state, system.boot_target) == ("On", "Pxe")
    assert gpu01.installed == "ubuntu-22.04" and gpu01.boots == 1
    outs = created.outs or {}
    assert (outs["power_state"], outs["health"]) == ("On", "OK")
    assert all(outs[key] for key in SECRET_KEYS)  # kept, so that read and delete can log in

    # read: what `pulumi refresh` sees
    read = provider.read(created.id, outs)
    assert read.id == created.id and (read.outs or {})["power_state"] == "On"

    # update: a new OS reinstalls the running node (reset, PXE again, new marker)
    gpu01.pxe_os = "ubuntu-24.04"
    newer = {**news, "os": "ubuntu-24.04"}
    diff = provider.diff(created.id, outs, newer)
    assert diff.changes and diff.replaces == []
    updated = provider.update(created.id, outs, newer)
    assert gpu01.installed == "ubuntu-24.04" and gpu01.boots == 2
    assert (updated.outs or {})["power_state"] == "On"

    # drift: powered off behind Pulumi's back; refresh shows it, the next update repairs it
    client.reset(path, "ForceOff")
    client.wait_for_power(path, "Off", timeout_s=10, poll_s=0.1)
    refreshed = provider.read(created.id, updated.outs or {})
    assert (refreshed.outs or {})["power_state"] == "Off"
    assert provider.diff(created.id, refreshed.outs or {}, newer).changes
    repaired = provider.update(created.id, refreshed.outs or {}, newer)
    assert (repaired.outs or {})["power_state"] == "On" and gpu01.boots == 3

    # delete: power off (graceful shutdown)
    provider.delete(created.id, repaired.outs or {})
    assert client.system(path).power_state == "Off"


def test_create_fails_clearly_when_the_node_never_answers(redfish_emulator: Emulator) -> None:
    closed = free_port()
    settings = {
        **props(redfish_emulator, "gpu02", closed),
        "ssh_timeout_s": 1.0,
        "power_timeout_s": 10.0,
    }
    started = time.monotonic()
    with pytest.raises(NodeUnreachable, match=rf"127\.0\.0\.1:{closed} did not answer on SSH"):
        RedfishNodeProvider().create(settings)
    assert time.monotonic() - started < 10
    client = bmc(redfish_emulator)
    path = client.system_path("gpu02")
    client.reset(path, "ForceOff")
    client.wait_for_power(path, "Off", timeout_s=10, poll_s=0.1)


def test_wrong_credentials_name_the_cause_and_not_the_password(
    redfish_emulator: Emulator,
) -> None:
    client = RedfishClient(redfish_emulator.url, BmcCredentials("admin", "not-it"), timeout_s=5)
    with pytest.raises(RedfishHttpError, match="HTTP 401") as caught:
        client.system(client.system_path("gpu01"))
    assert caught.value.status == 401
    assert "check the BMC credentials" in str(caught.value)
    assert "not-it" not in str(caught.value) and "not-it" not in repr(client)
    assert "not-it" not in repr(BmcCredentials("admin", "not-it"))


def test_an_unknown_system_is_a_404_with_the_bmcs_message(redfish_emulator: Emulator) -> None:
    client = bmc(redfish_emulator)
    with pytest.raises(RedfishHttpError, match=r"HTTP 404.*not found") as caught:
        client.system(client.system_path("gpu99"))
    assert caught.value.status == 404
    gone = target_from_props({**props(redfish_emulator, "gpu99", 22), "redfish_system": "gpu99"})
    assert read_node(gone) is None  # refresh drops a node whose BMC no longer has it


def test_a_bmc_of_several_systems_needs_the_system_named(redfish_emulator: Emulator) -> None:
    with pytest.raises(RedfishError, match="manages 2 systems, not one; name the server"):
        bmc(redfish_emulator).system_path(None)


def test_a_reset_the_bmc_rejects_is_reported(redfish_emulator: Emulator) -> None:
    client = bmc(redfish_emulator)
    with pytest.raises(RedfishHttpError, match=r"HTTP 501.*PushPowerButton is not supported"):
        client.reset(client.system_path("gpu02"), "PushPowerButton")


def test_waiting_for_power_is_bounded(redfish_emulator: Emulator) -> None:
    client = bmc(redfish_emulator)
    path = client.system_path("gpu02")
    now = client.system(path).power_state
    other = "Off" if now == "On" else "On"
    started = time.monotonic()
    with pytest.raises(RedfishTimeout, match=rf"still {now} after 0\.5s, not {other}"):
        client.wait_for_power(path, other, timeout_s=0.5, poll_s=0.1)
    assert time.monotonic() - started < 2


def test_a_bmc_that_never_answers_times_out() -> None:
    with silent_listener() as port:
        client = RedfishClient(f"http://127.0.0.1:{port}", BmcCredentials("a", "b"), timeout_s=0.5)
        started = time.monotonic()
        with pytest.raises(RedfishTimeout, match=r"got no answer within 0\.5s"):
            client.get("/redfish/v1/Systems")
        assert time.monotonic() - started < 3


def test_an_unreachable_bmc_is_named() -> None:
    port = free_port()
    client = RedfishClient(f"http://127.0.0.1:{port}", BmcCredentials("a", "b"), timeout_s=2)
    with pytest.raises(RedfishError, match=rf"cannot reach BMC http://127\.0\.0\.1:{port}"):
        client.get("/redfish/v1/Systems")


def test_credentials_are_not_sent_to_another_host() -> None:
    class Redirect(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # the handler's method name
            self.send_response(307)
            self.send_header("Location", "http://127.0.0.2:9/redfish/v1/Systems")
            self.end_headers()

        def log_message(self, *_: Any) -> None:
            return None

    server = http.server.HTTPServer(("127.0.0.1", 0), Redirect)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        client = RedfishClient(url, BmcCredentials("a", "b"), timeout_s=2)
        with pytest.raises(RedfishError, match="refusing to send the BMC credentials"):
            client.get("/redfish/v1/Systems")
    finally:
        server.shutdown()
        server.server_close()


def test_ssh_wait_times_out_on_a_closed_port() -> None:
    port = free_port()
    started = time.monotonic()
    with pytest.raises(NodeUnreachable, match=rf"127\.0\.0\.1:{port} did not answer.*refused"):
        wait_for_ssh("127.0.0.1", port, timeout_s=1.0, poll_s=0.2)
    assert time.monotonic() - started < 3


def test_ssh_wait_wants_the_installed_systems_banner() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        port = server.getsockname()[1]

        def serve() -> None:
            with contextlib.suppress(OSError):
                while True:
                    conn, _ = server.accept()
                    with conn:
                        conn.sendall(b"SSH-2.0-OpenSSH_8.9p1 Ubuntu-3ubuntu0.10\r\n")

        threading.Thread(target=serve, daemon=True).start()
        marker = ssh_banner_marker("gpu01", "ubuntu-22.04")
        with pytest.raises(NodeUnreachable, match=f"lacks '{marker}'"):
            wait_for_ssh("127.0.0.1", port, timeout_s=0.6, banner_marker=marker, poll_s=0.2)
        banner = wait_for_ssh("127.0.0.1", port, timeout_s=1.0, poll_s=0.2)
        assert banner.startswith("SSH-2.0-OpenSSH_8.9p1")


def test_check_reports_every_bad_input(redfish_emulator: Emulator) -> None:
    bad = {
        **props(redfish_emulator, "gpu01", 22),
        "address": "gpu01.example",
        "ssh_port": 70000,
        "power_timeout_s": 0,
        "bmc_password": "",
    }
    failures = RedfishNodeProvider().check({}, bad).failures
    assert {f.property for f in failures} == {
        "address",
        "ssh_port",
        "power_timeout_s",
        "bmc_password",
    }


def test_a_different_server_is_a_replacement(redfish_emulator: Emulator) -> None:
    olds = {**props(redfish_emulator, "gpu01", 22), "power_state": "On"}
    news = {**olds, "mac": "02:00:00:00:00:09"}
    diff = RedfishNodeProvider().diff("id", olds, news)
    assert diff.replaces == ["mac"] and diff.delete_before_replace
    assert not RedfishNodeProvider().diff("id", olds, dict(olds)).changes
