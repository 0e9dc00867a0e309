"""Bare-metal servers behind Redfish BMCs: a small client, the node lifecycle, and the Pulumi
dynamic provider that runs that lifecycle for `BareMetalNode` resources.

Every call has a timeout and every failure says which BMC, what was asked and what came back.
The lifecycle (install over PXE, restart, read, power off) is plain functions so that the CLI
can use it too; `RedfishNodeProvider` only translates Pulumi property bags to and from them.

The provider class lives in this installed package, not in `stacks/`, because Pulumi pickles a
dynamic provider by reference: the provider host process re-imports its module, and it can
import `myriad` from the project's virtualenv but not the program folder (pulumi/pulumi#7453).
"""

from __future__ import annotations

import base64
import contextlib
import ipaddress
import json
import logging
import socket
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pulumi.dynamic import (
    CheckFailure,
    CheckResult,
    CreateResult,
    DiffResult,
    ReadResult,
    ResourceProvider,
    UpdateResult,
)

from myriad.errors import NodeUnreachable, RedfishError, RedfishHttpError, RedfishTimeout

logger = logging.getLogger(__name__)
logger.addHandler(logging.NullHandler())

SYSTEMS = "/redfish/v1/Systems"
_MAX_REDIRECTS = 3


@dataclass(frozen=True, slots=True)
class BmcCredentials:
    username: str
    password: str = field(repr=False)


def bmc_base_url(address: str) -> str:
    """`10.1.0.5` → `https://10.1.0.5`: a bare BMC address means HTTPS, as BMCs serve it."""
    url = address if "://" in address else f"https://{address}"
    parts = urllib.parse.urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def ssh_banner_marker(node: str, os: str) -> str:
    """The text an installed node appends to its SSH banner (sshd `VersionAddendum`).

    Waiting for it, rather than for any SSH answer, tells the freshly installed system from
    the installer's live session and from the system it replaces, which both may answer on
    port 22 too, and catches a node that was handed another node's address.
    """
    return f"myriad-{node}-{os}"


@dataclass(frozen=True, slots=True)
class SystemState:
    path: str
    power_state: str
    health: str | None
    state: str | None
    boot_target: str | None
    boot_enabled: str | None


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    # Redirects are followed by hand: urllib drops the method and body of a redirected PATCH.
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


class RedfishClient:
    """Basic-auth Redfish over HTTP(S); `timeout_s` bounds each connect and each read."""

    def __init__(
        self,
        address: str,
        credentials: BmcCredentials,
        *,
        timeout_s: float = 30.0,
        verify_tls: bool = True,
        ca_file: str | None = None,
    ) -> None:
        if timeout_s <= 0:
            raise ValueError("timeout_s must be positive")
        self.base_url = bmc_base_url(address)
        self.timeout_s = timeout_s
        token = f"{credentials.username}:{credentials.password}".encode()
        self._authorization = "Basic " + base64.b64encode(token).decode("ascii")
        context = ssl.create_default_context(cafile=ca_file)
        if not verify_tls:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        self._opener = urllib.request.build_opener(
            _NoRedirect(), urllib.request.HTTPSHandler(context=context)
        )

    def __repr__(self) -> str:
        return f"RedfishClient({self.base_url!r})"

    def get(self, path: str) -> dict[str, Any]:
        return self._request("GET", path)

    def patch(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        return self._request("PATCH", path, body)

    def post(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        return self._request("POST", path, body)

    def system_path(self, system_id: str | None) -> str:
        """The system's path; without an id, the BMC must manage exactly one system."""
        if system_id:
            return f"{SYSTEMS}/{urllib.parse.quote(system_id, safe='')}"
        members = self.get(SYSTEMS).get("Members", [])
        paths: list[str] = [
            m["@odata.id"]
            for m in members
            if isinstance(m, Mapping) and isinstance(m.get("@odata.id"), str)
        ]
        if len(paths) != 1:
            raise RedfishError(
                f"BMC {self.base_url} manages {len(paths)} systems, not one; name the server "
                f"with redfish_system in the spec's host entry (members: {', '.join(paths)})"
            )
        return paths[0]

    def system(self, path: str) -> SystemState:
        body = self.get(path)
        power = body.get("PowerState")
        if not isinstance(power, str):
            raise RedfishError(f"BMC {self.base_url}: {path} reports no PowerState")
        status = _mapping(body.get("Status"))
        boot = _mapping(body.get("Boot"))
        return SystemState(
            path=path,
            power_state=power,
            health=status.get("Health"),
            state=status.get("State"),
            boot_target=boot.get("BootSourceOverrideTarget"),
            boot_enabled=boot.get("BootSourceOverrideEnabled"),
        )

    def set_next_boot(self, path: str, target: str = "Pxe") -> None:
        """Boot from `target` once; the override clears itself, so the installed disk boots next."""
        self.patch(
            path,
            {"Boot": {"BootSourceOverrideTarget": target, "BootSourceOverrideEnabled": "Once"}},
        )

    def reset(self, path: str, reset_type: str) -> None:
        self.post(f"{path}/Actions/ComputerSystem.Reset", {"ResetType": reset_type})

    def wait_for_power(
        self, path: str, want: str, *, timeout_s: float, poll_s: float = 2.0
    ) -> SystemState:
        deadline = time.monotonic() + timeout_s
        while True:
            state = self.system(path)
            if state.power_state == want:
                return state
            if time.monotonic() + poll_s > deadline:
                raise RedfishTimeout(
                    f"BMC {self.base_url}: {path} is still {state.power_state} after "
                    f"{timeout_s:g}s, not {want}"
                )
            time.sleep(poll_s)

    def _request(
        self, method: str, path: str, body: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        url = urllib.parse.urljoin(self.base_url, path)
        data = None if body is None else json.dumps(body).encode()
        for _ in range(_MAX_REDIRECTS + 1):
            request = urllib.request.Request(url, data=data, method=method)
            request.add_header("Authorization", self._authorization)
            request.add_header("Accept", "application/json")
            request.add_header("OData-Version", "4.0")
            if data is not None:
                request.add_header("Content-Type", "application/json")
            try:
                with self._opener.open(request, timeout=self.timeout_s) as response:
                    raw = response.read()
                break
            except urllib.error.HTTPError as exc:
                location = exc.headers.get("Location") if exc.code in (301, 302, 307, 308) else None
                if location is None:
                    raise self._http_error(method, url, exc) from None
                url = self._same_bmc(urllib.parse.urljoin(url, location), method, path)
            except TimeoutError as exc:
                raise RedfishTimeout(
                    f"BMC {self.base_url}: {method} {path} got no answer within {self.timeout_s:g}s"
                ) from exc
            except urllib.error.URLError as exc:
                if isinstance(exc.reason, TimeoutError):
                    raise RedfishTimeout(
                        f"BMC {self.base_url}: {method} {path} got no answer within "
                        f"{self.timeout_s:g}s"
                    ) from exc
                raise RedfishError(f"cannot reach BMC {self.base_url}: {exc.reason}") from exc
            except OSError as exc:
                raise RedfishError(f"BMC {self.base_url}: {method} {path} failed: {exc}") from exc
        else:
            raise RedfishError(f"BMC {self.base_url}: {method} {path} redirects in a loop")
        if not raw.strip():
            return {}
        try:
            document = json.loads(raw)
        except ValueError:
            raise RedfishError(
                f"BMC {self.base_url}: {method} {path} answered with something other than JSON"
            ) from None
        if not isinstance(document, dict):
            raise RedfishError(f"BMC {self.base_url}: {method} {path} answered with a non-object")
        return document

    def _same_bmc(self, url: str, method: str, path: str) -> str:
        # Credentials go only where they were meant for: a redirect to another host is refused.
        if bmc_base_url(url) != self.base_url:
            raise RedfishError(
                f"BMC {self.base_url}: {method} {path} redirects to another host ({url}); "
                "refusing to send the BMC credentials there"
            )
        return url

    def _http_error(self, method: str, url: str, exc: urllib.error.HTTPError) -> RedfishHttpError:
        path = urllib.parse.urlsplit(url).path
        detail = _redfish_message(exc)
        text = f"BMC {self.base_url}: {method} {path} failed with HTTP {exc.code} {exc.reason}"
        if detail:
            text += f": {detail}"
        if exc.code in (401, 403):
            text += " (check the BMC credentials in the stack's Pulumi secret)"
        return RedfishHttpError(text, exc.code)


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _redfish_message(exc: urllib.error.HTTPError) -> str:
    """The human part of a Redfish error body: `error.message` and extended messages."""
    with contextlib.suppress(Exception):
        document = json.loads(exc.read() or b"{}")
        error = document.get("error", {}) if isinstance(document, dict) else {}
        messages = [error.get("message")] if isinstance(error.get("message"), str) else []
        for info in error.get("@Message.ExtendedInfo", []) or []:
            if isinstance(info, Mapping) and isinstance(info.get("Message"), str):
                messages.append(info["Message"])
        return "; ".join(m for m in messages if m)
    return ""


def wait_for_ssh(
    address: str,
    port: int = 22,
    *,
    timeout_s: float,
    banner_marker: str | None = None,
    poll_s: float = 5.0,
    connect_timeout_s: float = 5.0,
) -> str:
    """Wait until `address:port` greets with an SSH banner (holding `banner_marker`, if given).

    Returns the banner. Raises NodeUnreachable with the last thing seen once `timeout_s` passes.
    """
    deadline = time.monotonic() + timeout_s
    last = "no answer yet"
    while True:
        remaining = max(deadline - time.monotonic(), 0.01)
        try:
            banner = _read_banner(address, port, min(connect_timeout_s, remaining))
        except OSError as exc:
            last = exc.strerror or str(exc) or type(exc).__name__
        else:
            if not banner.startswith("SSH-"):
                last = f"answers, but not with an SSH banner ({banner[:60]!r})"
            elif banner_marker is not None and banner_marker not in banner:
                last = f"answers as {banner!r}, which lacks {banner_marker!r} (not yet installed?)"
            else:
                return banner
        if time.monotonic() + poll_s > deadline:
            raise NodeUnreachable(
                f"{address}:{port} did not answer on SSH within {timeout_s:g}s; last: {last}"
            )
        time.sleep(poll_s)


def _read_banner(address: str, port: int, timeout_s: float) -> str:
    with socket.create_connection((address, port), timeout=timeout_s) as conn:
        conn.settimeout(timeout_s)
        received = b""
        # RFC 4253 §4.2: the identification line is at most 255 bytes, CR LF terminated.
        while b"\n" not in received and len(received) < 255:
            chunk = conn.recv(255 - len(received))
            if not chunk:
                break
            received += chunk
    return received.split(b"\n", 1)[0].decode("ascii", "replace").strip()


@dataclass(frozen=True, slots=True)
class NodeTarget:
    """One bare-metal node as the lifecycle needs it: where its BMC is and how to reach it."""

    name: str
    bmc_address: str
    credentials: BmcCredentials
    address: str
    os: str
    redfish_system: str | None = None
    ssh_port: int = 22
    ssh_timeout_s: float = 3600.0
    power_timeout_s: float = 600.0
    request_timeout_s: float = 30.0
    verify_tls: bool = True
    ca_file: str | None = None
    poll_s: float = 5.0

    def client(self) -> RedfishClient:
        return RedfishClient(
            self.bmc_address,
            self.credentials,
            timeout_s=self.request_timeout_s,
            verify_tls=self.verify_tls,
            ca_file=self.ca_file,
        )


@dataclass(frozen=True, slots=True)
class NodeState:
    system_path: str
    power_state: str
    health: str | None
    boot_target: str | None


def _node_state(state: SystemState) -> NodeState:
    return NodeState(state.path, state.power_state, state.health, state.boot_target)


def boot_node(target: NodeTarget, *, pxe: bool) -> NodeState:
    """Power the node on (or reset it if on), from PXE once if `pxe`, and wait until it answers.

    With `pxe` the node reinstalls from the PXE server's autoinstall. The answer that counts is
    an SSH banner with the node's marker for `target.os` (see `ssh_banner_marker`).
    """
    client = target.client()
    path = client.system_path(target.redfish_system)
    if pxe:
        client.set_next_boot(path, "Pxe")
    was_on = client.system(path).power_state == "On"
    logger.info("%s: %s via %s", target.name, "reset" if was_on else "power on", client.base_url)
    client.reset(path, "ForceRestart" if was_on else "On")
    client.wait_for_power(path, "On", timeout_s=target.power_timeout_s, poll_s=target.poll_s)
    wait_for_ssh(
        target.address,
        target.ssh_port,
        timeout_s=target.ssh_timeout_s,
        banner_marker=ssh_banner_marker(target.name, target.os),
        poll_s=target.poll_s,
    )
    return _node_state(client.system(path))


def read_node(target: NodeTarget) -> NodeState | None:
    """The node's power state and health; None when the BMC no longer has the system."""
    client = target.client()
    try:
        path = client.system_path(target.redfish_system)
        return _node_state(client.system(path))
    except RedfishHttpError as exc:
        if exc.status == 404:
            return None
        raise


def power_off_node(target: NodeTarget) -> NodeState:
    """Shut the node down gracefully, forcing it off if it has not stopped in time."""
    client = target.client()
    path = client.system_path(target.redfish_system)
    if client.system(path).power_state == "Off":
        return _node_state(client.system(path))
    client.reset(path, "GracefulShutdown")
    try:
        return _node_state(
            client.wait_for_power(
                path, "Off", timeout_s=target.power_timeout_s, poll_s=target.poll_s
            )
        )
    except RedfishTimeout:
        logger.warning("%s: no graceful shutdown in time; forcing power off", target.name)
    client.reset(path, "ForceOff")
    return _node_state(
        client.wait_for_power(path, "Off", timeout_s=target.power_timeout_s, poll_s=target.poll_s)
    )


# The Pulumi side. Property names are the resource's inputs; outputs add the observed state.
IDENTITY_KEYS = ("name", "mac", "bmc_address", "redfish_system")
INPUT_KEYS = (
    *IDENTITY_KEYS,
    "address",
    "os",
    "ssh_port",
    "ssh_timeout_s",
    "power_timeout_s",
    "request_timeout_s",
    "verify_tls",
    "ca_file",
    "poll_s",
    "bmc_username",
    "bmc_password",
)
SECRET_KEYS = ("bmc_username", "bmc_password")
OUTPUT_KEYS = ("system_path", "power_state", "health")


def _check_props(props: Mapping[str, Any]) -> list[CheckFailure]:
    failures: list[CheckFailure] = []

    def need(key: str, ok: Callable[[Any], bool], reason: str) -> None:
        if not ok(props.get(key)):
            failures.append(CheckFailure(key, reason))

    def positive(value: Any) -> bool:
        return isinstance(value, int | float) and not isinstance(value, bool) and value > 0

    def text(value: Any) -> bool:
        return isinstance(value, str) and bool(value)

    def ipv4(value: Any) -> bool:
        with contextlib.suppress(ValueError):
            return ipaddress.ip_address(value).version == 4
        return False

    for key in ("name", "mac", "bmc_address", "os", "bmc_username", "bmc_password"):
        need(key, text, f"{key} must be a non-empty string")
    need("address", ipv4, "address must be an IPv4 address")
    need("ssh_port", lambda v: positive(v) and int(v) == v and v < 65536, "ssh_port: 1-65535")
    for key in ("ssh_timeout_s", "power_timeout_s", "request_timeout_s", "poll_s"):
        need(key, positive, f"{key} must be a positive number of seconds")
    need("verify_tls", lambda v: isinstance(v, bool), "verify_tls must be true or false")
    return failures


def target_from_props(props: Mapping[str, Any]) -> NodeTarget:
    return NodeTarget(
        name=str(props["name"]),
        bmc_address=str(props["bmc_address"]),
        credentials=BmcCredentials(str(props["bmc_username"]), str(props["bmc_password"])),
        address=str(props["address"]),
        os=str(props["os"]),
        redfish_system=props.get("redfish_system") or None,
        ssh_port=int(props.get("ssh_port", 22)),
        ssh_timeout_s=float(props.get("ssh_timeout_s", 3600.0)),
        power_timeout_s=float(props.get("power_timeout_s", 600.0)),
        request_timeout_s=float(props.get("request_timeout_s", 30.0)),
        verify_tls=bool(props.get("verify_tls", True)),
        ca_file=props.get("ca_file") or None,
        poll_s=float(props.get("poll_s", 5.0)),
    )


def _outs(props: Mapping[str, Any], state: NodeState) -> dict[str, Any]:
    outs = {key: props.get(key) for key in INPUT_KEYS}
    outs.update(system_path=state.system_path, power_state=state.power_state, health=state.health)
    return outs


class RedfishNodeProvider(ResourceProvider):
    """create: PXE once, power on, wait for SSH; read: power and health, so that `pulumi refresh`
    shows drift; update: reimage when the OS changes, boot when the address changed or the node
    was found off; delete: power off.
    """

    def check(self, _olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        return CheckResult(news, _check_props(news))

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        replaces = [key for key in IDENTITY_KEYS if olds.get(key) != news.get(key)]
        changed = [key for key in INPUT_KEYS if olds.get(key) != news.get(key)]
        drifted = olds.get("power_state") != "On"
        return DiffResult(
            changes=bool(changed) or drifted,
            replaces=replaces,
            # The same server cannot be installed twice at once.
            delete_before_replace=True,
        )

    def create(self, props: dict[str, Any]) -> CreateResult:
        target = target_from_props(props)
        state = boot_node(target, pxe=True)
        return CreateResult(
            bmc_base_url(target.bmc_address) + state.system_path, _outs(props, state)
        )

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        state = read_node(target_from_props(props))
        if state is None:
            return ReadResult(None, {})
        return ReadResult(id_, _outs(props, state))

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        target = target_from_props(news)
        if olds.get("os") != news.get("os"):
            state = boot_node(target, pxe=True)
        elif olds.get("address") != news.get("address") or olds.get("power_state") != "On":
            state = boot_node(target, pxe=False)
        else:
            current = read_node(target)
            if current is None:
                raise RedfishError(f"{target.name}: the BMC no longer has this system")
            state = current
        return UpdateResult(_outs(news, state))

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        power_off_node(target_from_props(props))
