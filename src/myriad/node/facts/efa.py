"""AWS EFA: the RDM endpoints libfabric's efa provider offers, one domain per device."""

from __future__ import annotations

from myriad.node.facts.declare import command, fact


def parse_fi_info_domains(text: str) -> tuple[str, ...]:
    """The distinct `domain:` values of fi_info's listing, in order (one per EFA device)."""
    domains: list[str] = []
    for line in text.splitlines():
        key, _, value = line.strip().partition(":")
        if key == "domain" and value.strip() and value.strip() not in domains:
            domains.append(value.strip())
    return tuple(domains)


# `fi_info -p efa -t FI_EP_RDM`: the RDM domains of the EFA devices (rdmap16s27-rdm, ...).
# The EFA installer puts fi_info here; it is missing on nodes without EFA software.
EFA_DOMAINS = fact(
    "efa_domains",
    command("fi_info_efa", "/opt/amazon/efa/bin/fi_info", "-p", "efa", "-t", "FI_EP_RDM"),
    "fi_info -p efa",
    parse_fi_info_domains,
)
