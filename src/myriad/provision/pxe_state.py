"""Which nodes the PXE server installs, and how far each install has come.

The PXE bundle (`python -m stacks.pxe --out ROOT`) holds each node's installer script under
`installers/`. A node is *flagged* while its script is also at `http/nodes/<mac>.ipxe`, the
path the first iPXE script chains to; any other boot goes to the local disk. So a node
installs only between `flag` (the provider's create, or a reimage) and the end of its
install (the installed system's callback, the provisioning wait seeing it answer, or the
wait giving up) — never again on a later reboot.

Each node's install is one small JSON record under `state/nodes/`, replaced atomically: the
state file the provisioning wait resumes from, and what the provider's `read` reports.

    queued ──(a free slot)──> installing ──(callback)──> installed ──(SSH banner)──> up
       └───────────────(deadline passed)───────────────> failed

At most `limit` nodes are `installing` at once (the spec's `parallel_installs`): the rest
wait `queued`, powered off, until the provisioning wait starts them.

Image mode's seed (it holds the munge key) is guarded by a one-time token per install:
flagging a node draws a fresh token, writes it into the installer script it serves (on the
kernel line, where the installer's late-commands read it from /proc/cmdline) and keeps it
under `state/tokens/` (0600). The PXE server gives the seed only for that token, only while
the node is flagged, only to the node's address, and once; the end of the install removes it.
"""

from __future__ import annotations

import contextlib
import fcntl
import hmac
import json
import os
import secrets
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Literal

from myriad.errors import PxeStateError
from myriad.fsutil import atomic_write_text

HOSTS_FILE = "hosts.json"
State = Literal["queued", "installing", "installed", "up", "failed"]
STATES: tuple[State, ...] = ("queued", "installing", "installed", "up", "failed")
# Still the PXE server's business: the flag stays until the install has finished.
FLAGGED: frozenset[str] = frozenset({"queued", "installing"})
FINISHED: frozenset[str] = frozenset({"up", "failed"})
# In an installer script, where `flag` puts the install's one-time seed token.
SEED_TOKEN_MARK = "@MYRIAD_SEED_TOKEN@"
# The token's URL-safe alphabet (secrets.token_urlsafe), the only thing a request may carry.
_TOKEN_BYTES = 24
# The detail of a slot claimed for a queued node whose power-on has not been confirmed yet:
# a wait stopped at that moment powers it on when it runs again.
POWERING_ON = "powering on"


def mac_file(mac: str) -> str:
    return mac.lower().replace(":", "-") + ".ipxe"


def installer_path(mac: str) -> str:
    """Where the bundle keeps a node's installer script (not served)."""
    return f"installers/{mac_file(mac)}"


def served_path(mac: str) -> str:
    """Where the first iPXE script looks for it: present only while the node is flagged."""
    return f"http/nodes/{mac_file(mac)}"


@dataclass(frozen=True, slots=True)
class InstallRecord:
    name: str
    mac: str
    install_id: str
    state: State
    started: float
    updated: float
    detail: str = ""

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1, sort_keys=True) + "\n"


class PxeState:
    """The PXE server's folder: the rendered bundle plus `state/`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.state_dir = root / "state" / "nodes"

    def __repr__(self) -> str:
        return f"PxeState({str(self.root)!r})"

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """One writer at a time across processes (provider host, wait, callback server)."""
        self.state_dir.mkdir(parents=True, exist_ok=True)
        with (self.root / "state" / ".lock").open("a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def hosts(self) -> dict[str, dict[str, str]]:
        path = self.root / HOSTS_FILE
        try:
            hosts = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise PxeStateError(
                f"{path} is missing: write the PXE bundle there first "
                "(python -m stacks.pxe --stack ENV --out DIR)"
            ) from None
        except ValueError as exc:
            raise PxeStateError(f"{path}: not JSON ({exc})") from None
        if not isinstance(hosts, dict):
            raise PxeStateError(f"{path}: expected an object of hosts by name")
        return hosts

    def record(self, name: str) -> InstallRecord | None:
        path = self.state_dir / f"{name}.json"
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            record = InstallRecord(**data)
        except FileNotFoundError:
            return None
        except (ValueError, TypeError) as exc:
            raise PxeStateError(f"{path}: not an install record ({exc})") from None
        if record.state not in STATES:
            raise PxeStateError(f"{path}: unknown state {record.state!r}")
        return record

    def records(self) -> list[InstallRecord]:
        if not self.state_dir.is_dir():
            return []
        names = sorted(p.stem for p in self.state_dir.glob("*.json"))
        return [r for r in (self.record(n) for n in names) if r is not None]

    def save(self, record: InstallRecord) -> None:
        atomic_write_text(self.state_dir / f"{record.name}.json", record.to_json())

    def _token_file(self, name: str) -> Path:
        return self.root / "state" / "tokens" / name

    def seed_token_valid(self, name: str, token: str) -> bool:
        """Whether `token` is `name`'s current, unused seed token (`name` flagged)."""
        record = self.record(name)
        if record is None or record.state not in FLAGGED or not token:
            return False
        try:
            expected = self._token_file(name).read_text(encoding="ascii").strip()
        except (FileNotFoundError, UnicodeDecodeError):
            return False
        return bool(expected) and hmac.compare_digest(expected, token)

    def consume_seed_token(self, name: str) -> None:
        """The seed went out: its token is spent."""
        with self.lock(), contextlib.suppress(FileNotFoundError):
            os.unlink(self._token_file(name))

    def flagged(self, mac: str) -> bool:
        return (self.root / served_path(mac)).exists()

    def in_flight(self) -> int:
        return sum(1 for r in self.records() if r.state == "installing")

    def flag(self, name: str, mac: str, install_id: str, *, limit: int) -> InstallRecord:
        """Serve `name` its installer from now on; `installing` if a slot is free, else `queued`."""
        installer = self.root / installer_path(mac)
        if not installer.is_file():
            raise PxeStateError(
                f"{installer} is missing: the PXE bundle at {self.root} does not install {name} "
                "(render it again with python -m stacks.pxe after changing the spec's hosts)"
            )
        with self.lock():
            now = time.time()
            state: State = "installing" if self.in_flight() < limit else "queued"
            record = InstallRecord(name, mac, install_id, state, now, now)
            token = secrets.token_urlsafe(_TOKEN_BYTES)
            atomic_write_text(self._token_file(name), token + "\n", 0o600)
            script = installer.read_text(encoding="utf-8").replace(SEED_TOKEN_MARK, token)
            # The served script holds the token: the PXE server gives it to the node only.
            atomic_write_text(self.root / served_path(mac), script, 0o600)
            self.save(record)
        return record

    def claim_slot(self, name: str, *, limit: int) -> InstallRecord | None:
        """Move a queued node to `installing` if fewer than `limit` are; None when no slot."""
        with self.lock():
            record = self.record(name)
            if record is None or record.state != "queued" or self.in_flight() >= limit:
                return None
            now = time.time()
            started = replace(
                record, state="installing", started=now, updated=now, detail=POWERING_ON
            )
            self.save(started)
            return started

    def advance(
        self, name: str, state: State, detail: str = "", *, install_id: str | None = None
    ) -> InstallRecord:
        """Record a node's new state; leaving `queued`/`installing` takes the flag away."""
        with self.lock():
            record = self.record(name)
            if record is None:
                raise PxeStateError(f"{name} has no install record in {self.state_dir}")
            if install_id is not None and record.install_id != install_id:
                raise PxeStateError(
                    f"{name}: install {install_id} is not the current one ({record.install_id})"
                )
            if state not in FLAGGED:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self.root / served_path(record.mac))
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self._token_file(name))
            updated = replace(record, state=state, updated=time.time(), detail=detail)
            self.save(updated)
            return updated

    def installed_callback(self, name: str, client_address: str) -> InstallRecord:
        """An installer's late-command reported `name` done, from `client_address`.

        Only the node's own management address may report it, and only while it installs:
        anyone else on the segment cannot cut an install short or flag a node.
        """
        host = self.hosts().get(name)
        if host is None:
            raise PxeStateError(f"no host {name} in {self.root / HOSTS_FILE}")
        if host.get("address") != client_address:
            raise PxeStateError(
                f"{client_address} reported {name} installed, but {name} is {host.get('address')}"
            )
        record = self.record(name)
        if record is None or record.state not in FLAGGED:
            state = record.state if record else "not flagged"
            raise PxeStateError(f"{name} reported installed but is {state}")
        return self.advance(name, "installed", f"installer reported done from {client_address}")
