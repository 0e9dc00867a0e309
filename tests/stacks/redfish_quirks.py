"""A proxy in front of sushy-tools' emulator that holds clients to what strict BMCs demand.

sushy-tools (the emulator the tests run) is lenient: basic auth everywhere, no ETags, PATCH
on the system itself, the reset action where DMTF's examples put it. BMCs in the field are
not, and each strictness below is one a real BMC family is known for:

- sessions only (DSP0266 "Session login"): the service root links
  /redfish/v1/SessionService/Sessions; a POST there with UserName and Password returns an
  `X-Auth-Token` header and the session's `Location`; basic auth is refused with 401, and a
  DELETE of the session ends it (BMCs hold only a few sessions at once);
- optionally (`closed_root`) a service root that asks for credentials too, which DSP0266
  leaves open but some BMCs do not;
- `If-Match` (AMI MegaRAC, common on HGX boards): a PATCH without the resource's current ETag
  is refused with 428 Precondition Required, one with a stale ETag with 412;
- a settings object (iDRAC 10): the system names `@Redfish.Settings.SettingsObject`, and only
  that URI takes the Boot PATCH (405 on the system itself);
- `BootSourceOverrideMode` required in the Boot PATCH (400 without it);
- the reset action at a vendor URI named only by the action's `target`, its ResetType values
  given only by `@Redfish.ActionInfo` (400 for any other value);
- on demand (`fail_once`), one answer of a given status to the next GET of a path: a BMC that
  reboots, or whose board was just swapped, answers 404 for a system it serves again later;
- on demand (`busy`), 503 Service Unavailable with `Retry-After: 1` to the next requests of
  any method to a path, as a BMC with a full request queue does (DSP0266 lets a service say
  when to come back; RFC 9110 §10.2.3 defines the header);
- optionally (`tasks`), the reset and the Boot PATCH as asynchronous operations (DSP0266
  "Asynchronous operations"): applied, then answered 202 Accepted with the `Location` of a
  task monitor, which answers 202 (with `Retry-After`) twice and then the Task resource,
  `TaskState` `Completed` (or `Exception` with a message, `task_fails`);
- optionally (`boot_options`), the system's UEFI boot options (ComputerSystem `Boot.BootOptions`,
  BootOption `BootOptionReference` and `UefiDevicePath`, DMTF schemas) and a one-time boot of
  one of them: `BootSourceOverrideTarget` `UefiBootNext` with `Boot.BootNext` naming it, as a
  server with many NICs offers so that the boot NIC is chosen by the client, not the firmware.

Every request is recorded (method, path, auth kind) so tests can check what was sent.
"""

from __future__ import annotations

import base64
import hashlib
import http.server
import json
import secrets
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

SESSIONS = "/redfish/v1/SessionService/Sessions"
MONITORS = "/redfish/v1/TaskService/TaskMonitors"
ALLOWED_RESETS = ["On", "ForceOff", "GracefulShutdown", "ForceRestart"]


@dataclass
class Seen:
    method: str
    path: str
    auth: str  # "basic", "token", "none"
    if_match: str | None
    body: Any


@dataclass
class QuirkProxy:
    backend: str
    url: str = ""
    requests: list[Seen] = field(default_factory=list)
    sessions: dict[str, tuple[str, str]] = field(default_factory=dict)  # token -> (id, basic)
    deleted: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    closed_root: bool = False  # the service root, too, asks for credentials
    no_secure_boot: bool = False  # the system links a SecureBoot resource it does not serve
    fail_once: dict[str, int] = field(default_factory=dict)  # path -> status, for one GET
    busy: dict[str, int] = field(default_factory=dict)  # path -> how many 503s to answer
    tasks: bool = False  # reset and Boot PATCH answer 202 with a task monitor
    task_fails: bool = False  # ...whose task ends in Exception
    monitors: dict[str, int] = field(default_factory=dict)  # monitor path -> polls left
    boot_options: list[dict[str, str]] = field(default_factory=list)  # Id, reference, path
    boot_next: str | None = None  # the BootNext a UefiBootNext override set

    def calls(self, method: str, suffix: str = "") -> list[Seen]:
        with self.lock:
            return [s for s in self.requests if s.method == method and s.path.endswith(suffix)]


def _etag(body: dict[str, Any]) -> str:
    digest = hashlib.sha256(json.dumps(body.get("Boot"), sort_keys=True).encode()).hexdigest()
    return f'W/"{digest[:16]}"'


def _handler(proxy: QuirkProxy) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *_: Any) -> None:
            return None

        # plumbing
        def _body(self) -> Any:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            return json.loads(raw) if raw else None

        def _send(
            self, status: int, body: Any = None, headers: dict[str, str] | None = None
        ) -> None:
            data = b"" if body is None else json.dumps(body).encode()
            self.send_response(status)
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            if data:
                self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _error(self, status: int, message: str) -> None:
            self._send(status, {"error": {"code": "Base.1.0.GeneralError", "message": message}})

        def _backend(self, method: str, path: str, basic: str, body: Any = None) -> tuple[int, Any]:
            data = None if body is None else json.dumps(body).encode()
            url = proxy.backend + path
            for _ in range(3):
                request = urllib.request.Request(url, data=data, method=method)
                request.add_header("Authorization", basic)
                if data is not None:
                    request.add_header("Content-Type", "application/json")
                try:
                    with urllib.request.urlopen(request, timeout=10) as response:
                        raw = response.read()
                        return response.status, json.loads(raw) if raw.strip() else None
                except urllib.error.HTTPError as exc:
                    location = exc.headers.get("Location")
                    if exc.code in (301, 302, 307, 308) and location:
                        # sushy-tools redirects a system's name to its UUID; follow it with
                        # the same method and body, as the BMC behind the proxy would.
                        url = urllib.parse.urljoin(url, location)
                        continue
                    raw = exc.read()
                    try:
                        return exc.code, json.loads(raw) if raw.strip() else None
                    except ValueError:
                        return exc.code, {"error": {"message": raw.decode(errors="replace")}}
            return 508, {"error": {"message": "redirect loop behind the proxy"}}

        def _auth(self) -> tuple[str, str | None]:
            token = self.headers.get("X-Auth-Token")
            if token is not None:
                with proxy.lock:
                    session = proxy.sessions.get(token)
                return "token", session[1] if session else None
            if self.headers.get("Authorization", "").startswith("Basic "):
                return "basic", None
            return "none", None

        def _handle(self, method: str) -> None:
            path = self.path.split("?", 1)[0]
            body = self._body() if method in ("POST", "PATCH") else None
            kind, basic = self._auth()
            with proxy.lock:
                proxy.requests.append(Seen(method, path, kind, self.headers.get("If-Match"), body))
            with proxy.lock:
                status = proxy.fail_once.pop(path, None) if method == "GET" else None
            if status is not None:
                self._error(status, "resource not found" if status == 404 else "unavailable")
                return
            with proxy.lock:
                busy = proxy.busy.get(path, 0)
                if busy:
                    proxy.busy[path] = busy - 1
            if busy:
                self._send(
                    503,
                    {
                        "error": {
                            "code": "Base.1.0.ServiceTemporarilyUnavailable",
                            "message": "busy",
                        }
                    },
                    {"Retry-After": "1"},
                )
                return
            if path.startswith(MONITORS) and method == "GET" and basic is not None:
                self._monitor(path)
                return
            if method == "GET" and path.rstrip("/") == "/redfish/v1" and proxy.closed_root:
                self._error(401, "authentication required")
                return
            if method == "GET" and path.rstrip("/") == "/redfish/v1":
                _, root = self._backend("GET", "/redfish/v1/", "")
                root = dict(root or {})
                root["SessionService"] = {"@odata.id": "/redfish/v1/SessionService"}
                root.setdefault("Links", {})["Sessions"] = {"@odata.id": SESSIONS}
                self._send(200, root)
                return
            if method == "POST" and path == SESSIONS:
                self._login(body or {})
                return
            if kind == "basic":
                self._error(401, "basic authentication is disabled; create a session")
                return
            if basic is None:
                self._error(401, "no valid session")
                return
            if method == "DELETE" and path.startswith(SESSIONS + "/"):
                self._logout(path)
                return
            self._resource(method, path, basic, body)

        def _login(self, body: dict[str, Any]) -> None:
            user, password = body.get("UserName"), body.get("Password")
            basic = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
            status, _ = self._backend("GET", "/redfish/v1/Systems", basic)
            if status != 200:
                self._error(401, "invalid credentials")
                return
            token, ident = secrets.token_hex(16), secrets.token_hex(4)
            with proxy.lock:
                proxy.sessions[token] = (ident, basic)
            location = f"{SESSIONS}/{ident}"
            self._send(
                201,
                {"@odata.id": location, "Id": ident, "UserName": user},
                {"X-Auth-Token": token, "Location": location},
            )

        def _accepted(self, status: int, answer: Any) -> None:
            """The operation's own answer, or (with `tasks`) 202 and a task monitor for it."""
            if not proxy.tasks or status >= 300:
                self._send(status, answer)
                return
            monitor = f"{MONITORS}/{secrets.token_hex(4)}"
            with proxy.lock:
                proxy.monitors[monitor] = 2
            self._send(202, None, {"Location": monitor, "Retry-After": "1"})

        def _monitor(self, path: str) -> None:
            with proxy.lock:
                left = proxy.monitors.get(path)
                if left:
                    proxy.monitors[path] = left - 1
            if left is None:
                self._error(404, "no such task monitor")
            elif left:
                self._send(202, None, {"Location": path, "Retry-After": "1"})
            else:
                failed = proxy.task_fails
                self._send(
                    200,
                    {
                        "@odata.type": "#Task.v1_7_4.Task",
                        "Id": path.rsplit("/", 1)[1],
                        "TaskState": "Exception" if failed else "Completed",
                        "TaskStatus": "Critical" if failed else "OK",
                        "Messages": (
                            [{"Message": "The boot configuration could not be applied."}]
                            if failed
                            else []
                        ),
                    },
                )

        def _logout(self, path: str) -> None:
            ident = path.rsplit("/", 1)[1]
            with proxy.lock:
                tokens = [t for t, (i, _) in proxy.sessions.items() if i == ident]
                for token in tokens:
                    del proxy.sessions[token]
                proxy.deleted.extend([ident] if tokens else [])
            self._send(204 if tokens else 404)

        def _resource(self, method: str, path: str, basic: str, body: Any) -> None:
            parts = path.rstrip("/").split("/")
            system = "/".join(parts[:5]) if path.startswith("/redfish/v1/Systems/") else None
            if system and path.rstrip("/") == system:
                self._system(method, system, basic, body)
            elif system and path == f"{system}/Settings":
                self._settings(method, system, basic, body)
            elif system and path == f"{system}/ResetActionInfo" and method == "GET":
                self._send(
                    200,
                    {
                        "@odata.id": path,
                        "Parameters": [
                            {
                                "Name": "ResetType",
                                "Required": True,
                                "DataType": "String",
                                "AllowableValues": ALLOWED_RESETS,
                            }
                        ],
                    },
                )
            elif system and path == f"{system}/Actions/Oem/VendorReset" and method == "POST":
                reset = (body or {}).get("ResetType")
                if reset not in ALLOWED_RESETS:
                    self._error(400, f"ResetType {reset} is not allowed")
                    return
                status, answer = self._backend(
                    "POST", f"{system}/Actions/ComputerSystem.Reset", basic, body
                )
                self._accepted(status, answer)
            elif system and path == f"{system}/BootOptions" and proxy.boot_options:
                members = [{"@odata.id": f"{path}/{o['Id']}"} for o in proxy.boot_options]
                self._send(200, {"Members": members, "Members@odata.count": len(members)})
            elif system and path.startswith(f"{system}/BootOptions/") and proxy.boot_options:
                ident = path.rsplit("/", 1)[1]
                found = [o for o in proxy.boot_options if o["Id"] == ident]
                if found:
                    self._send(200, {"@odata.id": path, **found[0]})
                else:
                    self._error(404, "no such boot option")
            elif system and path == f"{system}/SecureBoot" and proxy.no_secure_boot:
                self._error(404, "resource not found")
            elif path.endswith("/Actions/ComputerSystem.Reset"):
                self._error(404, "no such action URI; use the action's target")
            else:
                status, answer = self._backend(method, path, basic, body)
                self._send(status, answer)

        def _system(self, method: str, system: str, basic: str, body: Any) -> None:
            if method == "PATCH":
                self._error(405, "PATCH the settings object named by @Redfish.Settings")
                return
            status, answer = self._backend(method, system, basic, body)
            if status != 200 or not isinstance(answer, dict):
                self._send(status, answer)
                return
            if proxy.boot_options:
                boot = answer.setdefault("Boot", {})
                boot["BootOptions"] = {"@odata.id": f"{system}/BootOptions"}
                boot["BootOrder"] = [o["BootOptionReference"] for o in proxy.boot_options]
                allowed = boot.setdefault("BootSourceOverrideTarget@Redfish.AllowableValues", [])
                allowed.append("UefiBootNext")
                if proxy.boot_next is not None:
                    boot["BootNext"] = proxy.boot_next
                    boot["BootSourceOverrideTarget"] = "UefiBootNext"
                    boot["BootSourceOverrideEnabled"] = "Once"
            answer["@Redfish.Settings"] = {
                "@odata.type": "#Settings.v1_3_5.Settings",
                "SettingsObject": {"@odata.id": f"{system}/Settings"},
            }
            action = answer.get("Actions", {}).get("#ComputerSystem.Reset", {})
            action.pop("ResetType@Redfish.AllowableValues", None)
            action["target"] = f"{system}/Actions/Oem/VendorReset"
            action["@Redfish.ActionInfo"] = f"{system}/ResetActionInfo"
            self._send(200, answer, {"ETag": _etag(answer)})

        def _settings(self, method: str, system: str, basic: str, body: Any) -> None:
            status, current = self._backend("GET", system, basic)
            if status != 200 or not isinstance(current, dict):
                self._send(status, current)
                return
            etag = _etag(current)
            if method == "GET":
                self._send(
                    200,
                    {"@odata.id": f"{system}/Settings", "Boot": current.get("Boot")},
                    {"ETag": etag},
                )
                return
            if method != "PATCH":
                self._error(405, f"{method} not allowed")
                return
            given = self.headers.get("If-Match")
            if given is None:
                self._error(428, "If-Match with the resource's ETag is required")
                return
            if given != etag:
                self._error(412, "ETag does not match the resource")
                return
            boot = (body or {}).get("Boot") or {}
            if "BootSourceOverrideMode" not in boot:
                self._error(400, "BootSourceOverrideMode is required with a boot override")
                return
            if boot.get("BootSourceOverrideTarget") == "UefiBootNext":
                references = [o["BootOptionReference"] for o in proxy.boot_options]
                if boot.get("BootNext") not in references:
                    self._error(400, f"BootNext must be one of BootOrder {references}")
                    return
                if boot.get("BootSourceOverrideEnabled") != "Once":
                    self._error(400, "UefiBootNext is a one-time boot (Once)")
                    return
                with proxy.lock:
                    proxy.boot_next = boot["BootNext"]
                self._accepted(204, None)
                return
            status, answer = self._backend("PATCH", system, basic, body)
            self._accepted(status, answer)

        def do_GET(self) -> None:  # the handler's method names
            self._handle("GET")

        def do_POST(self) -> None:
            self._handle("POST")

        def do_PATCH(self) -> None:
            self._handle("PATCH")

        def do_DELETE(self) -> None:
            self._handle("DELETE")

    return Handler


@contextmanager
def quirk_proxy(backend: str) -> Iterator[QuirkProxy]:
    proxy = QuirkProxy(backend)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(proxy))
    server.daemon_threads = True
    proxy.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield proxy
    finally:
        server.shutdown()
        server.server_close()
