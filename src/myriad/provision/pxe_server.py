"""The PXE server's HTTP side: the bundle's `http/` folder, and the installers' callback.

    python -m myriad.provision.pxe_server --root /srv/myriad-pxe --port 80

GET serves files under `<root>/http` (iPXE scripts, autoinstall user-data, the OS images);
`POST /installed/<name>` is what a node's autoinstall late-command sends when its install is
done: the node is then no longer flagged, so its next network boot goes to the local disk.
`/seeds/<name>.tar.gz` (image mode: the node's seed, with the munge key) and its `.sha256` go
only to `<name>`'s own address, as `hosts.json` lists it; the seed itself also only while the
node is flagged, for the install's one-time token (`?token=`, myriad.provision.pxe_state),
and once. A flagged installer script, `/nodes/<mac>.ipxe`, holds that token and goes only to
the address of the host with that MAC.

With `--tls-cert`/`--tls-key` the server also listens with TLS on `--tls-port` (the stack's
`myriad:pxeTlsPort`, installers checking it against `myriad:pxeTlsCaFile`), and a seed
then goes over TLS only: the plain listener refuses it. iPXE's scripts and the callback stay
on plain HTTP (iPXE trusts only the CAs built into it).
Any web server can serve `http/`; only the callback needs this one (without it, the
provisioning wait clears each flag when the installed system answers on SSH).
"""

from __future__ import annotations

import argparse
import http.server
import logging
import re
import ssl
import sys
import threading
import urllib.parse
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

from myriad.errors import PxeStateError
from myriad.provision.pxe_state import PxeState

logger = logging.getLogger(__name__)
logger.addHandler(logging.NullHandler())
_CALLBACK = re.compile(r"^/installed/([A-Za-z0-9._-]+)$")
_SEED = re.compile(r"^/seeds/([A-Za-z0-9._-]+?)\.tar\.gz(\.sha256)?$")
_INSTALLER = re.compile(r"^/nodes/([0-9a-f]{2}(?:-[0-9a-f]{2}){5})\.ipxe$")


class PxeRequestHandler(http.server.SimpleHTTPRequestHandler):
    """Static files from `<root>/http`; the callback updates `<root>/state`."""

    server_version = "myriad-pxe"

    def __init__(
        self, *args: Any, state: PxeState, seeds_need_tls: bool = False, **kwargs: Any
    ) -> None:
        self.state = state
        self.seeds_need_tls = seeds_need_tls
        super().__init__(*args, directory=str(state.root / "http"), **kwargs)

    def do_GET(self) -> None:  # the handler's method name
        spend = self._seed_allowed(spend=True)
        if spend is False or not self._installer_allowed():
            return
        super().do_GET()
        if isinstance(spend, str):
            # Sent in full (a broken transfer raised above): the token is spent.
            self.state.consume_seed_token(spend)

    def do_HEAD(self) -> None:  # the handler's method name
        if self._seed_allowed(spend=False) is not False and self._installer_allowed():
            super().do_HEAD()

    def _hosts(self) -> dict[str, dict[str, str]] | None:
        try:
            return self.state.hosts()
        except PxeStateError as exc:
            self.send_error(500, str(exc))
            return None

    def _installer_allowed(self) -> bool:
        """False (the answer sent) for a flagged installer script asked by another address."""
        match = _INSTALLER.match(self.path.split("?", 1)[0])
        if match is None:
            return True
        hosts = self._hosts()
        if hosts is None:
            return False
        mac = match.group(1).replace("-", ":")
        owners = [h.get("address") for h in hosts.values() if str(h.get("mac")).lower() == mac]
        if self.client_address[0] not in owners:
            # Unknown MAC or another machine: as if not flagged (it holds the seed token).
            self.send_error(404, "no installer for this address")
            return False
        return True

    def _seed_allowed(self, *, spend: bool) -> bool | str:
        """False (the answer sent) for a seed anyone but its node asks for, or without the
        install's token; the node's name when this GET spends a token; True otherwise."""
        path, _, query = self.path.partition("?")
        if not path.startswith("/seeds/"):
            return True
        match = _SEED.match(path)
        if match is None:
            self.send_error(404, "only /seeds/<name>.tar.gz and its .sha256")
            return False
        name, client = match.group(1), self.client_address[0]
        hosts = self._hosts()
        if hosts is None:
            return False
        entry = hosts.get(name)
        if not isinstance(entry, dict) or entry.get("address") != client:
            logger.warning("refused %s's seed to %s", name, client)
            self.send_error(403, f"{name}'s seed goes to {name}'s own address only")
            return False
        if match.group(2):  # the digest: no secret in it
            return True
        if self.seeds_need_tls and not isinstance(self.connection, ssl.SSLSocket):
            self.send_error(403, f"{name}'s seed goes over TLS only (this server's TLS port)")
            return False
        token = urllib.parse.parse_qs(query).get("token", [""])[0]
        if not self.state.seed_token_valid(name, token):
            logger.warning("refused %s's seed: no valid one-time token", name)
            self.send_error(
                403, f"{name}'s seed goes only to its install in progress, once, with its token"
            )
            return False
        if not (self.state.root / "http" / path.lstrip("/")).is_file():
            self.send_error(404, f"no seed for {name} yet")  # and the token is not spent
            return False
        return name if spend else True

    def do_POST(self) -> None:  # the handler's method name
        match = _CALLBACK.match(self.path.split("?", 1)[0])
        if match is None:
            self.send_error(404, "only /installed/<name> takes a POST")
            return
        name = match.group(1)
        try:
            record = self.state.installed_callback(name, self.client_address[0])
        except PxeStateError as exc:
            logger.warning("refused callback: %s", exc)
            self.send_error(409 if "reported installed but" in str(exc) else 403, str(exc))
            return
        logger.info("%s installed (install %s)", name, record.install_id)
        body = f"{name} installed; the next boot goes to the local disk\n".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def list_directory(self, path: str | Path) -> None:  # type: ignore[override]
        # No listings: a node fetches the paths it is told, nothing else.
        self.send_error(404, "no directory listing")
        return None

    def log_message(self, format: str, *args: Any) -> None:
        logger.info("%s %s", self.client_address[0], format % args)


def make_server(
    root: Path,
    host: str,
    port: int,
    *,
    tls: tuple[Path, Path] | None = None,
    seeds_need_tls: bool = False,
) -> http.server.ThreadingHTTPServer:
    """The bundle's HTTP server; with `tls` (certificate, key) a TLS one.

    `seeds_need_tls`: this plain server refuses seeds (a TLS server beside it gives them).
    """
    state = PxeState(root)
    state.hosts()  # fail now, not on the first callback, when the bundle is not there
    handler = partial(PxeRequestHandler, state=state, seeds_need_tls=seeds_need_tls)
    server = http.server.ThreadingHTTPServer((host, port), handler)
    if tls is not None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        try:
            context.load_cert_chain(str(tls[0]), str(tls[1]))
        except (OSError, ssl.SSLError):
            server.server_close()
            raise
        # The handshake in the handler thread, not in accept(): a slow client blocks no one.
        server.socket = context.wrap_socket(
            server.socket, server_side=True, do_handshake_on_connect=False
        )
    return server


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m myriad.provision.pxe_server",
        description="Serve a Myriad PXE bundle over HTTP and take the installers' callbacks.",
    )
    parser.add_argument("--root", type=Path, required=True, help="the bundle's folder")
    parser.add_argument("--bind", default="0.0.0.0", help="address to listen on")
    parser.add_argument("--port", type=int, default=80)
    parser.add_argument("--tls-port", type=int, default=8443, help="TLS listener (seeds)")
    parser.add_argument("--tls-cert", type=Path, help="PEM certificate of the TLS listener")
    parser.add_argument("--tls-key", type=Path, help="its PEM private key")
    args = parser.parse_args(argv)
    if (args.tls_cert is None) != (args.tls_key is None):
        parser.error("--tls-cert and --tls-key go together")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    tls = (args.tls_cert, args.tls_key) if args.tls_cert else None
    try:
        server = make_server(args.root, args.bind, args.port, seeds_need_tls=tls is not None)
        secure = make_server(args.root, args.bind, args.tls_port, tls=tls) if tls else None
    except (PxeStateError, OSError, ssl.SSLError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if secure is not None:
        threading.Thread(target=secure.serve_forever, daemon=True).start()
    with server:
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            return 0
        finally:
            if secure is not None:
                secure.shutdown()
                secure.server_close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
