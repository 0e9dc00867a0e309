"""The storage server's address must not be one render gives a node: starter-64 and roce-10k
named 10.20.0.10 / 10.16.0.10, which is ctl01's storage port (node addresses start at the
10th address of each network, plan/addresses.py), and nothing checked it."""

from __future__ import annotations

from pathlib import Path

from myriad.plan.lints import Finding
from myriad.plan.pipeline import plan_loaded
from myriad.spec import load_spec_text

ROOT = Path(__file__).resolve().parents[2]
STARTER = ROOT / "inventories" / "starter-64" / "cluster.yaml"


def _findings(text: str) -> list[Finding]:
    result = plan_loaded(load_spec_text(text, "cluster.yaml"))
    return [f for f in result.findings if f.id == "storage-server-address"]


def _with_server(address: str) -> str:
    text = STARTER.read_text()
    start = text.index("  server: ", text.index("\nstorage:"))
    end = text.index("\n", start)
    return text[:start] + f"  server: {address}" + text[end:]


def test_a_server_on_the_first_nodes_address_is_an_error() -> None:
    [finding] = _findings(_with_server("10.20.0.10"))
    assert finding.severity == "error"
    # ctl01 is the first node of the spec (pools in order: ctl, login, gpu).
    assert "10.20.0.10 is ctl01's storage address" in finding.message
    assert finding.path == ("storage", "server")
    assert "10.20.0.2" in finding.suggestion


def test_the_last_nodes_address_counts_and_the_next_is_free() -> None:
    # 2 controllers + 1 login + 8 GPU nodes: .10 to .20.
    [finding] = _findings(_with_server("10.20.0.20"))
    assert "gpu08" in finding.message
    assert _findings(_with_server("10.20.0.21")) == []


def test_below_the_nodes_outside_the_network_or_by_name_is_fine() -> None:
    for server in ("10.20.0.2", "10.99.0.10", "nfs.example.org", "10.32.0.2@tcp"):
        assert _findings(_with_server(server)) == [], server


def test_the_examples_keep_their_servers_off_the_nodes_addresses() -> None:
    for spec in sorted((ROOT / "inventories").glob("*/cluster.yaml")):
        assert _findings(spec.read_text()) == [], spec
