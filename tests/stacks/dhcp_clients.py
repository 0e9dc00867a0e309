"""Many DHCP clients on one interface: DISCOVER, OFFER, REQUEST, ACK for each MAC given.

    ip netns exec NS python dhcp_clients.py IFACE MACS_FILE OUT_JSON [--deadline S]

Run inside a network namespace the test created (it needs CAP_NET_RAW there). Each client is
one MAC (chaddr) and sends from 0.0.0.0 with the broadcast flag set (RFC 2131 §4.1), so the
server answers to the link's broadcast address and one raw socket hears every answer. A
window bounds what is in flight; a client that hears nothing is asked again, at most
`TRIES` times; the whole run stops at the deadline. The result maps each MAC to the address
its ACK gave (absent: no ACK), plus the NAKs and the seconds taken.

Frames are built by hand (Ethernet, IPv4, UDP, BOOTP with the DHCP magic cookie; RFC 2131
and RFC 2132 for the options): no DHCP client package is needed, and no client state is
left on the machine.
"""

from __future__ import annotations

import json
import random
import socket
import struct
import sys
import time
from dataclasses import dataclass, field

ETH_P_IP = 0x0800
PACKET_OUTGOING = 4
BROADCAST = b"\xff" * 6
MAGIC = b"\x63\x82\x53\x63"
DISCOVER, OFFER, REQUEST, ACK, NAK = 1, 2, 3, 5, 6
WINDOW = 64
RESEND_S = 1.0
TRIES = 5


def _checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def _frame(mac: bytes, xid: int, kind: int, extra: bytes) -> bytes:
    options = MAGIC + bytes([53, 1, kind]) + extra + bytes([55, 3, 1, 3, 6, 255])
    bootp = struct.pack(
        "!BBBBIHH4s4s4s4s16s64s128s",
        1,  # BOOTREQUEST
        1,  # Ethernet
        6,
        0,
        xid,
        0,
        0x8000,  # broadcast flag: answer to the broadcast address (RFC 2131 §4.1)
        b"\0" * 4,
        b"\0" * 4,
        b"\0" * 4,
        b"\0" * 4,
        mac + b"\0" * 10,
        b"\0" * 64,
        b"\0" * 128,
    )
    payload = bootp + options
    udp = struct.pack("!HHHH", 68, 67, 8 + len(payload), 0) + payload
    header = struct.pack(
        "!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 0, 0, 64, 17, 0, b"\0" * 4, b"\xff" * 4
    )
    header = header[:10] + struct.pack("!H", _checksum(header)) + header[12:]
    return BROADCAST + mac + struct.pack("!H", ETH_P_IP) + header + udp


def _parse(frame: bytes) -> tuple[int, int, bytes, dict[int, bytes]] | None:
    """(xid, message type, yiaddr, options) of a BOOTREPLY to port 68, else None."""
    if len(frame) < 14 + 20 + 8 + 240 or frame[12:14] != b"\x08\x00":
        return None
    ihl = (frame[14] & 0x0F) * 4
    if frame[14 + 9] != 17:
        return None
    udp = 14 + ihl
    if struct.unpack("!H", frame[udp + 2 : udp + 4])[0] != 68:
        return None
    bootp = frame[udp + 8 :]
    if bootp[0] != 2 or bootp[236:240] != MAGIC:
        return None
    xid = struct.unpack("!I", bootp[4:8])[0]
    yiaddr = bootp[16:20]
    options: dict[int, bytes] = {}
    i = 240
    while i < len(bootp) and bootp[i] != 255:
        if bootp[i] == 0:
            i += 1
            continue
        length = bootp[i + 1]
        options[bootp[i]] = bootp[i + 2 : i + 2 + length]
        i += 2 + length
    kind = options.get(53, b"\0")[0]
    return xid, kind, yiaddr, options


@dataclass
class Client:
    mac: bytes
    xid: int
    stage: int = DISCOVER  # what it sends next, or ACK when done
    offered: bytes = b""
    server: bytes = b""
    sent_at: float = 0.0
    tries: int = 0
    address: str | None = None
    naks: int = field(default=0)


def run(interface: str, macs: list[str], deadline_s: float) -> dict[str, object]:
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_IP))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    sock.bind((interface, 0))
    sock.settimeout(0.05)
    rng = random.Random(4242)
    clients = [Client(bytes.fromhex(m.replace(":", "")), rng.getrandbits(32)) for m in macs]
    by_xid = {c.xid: c for c in clients}
    started = time.monotonic()
    pending = list(reversed(clients))  # not yet started
    active: list[Client] = []

    def send(client: Client) -> None:
        if client.stage == DISCOVER:
            frame = _frame(client.mac, client.xid, DISCOVER, b"")
        else:
            extra = bytes([50, 4]) + client.offered + bytes([54, 4]) + client.server
            frame = _frame(client.mac, client.xid, REQUEST, extra)
        client.sent_at = time.monotonic()
        client.tries += 1
        sock.send(frame)

    while time.monotonic() - started < deadline_s:
        while pending and len(active) < WINDOW:
            client = pending.pop()
            active.append(client)
            send(client)
        if not active:
            break
        try:
            frame, address = sock.recvfrom(2048)
        except TimeoutError:
            frame, address = b"", ("", 0, PACKET_OUTGOING)
        parsed = _parse(frame) if address[2] != PACKET_OUTGOING else None
        if parsed is not None:
            xid, kind, yiaddr, options = parsed
            client = by_xid.get(xid)
            if client is not None and client.stage != ACK:
                if kind == OFFER and client.stage == DISCOVER:
                    client.offered, client.server = yiaddr, options.get(54, b"")
                    client.stage, client.tries = REQUEST, 0
                    send(client)
                elif kind == ACK and client.stage == REQUEST:
                    client.stage, client.address = ACK, socket.inet_ntoa(yiaddr)
                    active.remove(client)
                elif kind == NAK:
                    # Start over (RFC 2131 §3.1), within the same bounded number of tries.
                    client.naks += 1
                    client.stage = DISCOVER
        now = time.monotonic()
        for client in list(active):
            if now - client.sent_at >= RESEND_S:
                if client.tries >= TRIES:
                    active.remove(client)  # gave up: no answer
                else:
                    send(client)
    sock.close()
    return {
        "acked": {":".join(f"{b:02x}" for b in c.mac): c.address for c in clients if c.address},
        "naks": sum(c.naks for c in clients),
        "seconds": round(time.monotonic() - started, 2),
    }


def main(argv: list[str]) -> int:
    interface, macs_file, out = argv[:3]
    deadline = float(argv[4]) if len(argv) > 4 and argv[3] == "--deadline" else 40.0
    with open(macs_file, encoding="utf-8") as stream:
        macs = [line.strip() for line in stream if line.strip()]
    result = run(interface, macs, deadline)
    with open(out, "w", encoding="utf-8") as stream:
        json.dump(result, stream)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
