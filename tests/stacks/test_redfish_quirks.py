"""The Redfish client against a strict BMC: sessions, If-Match, settings object, vendor reset.

Exercised: myriad.provision.redfish through `redfish_quirks.quirk_proxy`, a proxy in front of
sushy-tools' emulator that refuses what strict BMCs refuse (its docstring lists each rule and
the BMC family it stands for). Not exercised: a real AMI, Dell or HPE BMC; the rules follow
DSP0266 and what those BMCs are known to demand, and need real hardware to confirm.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from redfish_quirks import ALLOWED_RESETS, QuirkProxy, quirk_proxy
from test_redfish_provider import MACS, make_pxe_root, node_target, power_off, props

from myriad.provision.redfish import (
    BmcCredentials,
    RedfishClient,
    RedfishError,
    RedfishHttpError,
    RedfishNodeProvider,
    power_cycle_node,
)

from conftest import Emulator


@pytest.fixture
def strict(redfish_emulator: Emulator) -> Iterator[QuirkProxy]:
    with quirk_proxy(redfish_emulator.url) as proxy:
        yield proxy


def client(proxy: QuirkProxy, emulator: Emulator) -> RedfishClient:
    return RedfishClient(
        proxy.url, BmcCredentials(emulator.username, emulator.password), timeout_s=5
    )


def test_the_harness_refuses_what_strict_bmcs_refuse(
    strict: QuirkProxy, redfish_emulator: Emulator
) -> None:
    # Basic auth on every call, the client's old way, is refused...
    lenient = client(strict, redfish_emulator)
    with pytest.raises(RedfishHttpError, match=r"HTTP 401.*create a session"):
        lenient.get("/redfish/v1/Systems/gpu01")
    # ...and so are a PATCH on the system, one without If-Match and one without the mode.
    with client(strict, redfish_emulator) as session:
        path = "/redfish/v1/Systems/gpu01"
        boot = {"BootSourceOverrideTarget": "Pxe", "BootSourceOverrideEnabled": "Once"}
        with pytest.raises(RedfishHttpError, match=r"HTTP 405.*settings object"):
            session.patch(path, {"Boot": boot})
        with pytest.raises(RedfishHttpError, match="HTTP 428"):
            session.patch(f"{path}/Settings", {"Boot": boot})
        with pytest.raises(RedfishHttpError, match="HTTP 412"):
            session.patch(f"{path}/Settings", {"Boot": boot}, 'W/"stale"')
        _, etag = session.get_with_etag(f"{path}/Settings")
        with pytest.raises(RedfishHttpError, match=r"HTTP 400.*BootSourceOverrideMode"):
            session.patch(f"{path}/Settings", {"Boot": boot}, etag)
        with pytest.raises(RedfishHttpError, match=r"HTTP 404.*action's target"):
            session.post(f"{path}/Actions/ComputerSystem.Reset", {"ResetType": "On"})


def test_one_session_per_operation_and_it_is_deleted(
    strict: QuirkProxy, redfish_emulator: Emulator
) -> None:
    with client(strict, redfish_emulator) as session:
        assert session.uses_session
        session.system(session.system_path("gpu01"))
        session.system(session.system_path("gpu02"))
    assert len(strict.calls("POST", "/SessionService/Sessions")) == 1
    assert len(strict.deleted) == 1 and not strict.sessions
    authenticated = [s for s in strict.requests if s.path.startswith("/redfish/v1/Systems")]
    assert authenticated and {s.auth for s in authenticated} == {"token"}
    # The password travels once, in the login body, never in a header.
    assert all(s.auth != "basic" for s in strict.requests)


def test_an_expired_session_is_renewed_once(strict: QuirkProxy, redfish_emulator: Emulator) -> None:
    with client(strict, redfish_emulator) as session:
        strict.sessions.clear()  # the BMC timed the session out
        assert session.system(session.system_path("gpu01")).power_state in ("On", "Off")
    assert len(strict.calls("POST", "/SessionService/Sessions")) == 2


def test_the_reset_uses_the_target_and_the_action_info(
    strict: QuirkProxy, redfish_emulator: Emulator
) -> None:
    with client(strict, redfish_emulator) as session:
        path = session.system_path("gpu02")
        target, allowed = session.reset_types(path)
        assert target == f"{path}/Actions/Oem/VendorReset"
        assert allowed == ALLOWED_RESETS  # read from @Redfish.ActionInfo
        # "On" is preferred; PushPowerButton is only a fallback for BMCs without "On".
        assert session.reset(path, ["Nmi", "On", "PushPowerButton"]) == "On"
        assert session.reset(path, "ForceOff") == "ForceOff"
    posts = strict.calls("POST", "/Actions/Oem/VendorReset")
    assert [p.body for p in posts] == [{"ResetType": "On"}, {"ResetType": "ForceOff"}]


def test_the_provider_installs_through_a_strict_bmc(
    strict: QuirkProxy, redfish_emulator: Emulator, tmp_path: Path
) -> None:
    power_off(redfish_emulator, "gpu01")
    pxe = make_pxe_root(tmp_path / "pxe")
    news = {**props(redfish_emulator, "gpu01", pxe.root), "bmc_address": strict.url}
    created = RedfishNodeProvider().create(news)
    assert (created.outs or {})["install_state"] == "installing"
    assert pxe.flagged(MACS["gpu01"])

    (patch,) = strict.calls("PATCH")
    assert patch.path == "/redfish/v1/Systems/gpu01/Settings"
    assert patch.if_match and patch.if_match.startswith('W/"')
    assert patch.body == {
        "Boot": {
            "BootSourceOverrideTarget": "Pxe",
            "BootSourceOverrideEnabled": "Once",
            "BootSourceOverrideMode": "UEFI",
        }
    }
    (reset,) = strict.calls("POST", "/Actions/Oem/VendorReset")
    assert reset.body == {"ResetType": "On"}
    assert len(strict.deleted) == 1 and not strict.sessions  # logged out afterwards
    with client(strict, redfish_emulator) as session:
        state = session.wait_for_power("/redfish/v1/Systems/gpu01", "On", timeout_s=15, poll_s=0.1)
    assert (state.boot_target, state.boot_mode) == ("Pxe", "UEFI")
    power_off(redfish_emulator, "gpu01")


def test_a_bmc_that_closes_its_service_root_still_gets_a_session(
    strict: QuirkProxy, redfish_emulator: Emulator
) -> None:
    strict.closed_root = True
    with client(strict, redfish_emulator) as session:
        assert session.uses_session
        assert session.system(session.system_path("gpu01")).power_state in ("On", "Off")
    assert [s.auth for s in strict.calls("GET", "/redfish/v1/")] == ["none"]
    assert len(strict.deleted) == 1


def test_a_secure_boot_resource_not_served_is_not_a_failure(
    strict: QuirkProxy, redfish_emulator: Emulator
) -> None:
    strict.no_secure_boot = True
    with client(strict, redfish_emulator) as session:
        assert session.secure_boot_enabled("/redfish/v1/Systems/gpu01") is False
    assert strict.calls("GET", "/SecureBoot")


def _installed(proxy: QuirkProxy, emulator: Emulator, root: Path) -> tuple[str, dict[str, Any]]:
    """The id and the outputs Pulumi's state holds for an installed gpu01 behind `proxy`."""
    inputs = {**props(emulator, "gpu01", root), "bmc_address": proxy.url}
    path = "/redfish/v1/Systems/gpu01"
    outs = {
        **inputs,
        "system_path": path,
        "power_state": "Off",
        "health": "OK",
        "install_id": "ubuntu-22.04:initial",
        "install_state": "up",
    }
    return f"{proxy.url}{path}", outs


def test_a_transient_404_during_refresh_keeps_the_node(
    strict: QuirkProxy, redfish_emulator: Emulator, tmp_path: Path
) -> None:
    """A BMC rebooting answers 404 for its system once: refresh must not drop the node, or
    the next `pulumi up` would create it again, a full reinstall with no token."""
    power_off(redfish_emulator, "gpu01")
    pxe = make_pxe_root(tmp_path / "pxe")
    ident, outs = _installed(strict, redfish_emulator, pxe.root)
    strict.fail_once["/redfish/v1/Systems/gpu01"] = 404
    read = RedfishNodeProvider().read(ident, outs)
    assert read.id == ident
    assert (read.outs or {})["power_state"] == "Off"  # read again, after the 404
    assert (read.outs or {})["install_state"] == "up"
    assert not strict.fail_once  # the 404 was answered
    assert len(strict.calls("GET", "/Systems/gpu01")) >= 2


def test_a_lasting_404_keeps_the_state_and_says_so(
    strict: QuirkProxy, redfish_emulator: Emulator, tmp_path: Path
) -> None:
    pxe = make_pxe_root(tmp_path / "pxe")
    ident, outs = _installed(strict, redfish_emulator, pxe.root)
    gone = {**outs, "redfish_system": "gpu99", "system_path": "/redfish/v1/Systems/gpu99"}
    read = RedfishNodeProvider().read(ident, gone)
    assert read.id == ident  # never None: that would delete the node from the stack's state
    kept = read.outs or {}
    # What refresh shows: the power state is not known; all the rest is as it was.
    assert kept["power_state"] == "Unknown"
    assert {k: v for k, v in kept.items() if k != "power_state"} == {
        k: v for k, v in gone.items() if k != "power_state"
    }
    # Asked more than once before giving up on this refresh.
    assert len(strict.calls("GET", "/Systems/gpu99")) == 3


def test_a_busy_bmc_is_asked_again_when_it_says(
    strict: QuirkProxy, redfish_emulator: Emulator
) -> None:
    """503 with Retry-After (DSP0266; RFC 9110 §10.2.3): wait as told, then send it again,
    a PATCH and a POST too: a 503 means the request was not acted on."""
    power_off(redfish_emulator, "gpu02")
    path = "/redfish/v1/Systems/gpu02"
    with client(strict, redfish_emulator) as session:
        strict.busy[path] = 1
        started = time.monotonic()
        assert session.system(path).power_state == "Off"
        assert time.monotonic() - started >= 1.0  # waited as Retry-After said
        strict.busy[f"{path}/Settings"] = 2  # the ETag read, then the PATCH itself
        session.set_next_boot(path, "Pxe", "UEFI")
        strict.busy[f"{path}/Actions/Oem/VendorReset"] = 1
        assert session.reset(path, "On") == "On"
    assert not any(strict.busy.values())
    assert len(strict.calls("POST", "/Actions/Oem/VendorReset")) == 2
    power_off(redfish_emulator, "gpu02")


def test_a_bmc_that_stays_busy_is_named(strict: QuirkProxy, redfish_emulator: Emulator) -> None:
    path = "/redfish/v1/Systems/gpu02"
    with client(strict, redfish_emulator) as session:
        strict.busy[path] = 10
        with pytest.raises(RedfishHttpError, match=r"HTTP 503") as caught:
            session.system(path)
    assert caught.value.status == 503
    strict.busy.clear()


def test_asynchronous_operations_are_followed_to_their_end(
    strict: QuirkProxy, redfish_emulator: Emulator, tmp_path: Path
) -> None:
    """A BMC that answers the Boot PATCH and the reset with 202 and a task monitor: the
    install waits for each task before the next step (the override before the power-on)."""
    power_off(redfish_emulator, "gpu01")
    strict.tasks = True
    pxe = make_pxe_root(tmp_path / "pxe")
    news = {**props(redfish_emulator, "gpu01", pxe.root), "bmc_address": strict.url}
    created = RedfishNodeProvider().create(news)
    assert (created.outs or {})["install_state"] == "installing"
    monitors = [s for s in strict.requests if s.path.startswith("/redfish/v1/TaskService/")]
    # Two tasks (the PATCH, the reset), each polled until done: 202, 202, then the Task.
    assert len(monitors) == 6 and not any(strict.monitors.values())
    patch_at = next(i for i, s in enumerate(strict.requests) if s.method == "PATCH")
    reset_at = next(i for i, s in enumerate(strict.requests) if s.path.endswith("VendorReset"))
    first_monitor = strict.requests.index(monitors[0])
    assert patch_at < first_monitor < reset_at  # the override's task ended before the reset
    power_off(redfish_emulator, "gpu01")


def test_a_task_that_fails_fails_the_step_with_its_message(
    strict: QuirkProxy, redfish_emulator: Emulator
) -> None:
    strict.tasks = strict.task_fails = True
    path = "/redfish/v1/Systems/gpu02"
    failure = pytest.raises(RedfishError, match=r"Exception.*boot configuration could not")
    with client(strict, redfish_emulator) as session, failure:
        session.set_next_boot(path, "Pxe", "UEFI")


# UEFI device paths as BMCs report them (UEFI text form: MAC(<address>,<if type>), then IPv4()
# for PXE over IPv4, IPv6() for PXE over IPv6, Uri() for HTTP boot).
NIC_OPTIONS = [
    {
        "Id": "Boot0001",
        "BootOptionReference": "Boot0001",
        "DisplayName": "UEFI PXEv4 (MAC:3CFDFE0000AA)",
        "UefiDevicePath": "PciRoot(0x0)/Pci(0x1,0x0)/Pci(0x0,0x0)/MAC(3CFDFE0000AA,0x1)/"
        "IPv4(0.0.0.0,0x0,DHCP,0.0.0.0,0.0.0.0,0.0.0.0)",
    },
    {
        "Id": "Boot0002",
        "BootOptionReference": "Boot0002",
        "DisplayName": "UEFI HTTPv4 (MAC:020000000001)",
        "UefiDevicePath": "PciRoot(0x0)/Pci(0x3,0x0)/Pci(0x0,0x0)/MAC(020000000001,0x1)/"
        "IPv4(0.0.0.0,0x0,DHCP,0.0.0.0,0.0.0.0,0.0.0.0)/Uri()",
    },
    {
        "Id": "Boot0003",
        "BootOptionReference": "Boot0003",
        "DisplayName": "UEFI PXEv6 (MAC:020000000001)",
        "UefiDevicePath": "PciRoot(0x0)/Pci(0x3,0x0)/Pci(0x0,0x0)/MAC(020000000001,0x1)/"
        "IPv6(0000:0000:0000:0000:0000:0000:0000:0000,0x0,Static,"
        "0000:0000:0000:0000:0000:0000:0000:0000,0x40,0000:0000:0000:0000:0000:0000:0000:0000)",
    },
    {
        "Id": "Boot0004",
        "BootOptionReference": "Boot0004",
        "DisplayName": "UEFI PXEv4 (MAC:020000000001)",
        "UefiDevicePath": "PciRoot(0x0)/Pci(0x3,0x0)/Pci(0x0,0x0)/MAC(020000000001,0x1)/"
        "IPv4(0.0.0.0,0x0,DHCP,0.0.0.0,0.0.0.0,0.0.0.0)",
    },
    {
        "Id": "Boot0005",
        "BootOptionReference": "Boot0005",
        "DisplayName": "ubuntu",
        "UefiDevicePath": "HD(1,GPT,0FC63DAF-8483-4772-8E79-3D69D8477DE4,0x800,0x100000)/"
        "\\EFI\\ubuntu\\shimx64.efi",
    },
]


def test_the_install_boots_the_nic_dnsmasq_knows(
    strict: QuirkProxy, redfish_emulator: Emulator, tmp_path: Path
) -> None:
    """With 9-12 NICs, a plain Pxe override lets the firmware pick one: where the BMC lists
    boot options, the one-time boot names the PXEv4 option of the host entry's MAC."""
    power_off(redfish_emulator, "gpu01")
    strict.boot_options = NIC_OPTIONS
    pxe = make_pxe_root(tmp_path / "pxe")
    news = {**props(redfish_emulator, "gpu01", pxe.root), "bmc_address": strict.url}
    assert news["mac"] == "02:00:00:00:00:01"
    RedfishNodeProvider().create(news)
    (patch,) = strict.calls("PATCH")
    assert patch.body == {
        "Boot": {
            "BootSourceOverrideTarget": "UefiBootNext",
            "BootSourceOverrideEnabled": "Once",
            "BootNext": "Boot0004",  # not HTTP boot, not PXE over IPv6, not another NIC
            "BootSourceOverrideMode": "UEFI",
        }
    }
    assert strict.boot_next == "Boot0004"
    power_off(redfish_emulator, "gpu01")


def test_without_an_option_for_the_mac_the_override_is_plain_pxe(
    strict: QuirkProxy, redfish_emulator: Emulator
) -> None:
    strict.boot_options = [o for o in NIC_OPTIONS if o["Id"] != "Boot0004"]
    with client(strict, redfish_emulator) as session:
        session.set_next_boot("/redfish/v1/Systems/gpu02", "Pxe", "UEFI", mac="02:00:00:00:00:01")
    (patch,) = strict.calls("PATCH")
    assert patch.body["Boot"]["BootSourceOverrideTarget"] == "Pxe"
    assert "BootNext" not in patch.body["Boot"]


def test_remediation_power_cycles_through_a_strict_bmc(
    strict: QuirkProxy, redfish_emulator: Emulator
) -> None:
    # The strict BMC offers no PowerCycle (its ActionInfo lists On, ForceOff,
    # GracefulShutdown, ForceRestart): ForceRestart goes to its vendor reset target, in a
    # session that is deleted afterwards.
    target = node_target(redfish_emulator, "gpu02", strict.url)
    with client(strict, redfish_emulator) as session:
        path = session.system_path("gpu02")
        if session.system(path).power_state != "On":
            session.reset(path, "On")
            session.wait_for_power(path, "On", timeout_s=15, poll_s=0.1)
    before = len(strict.calls("POST", "/Actions/Oem/VendorReset"))
    assert power_cycle_node(target) == "ForceRestart"
    posts = strict.calls("POST", "/Actions/Oem/VendorReset")[before:]
    assert [p.body for p in posts] == [{"ResetType": "ForceRestart"}]
    assert not strict.sessions
