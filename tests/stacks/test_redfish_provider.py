"""The Redfish client and the BareMetalNode dynamic provider against a real BMC emulator.

Exercised: myriad.provision.redfish over HTTP against sushy-tools' emulator (fake driver,
basic auth: the client's fallback when a BMC offers no sessions), with the PXE server's
folder (myriad.provision.pxe_state) in a temporary directory: power state and boot override
really change on the emulated BMC, flags really appear and disappear. What the provider
refuses (powering a running node, reimaging without a token, Secure Boot) is checked against
the same emulator. test_redfish_quirks.py runs the client against a strict BMC.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from myriad.provision.pxe_state import (
    HOSTS_FILE,
    PxeState,
    PxeStateError,
    installer_path,
    served_path,
)
from myriad.provision.redfish import (
    SECRET_KEYS,
    BmcCredentials,
    NodeTarget,
    NodeUnreachable,
    RedfishClient,
    RedfishError,
    RedfishHttpError,
    RedfishNodeProvider,
    RedfishTimeout,
    UnsafeOperation,
    power_cycle_node,
    read_node,
    ssh_banner_marker,
    target_from_props,
    wait_for_ssh,
)

from conftest import Emulator, free_port, silent_listener

MACS = {"gpu01": "02:00:00:00:00:01", "gpu02": "02:00:00:00:00:02"}


def credentials(emulator: Emulator) -> BmcCredentials:
    return BmcCredentials(emulator.username, emulator.password)


def bmc(emulator: Emulator, **kwargs: Any) -> RedfishClient:
    return RedfishClient(emulator.url, credentials(emulator), timeout_s=5, **kwargs)


def make_pxe_root(root: Path) -> PxeState:
    """The parts of a rendered bundle the provider uses: hosts.json and installer scripts."""
    hosts = {name: {"mac": mac, "address": "127.0.0.1"} for name, mac in MACS.items()}
    (root / HOSTS_FILE).parent.mkdir(parents=True, exist_ok=True)
    (root / HOSTS_FILE).write_text(json.dumps(hosts))
    for name, mac in MACS.items():
        path = root / installer_path(mac)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"#!ipxe\n# installer of {name}\n")
    return PxeState(root)


def props(emulator: Emulator, name: str, pxe_root: Path, **overrides: Any) -> dict[str, Any]:
    values: dict[str, Any] = {
        "name": name,
        "mac": MACS.get(name, "02:00:00:00:00:99"),
        "bmc_address": emulator.url,
        "redfish_system": name,
        "address": "127.0.0.1",
        "os": "ubuntu-22.04",
        "reimage_token": None,
        "pxe_root": str(pxe_root),
        "parallel_installs": 8,
        "boot_mode": "UEFI",
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


def power_off(emulator: Emulator, name: str) -> None:
    client = bmc(emulator)
    path = client.system_path(name)
    if client.system(path).power_state != "Off":
        client.reset(path, "ForceOff")
    client.wait_for_power(path, "Off", timeout_s=15, poll_s=0.1)


@pytest.fixture
def pxe(tmp_path: Path) -> PxeState:
    return make_pxe_root(tmp_path / "pxe")


def test_create_starts_the_install_and_returns(redfish_emulator: Emulator, pxe: PxeState) -> None:
    power_off(redfish_emulator, "gpu01")
    provider = RedfishNodeProvider()
    client = bmc(redfish_emulator)
    path = client.system_path("gpu01")
    news = props(redfish_emulator, "gpu01", pxe.root)
    assert provider.check({}, news).failures == []

    started = time.monotonic()
    created = provider.create(news)
    # Returns once the node is flagged and asked to power on: no wait for the install.
    assert time.monotonic() - started < 5
    assert created.id == f"{redfish_emulator.url}/redfish/v1/Systems/gpu01"
    outs = created.outs or {}
    assert (outs["install_state"], outs["install_id"]) == ("installing", "ubuntu-22.04:initial")
    assert all(outs[key] for key in SECRET_KEYS)  # kept, so that read and delete can log in
    assert pxe.flagged(MACS["gpu01"])
    assert (pxe.root / served_path(MACS["gpu01"])).read_text().endswith("installer of gpu01\n")
    system = client.wait_for_power(path, "On", timeout_s=15, poll_s=0.1)
    assert (system.boot_target, system.boot_mode) == ("Pxe", "UEFI")

    # The wait (or the installer's callback) moves the record on; refresh reports it.
    pxe.advance("gpu01", "up", "SSH-2.0-OpenSSH_9.6 myriad-gpu01-ubuntu-22.04")
    assert not pxe.flagged(MACS["gpu01"])
    read = provider.read(created.id, outs)
    assert read.id == created.id
    assert ((read.outs or {})["power_state"], (read.outs or {})["install_state"]) == ("On", "up")

    # Unrelated input changes are recorded without touching the node.
    calmer = {**news, "request_timeout_s": 9.0}
    diff = provider.diff(created.id, read.outs or {}, calmer)
    assert diff.changes and diff.replaces == []
    updated = provider.update(created.id, read.outs or {}, calmer)
    assert (updated.outs or {})["install_state"] == "up"
    assert not pxe.flagged(MACS["gpu01"])

    # delete (retainNodes false): graceful shutdown
    provider.delete(created.id, updated.outs or {})
    assert client.system(path).power_state == "Off"


def test_a_running_node_is_never_power_cycled(redfish_emulator: Emulator, pxe: PxeState) -> None:
    client = bmc(redfish_emulator)
    path = client.system_path("gpu01")
    power_off(redfish_emulator, "gpu01")
    client.reset(path, "On")
    client.wait_for_power(path, "On", timeout_s=15, poll_s=0.1)
    provider = RedfishNodeProvider()
    news = props(redfish_emulator, "gpu01", pxe.root)
    with pytest.raises(UnsafeOperation, match="gpu01 is On: Myriad does not power-cycle"):
        provider.create(news)
    assert not pxe.flagged(MACS["gpu01"]) and pxe.record("gpu01") is None

    # A new reimage token on a running node is refused the same way...
    olds = {**news, "power_state": "On", "install_state": "up", "install_id": "x"}
    with pytest.raises(UnsafeOperation, match="scontrol update nodename=gpu01 state=drain"):
        provider.update("id", olds, {**news, "reimage_token": "2026-12-01"})
    assert client.system(path).power_state == "On"

    # ...and a refresh that caught the node off (mid-reboot) is no reason to act.
    rebooting = {**olds, "power_state": "Off"}
    assert not provider.diff("id", rebooting, dict(news)).changes

    # Once the operator has shut it down, the token reimages it.
    power_off(redfish_emulator, "gpu01")
    redone = provider.update("id", olds, {**news, "reimage_token": "2026-12-01"})
    assert (redone.outs or {})["install_id"] == "ubuntu-22.04:2026-12-01"
    assert pxe.flagged(MACS["gpu01"])
    client.wait_for_power(path, "On", timeout_s=15, poll_s=0.1)
    power_off(redfish_emulator, "gpu01")


def test_changing_the_os_without_a_token_is_refused(
    redfish_emulator: Emulator, pxe: PxeState
) -> None:
    olds = props(redfish_emulator, "gpu01", pxe.root)
    newer = {**olds, "os": "ubuntu-24.04"}
    (failure,) = RedfishNodeProvider().check(olds, newer).failures
    assert failure.property == "os"
    assert "changed from ubuntu-22.04 to ubuntu-24.04" in failure.reason
    assert "pulumi config set --path 'myriad:replace.gpu01' <new token>" in failure.reason
    assert RedfishNodeProvider().check(olds, {**newer, "reimage_token": "t1"}).failures == []
    with pytest.raises(UnsafeOperation, match="without a reimage token"):
        RedfishNodeProvider().update("id", olds, newer)


def test_only_a_new_token_reimages(redfish_emulator: Emulator, pxe: PxeState) -> None:
    power_off(redfish_emulator, "gpu02")
    provider = RedfishNodeProvider()
    tokened = {
        **props(redfish_emulator, "gpu02", pxe.root, reimage_token="island:r2/t1"),
        "power_state": "Off",
        "install_state": "up",
        "install_id": "ubuntu-22.04:island:r2/t1",
    }
    # Cleaning up myriad:replace (the node's token, or its island's) reimages nothing.
    for cleaned in (None, "t1", "island:r2"):
        news = {**tokened, "reimage_token": cleaned}
        assert provider.check(tokened, {**news, "os": "ubuntu-24.04"}).failures  # no new token
        updated = provider.update("id", tokened, news)
        assert (updated.outs or {})["install_id"] == "ubuntu-22.04:island:r2/t1"
        assert pxe.record("gpu02") is None and not pxe.flagged(MACS["gpu02"])
    # A token part it did not carry before does.
    redone = provider.update("id", tokened, {**tokened, "reimage_token": "island:r3/t1"})
    assert (redone.outs or {})["install_state"] == "installing"
    assert pxe.flagged(MACS["gpu02"])
    client = bmc(redfish_emulator)
    client.wait_for_power(client.system_path("gpu02"), "On", timeout_s=15, poll_s=0.1)
    power_off(redfish_emulator, "gpu02")


def test_installs_beyond_the_limit_wait_queued(redfish_emulator: Emulator, pxe: PxeState) -> None:
    for name in ("gpu01", "gpu02"):
        power_off(redfish_emulator, name)
    provider = RedfishNodeProvider()
    first = provider.create(props(redfish_emulator, "gpu01", pxe.root, parallel_installs=1))
    second = provider.create(props(redfish_emulator, "gpu02", pxe.root, parallel_installs=1))
    assert (first.outs or {})["install_state"] == "installing"
    assert (second.outs or {})["install_state"] == "queued"
    client = bmc(redfish_emulator)
    time.sleep(2.5)  # the emulator applies a power change two seconds after the request
    assert client.system(client.system_path("gpu02")).power_state == "Off"
    assert client.system(client.system_path("gpu02")).boot_target == "Pxe"
    assert pxe.flagged(MACS["gpu02"])  # flagged: when the wait powers it on, it installs
    for name in ("gpu01", "gpu02"):
        power_off(redfish_emulator, name)


def test_secure_boot_is_refused_with_the_reason(redfish_emulator: Emulator, pxe: PxeState) -> None:
    power_off(redfish_emulator, "gpu02")
    client = bmc(redfish_emulator)
    secure = client.system_path("gpu02") + "/SecureBoot"
    client.patch(secure, {"SecureBootEnable": True})
    try:
        with pytest.raises(UnsafeOperation, match=r"enforces UEFI Secure Boot.*not signed"):
            RedfishNodeProvider().create(props(redfish_emulator, "gpu02", pxe.root))
        assert pxe.record("gpu02") is None
    finally:
        client.patch(secure, {"SecureBootEnable": False})


def test_a_bundle_without_the_node_is_named(redfish_emulator: Emulator, tmp_path: Path) -> None:
    power_off(redfish_emulator, "gpu01")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(PxeStateError, match=r"installers/02-00-00-00-00-01\.ipxe is missing"):
        RedfishNodeProvider().create(props(redfish_emulator, "gpu01", empty))


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


def test_an_unknown_system_is_a_404_with_the_bmcs_message(
    redfish_emulator: Emulator, tmp_path: Path
) -> None:
    client = bmc(redfish_emulator)
    with pytest.raises(RedfishHttpError, match=r"HTTP 404.*not found") as caught:
        client.system(client.system_path("gpu99"))
    assert caught.value.status == 404
    gone_props = props(redfish_emulator, "gpu99", tmp_path)
    gone = target_from_props(gone_props)
    # Not known now (asked three times): refresh keeps the node (test_redfish_quirks.py).
    assert read_node(gone) is None
    kept = RedfishNodeProvider().read("the-id", {**gone_props, "power_state": "On"})
    assert kept.id == "the-id" and (kept.outs or {})["power_state"] == "Unknown"


def test_a_bmc_of_several_systems_needs_the_system_named(redfish_emulator: Emulator) -> None:
    with pytest.raises(RedfishError, match="manages 2 systems, not one; name the server"):
        bmc(redfish_emulator).system_path(None)


def test_a_reset_the_bmc_does_not_offer_is_refused_before_sending(
    redfish_emulator: Emulator,
) -> None:
    client = bmc(redfish_emulator)
    with pytest.raises(RedfishError, match=r"allows ResetType On, .*none of PushPowerButton"):
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


def test_check_reports_every_bad_input(redfish_emulator: Emulator, tmp_path: Path) -> None:
    bad = {
        **props(redfish_emulator, "gpu01", tmp_path),
        "address": "gpu01.example",
        "parallel_installs": 0,
        "power_timeout_s": 0,
        "bmc_password": "",
        "boot_mode": "Bios",
    }
    failures = RedfishNodeProvider().check({}, bad).failures
    assert {f.property for f in failures} == {
        "address",
        "parallel_installs",
        "power_timeout_s",
        "bmc_password",
        "boot_mode",
    }


def test_a_different_server_is_a_replacement(redfish_emulator: Emulator, tmp_path: Path) -> None:
    olds = {**props(redfish_emulator, "gpu01", tmp_path), "power_state": "On"}
    news = {**olds, "mac": "02:00:00:00:00:09"}
    diff = RedfishNodeProvider().diff("id", olds, news)
    assert diff.replaces == ["mac"] and diff.delete_before_replace
    assert not RedfishNodeProvider().diff("id", olds, dict(olds)).changes


def node_target(emulator: Emulator, name: str, url: str | None = None) -> NodeTarget:
    return NodeTarget(
        name=name,
        bmc_address=url or emulator.url,
        credentials=credentials(emulator),
        address="127.0.0.1",
        os="ubuntu-22.04",
        redfish_system=name,
        request_timeout_s=5.0,
        poll_s=0.2,
    )


def test_remediation_power_cycles_a_hung_node_and_powers_on_one_found_off(
    redfish_emulator: Emulator,
) -> None:
    # Remediation's BMC step (myriad.ops.remedy): a node that is on gets a hard restart;
    # the emulator offers no PowerCycle, so ForceRestart, and the node really goes through
    # Off and back On.
    client = bmc(redfish_emulator)
    path = client.system_path("gpu02")
    if client.system(path).power_state != "On":
        client.reset(path, "On")
        client.wait_for_power(path, "On", timeout_s=15, poll_s=0.1)
    assert power_cycle_node(node_target(redfish_emulator, "gpu02")) == "ForceRestart"
    client.wait_for_power(path, "Off", timeout_s=15, poll_s=0.05)
    client.wait_for_power(path, "On", timeout_s=15, poll_s=0.1)
    # A node found off (its PSU tripped, someone pulled it) is powered on instead.
    power_off(redfish_emulator, "gpu02")
    assert power_cycle_node(node_target(redfish_emulator, "gpu02")) == "On"
    client.wait_for_power(path, "On", timeout_s=15, poll_s=0.1)
