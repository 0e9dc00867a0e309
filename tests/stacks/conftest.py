"""Fixtures for the stack tests: the program's import path, and a real Redfish BMC emulator.

The emulator is sushy-tools' `sushy-emulator` (from PyPI) with its fake systems driver, run
as a child process on a free loopback port with basic auth, and always stopped afterwards.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

# `stacks` is the Pulumi program folder at the repository root, not an installed package.
_ROOT = str(Path(__file__).resolve().parents[2])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

EMULATOR_USER = "admin"
EMULATOR_PASSWORD = "emulator-Passw0rd"
SYSTEMS = {
    "gpu01": "8a2c5b9e-0d51-4c47-9a57-7d1d8f0e0001",
    "gpu02": "8a2c5b9e-0d51-4c47-9a57-7d1d8f0e0002",
}
_START_TIMEOUT_S = 30.0

# The fake driver applies a power change 1 to 11 s (random) after the request. Pinning the
# draw keeps the tests quick and makes every power cycle last over a second, long enough for
# the fake node below to see it; everything else is the emulator as shipped.
_LAUNCHER = (
    "import random, sys\n"
    "random.randint = lambda low, high: low + 1\n"
    "from sushy_tools.emulator.main import main\n"
    "sys.exit(main())\n"
)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass(frozen=True)
class Emulator:
    url: str
    username: str
    password: str
    log: Path


def _config(workdir: Path, names: Mapping[str, str] = SYSTEMS) -> Path:
    import bcrypt  # installed with sushy-tools, which needs it for its auth file

    digest = bcrypt.hashpw(EMULATOR_PASSWORD.encode(), bcrypt.gensalt(rounds=4)).decode()
    auth = workdir / "htpasswd"
    auth.write_text(f"{EMULATOR_USER}:{digest}\n")
    systems = [
        {
            "uuid": uuid,
            "name": name,
            "power_state": "Off",
            "external_notifier": False,
            "nics": [{"mac": f"02:00:00:00:00:{index:02x}", "ip": "127.0.0.1"}],
        }
        for index, (name, uuid) in enumerate(names.items(), start=1)
    ]
    config = workdir / "emulator.conf"
    # The state directory keeps the fake driver's sqlite state out of the shared /tmp default.
    config.write_text(
        f"SUSHY_EMULATOR_STATE_DIR = {str(workdir / 'state')!r}\n"
        f"SUSHY_EMULATOR_AUTH_FILE = {str(auth)!r}\n"
        f"SUSHY_EMULATOR_FAKE_SYSTEMS = {systems!r}\n"
    )
    return config


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/redfish/v1/", timeout=2):
            return True
    except urllib.error.HTTPError as exc:
        return exc.code == 401  # up, and asking for the credentials as configured
    except OSError:
        return False


@pytest.fixture(scope="module")
def redfish_emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Emulator]:
    with run_emulator(tmp_path_factory.mktemp("sushy")) as emulator:
        yield emulator


@contextlib.contextmanager
def run_emulator(workdir: Path, systems: Mapping[str, str] = SYSTEMS) -> Iterator[Emulator]:
    """sushy-emulator with the fake driver serving `systems` (name -> UUID), all off."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log_path = workdir / "emulator.log"
    command = [
        sys.executable, "-c", _LAUNCHER,
        "--config", str(_config(workdir, systems)),
        "--interface", "127.0.0.1",
        "--port", str(port),
        "--fake",
    ]  # fmt: skip
    with log_path.open("wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + _START_TIMEOUT_S
            while not _answers(url):
                if process.poll() is not None or time.monotonic() > deadline:
                    tail = log_path.read_text(errors="replace")[-2000:]
                    pytest.fail(f"sushy-emulator did not start on {url}:\n{tail}")
                time.sleep(0.2)
            yield Emulator(url, EMULATOR_USER, EMULATOR_PASSWORD, log_path)
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)


@contextlib.contextmanager
def silent_listener() -> Iterator[int]:
    """A port that accepts TCP connections (the kernel's backlog does) but never answers."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        yield int(server.getsockname()[1])
