"""GPU checks (nvidia-smi, NVLink, the driver's services): what the profile's GPUs promise."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from operator import attrgetter
from typing import Any

from myriad.node.checks.model import (
    Check,
    ClusterView,
    Context,
    Expect,
    Outcome,
    Skip,
    bringup_fix,
    explain_unit,
    failed,
    listed,
    passed,
    unavailable,
    unit_active,
    unknown,
    verdict,
)
from myriad.node.facts import NodeFacts
from myriad.node.parsers import NvidiaSmiReport

# nvidia-smi reports usable memory: 79.6 GiB on an "80 GB" H100, 15 GiB on a "16 GB" T4.
GPU_MEMORY_LOW, GPU_MEMORY_HIGH = 0.92, 1.05
DRIVER_FIX = bringup_fix("nvidia_driver")


def _no_gpus(c: Context) -> Skip | None:
    if c.profile.gpu is None:
        return Skip(f"{c.p}.gpu", f"profile {c.pool.profile} has no GPUs")
    return None


def _gpus_or(facts: NodeFacts) -> Outcome | None:
    return None if facts.gpus.ok else unavailable(facts.gpus)


# --- gpu.count -------------------------------------------------------------------------------


def _derive_count(c: Context) -> Expect | Skip:
    if (skip := _no_gpus(c)) is not None:
        return skip
    assert c.profile.gpu is not None
    return Expect(
        c.profile.gpu.count,
        f"{c.p}.gpu.count",
        "check `nvidia-smi -L` and `lspci -d 10de:` for a GPU that fell off the bus; "
        "reseat or replace it, or " + DRIVER_FIX,
    )


def _evaluate_count(expected: int, facts: NodeFacts, view: ClusterView, node: str) -> Outcome:
    if (problem := _gpus_or(facts)) is not None:
        return problem
    count = len(facts.gpus.get().gpus)
    return passed(str(count)) if count == expected else failed(str(count))


GPU_COUNT = Check(
    id="gpu.count",
    title="GPU count",
    spec_fields=("profiles.*.gpu.count",),
    derive=_derive_count,
    evaluate=_evaluate_count,
)


# --- gpu.model -------------------------------------------------------------------------------


def _derive_model(c: Context) -> Expect | Skip:
    if (skip := _no_gpus(c)) is not None:
        return skip
    assert c.profile.gpu is not None
    model = c.profile.gpu.model
    # nvidia-smi names the part ("NVIDIA H100 80GB HBM3"), the catalog its family and form
    # ("H100-SXM5-80GB"): the family must appear, and "PCIe" exactly for PCIe cards.
    expected = {
        "model": model,
        "token": model.split("-")[0].lower(),
        "pcie": c.catalog.gpus[model].form_factor == "pcie",
    }
    return Expect(
        expected,
        f"{c.p}.gpu.model",
        f"the node has other GPUs than the spec says: correct {c.p}.gpu.model or the pool",
    )


def _evaluate_model(
    expected: dict[str, Any], facts: NodeFacts, view: ClusterView, node: str
) -> Outcome:
    if (problem := _gpus_or(facts)) is not None:
        return problem
    names = sorted({gpu.product_name for gpu in facts.gpus.get().gpus})
    if not names:
        return failed("no GPUs")
    token, pcie = expected["token"], expected["pcie"]
    wrong = [n for n in names if token not in n.lower() or ("pcie" in n.lower()) != pcie]
    return failed(listed(wrong)) if wrong else passed(listed(names))


GPU_MODEL = Check(
    id="gpu.model",
    title="GPU model",
    spec_fields=("profiles.*.gpu.model",),
    derive=_derive_model,
    evaluate=_evaluate_model,
    explain=lambda expected: str(expected["model"]),
)


# --- gpu.memory ------------------------------------------------------------------------------


def _derive_memory(c: Context) -> Expect | Skip:
    if (skip := _no_gpus(c)) is not None:
        return skip
    assert c.profile.gpu is not None
    return Expect(
        c.catalog.gpus[c.profile.gpu.model].memory_gb,
        f"{c.p}.gpu.model",
        "a GPU reports less memory than its model has: check ECC/row remapping, replace it",
    )


def _evaluate_memory(expected: int, facts: NodeFacts, view: ClusterView, node: str) -> Outcome:
    if (problem := _gpus_or(facts)) is not None:
        return problem
    nominal = expected * 1024
    low, high = GPU_MEMORY_LOW * nominal, GPU_MEMORY_HIGH * nominal
    short, unread, sizes = [], [], set()
    for gpu in facts.gpus.get().gpus:
        mib = gpu.memory_total_mib
        if mib is None:
            unread.append(f"GPU {gpu.index}: memory not reported")
            continue
        sizes.add(f"{mib} MiB")
        if not low <= mib <= high:
            short.append(f"GPU {gpu.index}: {mib} MiB")
    return verdict(short, listed(sorted(sizes)), unread)


GPU_MEMORY = Check(
    id="gpu.memory",
    title="GPU memory",
    spec_fields=("profiles.*.gpu.model",),
    derive=_derive_memory,
    evaluate=_evaluate_memory,
    explain=lambda expected: f"{expected} GB per GPU",
)


# --- gpu.driver ------------------------------------------------------------------------------


def _derive_driver(c: Context) -> Expect | Skip:
    if (skip := _no_gpus(c)) is not None:
        return skip
    driver = c.spec.software.nvidia_driver
    if driver is None:
        return Skip("software.nvidia_driver", "no driver version in the spec")
    v = c.variables
    return Expect(
        {
            "branch": str(v.get("nvidia_driver_branch") or driver.split(".")[0]),
            "version": v.get("nvidia_driver_version") or None,
        },
        "software.nvidia_driver",
        bringup_fix("nvidia_driver", "install the spec's driver, then reboot"),
    )


def _evaluate_driver(
    expected: dict[str, Any], facts: NodeFacts, view: ClusterView, node: str
) -> Outcome:
    if (problem := _gpus_or(facts)) is not None:
        return problem
    found = facts.gpus.get().driver_version
    if not found:
        return Outcome("error", "nvidia-smi reported no driver version")
    if expected["version"] is not None:
        good = found == expected["version"]
    else:
        good = found.split(".")[0] == expected["branch"]
    return passed(found) if good else failed(found)


def _explain_driver(expected: dict[str, Any]) -> str:
    branch = expected["branch"]
    return str(expected["version"] or f"branch {branch} ({branch}.x)")


GPU_DRIVER = Check(
    id="gpu.driver",
    title="NVIDIA driver version",
    spec_fields=("software.nvidia_driver",),
    derive=_derive_driver,
    evaluate=_evaluate_driver,
    explain=_explain_driver,
)


# --- gpu.persistence -------------------------------------------------------------------------


def _derive_persistence(c: Context) -> Expect | Skip:
    if (skip := _no_gpus(c)) is not None:
        return skip
    if not c.variables.get("nvidia_driver_persistenced", True):
        return Skip(f"{c.p}.gpu", "nvidia_driver_persistenced is off")
    return Expect(
        True,
        f"{c.p}.gpu",
        bringup_fix("nvidia_driver", "systemctl enable --now nvidia-persistenced"),
    )


def _evaluate_persistence(
    expected: bool, facts: NodeFacts, view: ClusterView, node: str
) -> Outcome:
    if (problem := _gpus_or(facts)) is not None:
        return problem
    gpus = facts.gpus.get().gpus
    off = [f"GPU {g.index} off" for g in gpus if g.persistence_mode is False]
    unread = [f"GPU {g.index} persistence not reported" for g in gpus if g.persistence_mode is None]
    return verdict(off, "on for every GPU", unread)


GPU_PERSISTENCE = Check(
    id="gpu.persistence",
    title="GPU persistence mode",
    spec_fields=("profiles.*.gpu",),
    derive=_derive_persistence,
    evaluate=_evaluate_persistence,
    explain=lambda expected: "on for every GPU",
)


# --- gpu.health ------------------------------------------------------------------------------


def _derive_health(c: Context) -> Expect | Skip:
    if (skip := _no_gpus(c)) is not None:
        return skip
    return Expect(
        True,
        f"{c.p}.gpu",
        "drain {node}, reset the GPU (nvidia-smi -r -i N) or reboot to apply pending "
        "remaps; replace a GPU whose remapping failed",
    )


def _evaluate_health(expected: bool, facts: NodeFacts, view: ClusterView, node: str) -> Outcome:
    if (problem := _gpus_or(facts)) is not None:
        return problem
    problems, unread = [], []
    for gpu in facts.gpus.get().gpus:
        if gpu.remapped_rows_failure:
            problems.append(f"GPU {gpu.index}: row remapping failed")
        if gpu.remapped_rows_pending:
            problems.append(f"GPU {gpu.index}: remap pending")
        if gpu.retired_pages_pending:
            problems.append(f"GPU {gpu.index}: page retirement pending")
        # Ampere and later report row remapping, older GPUs page retirement; a GPU that
        # reports neither has told us nothing about its memory.
        if gpu.remapped_rows_pending is None and gpu.retired_pages_pending is None:
            unread.append(f"GPU {gpu.index}: neither row remapping nor page retirement reported")
    return verdict(problems, "no pending or failed remaps", unread)


GPU_HEALTH = Check(
    id="gpu.health",
    title="no pending or failed row remaps / page retirements",
    spec_fields=("profiles.*.gpu",),
    derive=_derive_health,
    evaluate=_evaluate_health,
    explain=lambda expected: "no pending or failed remaps",
)


# --- the NVLink fabric's software, as the nvidia_driver role chose it ------------------------

# nvidia_driver_nvlink_fabric: none | fabricmanager | fabricmanager-nvlsm | imex (the role's
# README says which platform takes which, after NVIDIA's Fabric Manager and IMEX guides).
NVLINK_FABRICS = ("none", "fabricmanager", "fabricmanager-nvlsm", "imex")


def nvlink_fabric(variables: Mapping[str, Any]) -> str:
    """The NVLink fabric software of a kind of node: the nvidia_driver role's
    `nvidia_driver_nvlink_fabric`, or Fabric Manager where only the older
    `nvidia_driver_fabricmanager` switch is set (the role reads the two the same way)."""
    chosen = str(variables.get("nvidia_driver_nvlink_fabric") or "none")
    if chosen == "none" and variables.get("nvidia_driver_fabricmanager"):
        return "fabricmanager"
    return chosen


def nvlink_network(variables: Mapping[str, Any]) -> bool:
    """An NVLink-network platform (GB200/GB300 NVL72 compute trays): GPUs of several nodes
    share one NVLink domain, joined through IMEX."""
    return nvlink_fabric(variables) == "imex"


# --- gpu.fabricmanager -----------------------------------------------------------------------


def _derive_fabricmanager(c: Context) -> Expect | Skip:
    if (skip := _no_gpus(c)) is not None:
        return skip
    if c.profile.nvswitch <= 0:
        return Skip(f"{c.p}.nvswitch", "no NVSwitch: no Fabric Manager needed")
    if nvlink_fabric(c.variables) == "imex":
        return Skip(
            f"{c.p}.nvswitch",
            "NVLink-network tray: its NVSwitches are managed on the switch trays, not by a "
            "host Fabric Manager",
        )
    return Expect(
        "nvidia-fabricmanager",
        f"{c.p}.nvswitch",
        bringup_fix("nvidia_driver", "systemctl enable --now nvidia-fabricmanager"),
    )


GPU_FABRICMANAGER = Check(
    id="gpu.fabricmanager",
    title="Fabric Manager active",
    spec_fields=("profiles.*.nvswitch",),
    derive=_derive_fabricmanager,
    evaluate=unit_active,
    explain=explain_unit,
)


# --- gpu.fabric-state ------------------------------------------------------------------------

# NVML's fabric health summaries that are faults (nvmlGpuFabricInfo_v3_t healthSummary);
# Healthy, Not Supported and N/A are not.
FABRIC_UNHEALTHY = frozenset({"unhealthy", "limited capacity"})
# What NVML reports for a GPU in no NVLink domain (seen on H100 and on failed NVL72 trays).
ZERO_CLUSTER = "00000000-0000-0000-0000-000000000000"


def _derive_fabric_state(c: Context) -> Expect | Skip:
    if (skip := _no_gpus(c)) is not None:
        return skip
    fabric = nvlink_fabric(c.variables)
    if fabric not in ("imex", "fabricmanager-nvlsm"):
        return Skip(
            f"{c.p}.gpu.model",
            f"the GPUs' fabric state is judged on NVLink-network trays and fourth-generation "
            f"NVSwitch boards only (nvidia_driver_nvlink_fabric: {fabric})",
        )
    domain = fabric == "imex"
    fix = (
        "drain {node}; a tray whose GPUs are not all in the rack's NVLink domain: check the "
        "tray's NVLink connections and the switch trays' fabric, then reset the GPUs or "
        "reboot the tray"
        if domain
        else bringup_fix(
            "nvidia_driver", "Fabric Manager and NVLSM must both run before CUDA starts"
        )
    )
    return Expect({"domain": domain}, f"{c.p}.gpu.model", fix)


def _evaluate_fabric_state(
    expected: dict[str, Any], facts: NodeFacts, view: ClusterView, node: str
) -> Outcome:
    if (problem := _gpus_or(facts)) is not None:
        return problem
    gpus = facts.gpus.get().gpus
    if not gpus:
        return failed("no GPUs")
    problems: list[str] = []
    unread: list[str] = []
    domains: dict[tuple[int, str], list[str]] = {}
    for gpu in gpus:
        fabric = gpu.fabric
        if fabric.state is None:
            unread.append(f"GPU {gpu.index}: no Fabric section in nvidia-smi's report")
            continue
        if fabric.state != "Completed":
            problems.append(f"GPU {gpu.index}: fabric state {fabric.state}")
            continue
        # NVML: the status means something once the state is Completed, and only then.
        if fabric.status != "Success":
            problems.append(f"GPU {gpu.index}: fabric status {fabric.status}")
            continue
        if (fabric.health_summary or "").lower() in FABRIC_UNHEALTHY:
            problems.append(f"GPU {gpu.index}: fabric health {fabric.health_summary}")
        if not expected["domain"]:
            continue
        if fabric.clique_id is None or fabric.cluster_uuid is None:
            unread.append(f"GPU {gpu.index}: clique ID or cluster UUID not reported")
        elif fabric.cluster_uuid == ZERO_CLUSTER:
            problems.append(f"GPU {gpu.index}: in no NVLink domain (cluster UUID all zeros)")
        else:
            key = (fabric.clique_id, fabric.cluster_uuid)
            domains.setdefault(key, []).append(str(gpu.index))
    if len(domains) > 1:
        # One tray, several domains: a GPU the NVLink fabric placed elsewhere. Said first,
        # so that the drain reason (its first words) names it.
        split = "; ".join(
            f"GPU {','.join(indices)} clique {clique} cluster {cluster}"
            for (clique, cluster), indices in sorted(domains.items())
        )
        problems.insert(0, f"GPUs disagree on their NVLink domain: {split}")
    good = f"Completed, Success on {len(gpus)} GPUs"
    if len(domains) == 1:
        ((clique, cluster),) = domains
        good += f", clique {clique} of cluster {cluster}"
    return verdict(problems, good, unread)


def _explain_fabric_state(expected: dict[str, Any]) -> str:
    if expected["domain"]:
        return "every GPU Completed, Success, in one NVLink domain (clique and cluster UUID)"
    return "every GPU's fabric registration Completed, Success"


GPU_FABRIC_STATE = Check(
    id="gpu.fabric-state",
    title="GPUs registered with the NVLink fabric, all in one domain",
    spec_fields=("profiles.*.gpu.model",),
    derive=_derive_fabric_state,
    evaluate=_evaluate_fabric_state,
    explain=_explain_fabric_state,
)


# --- gpu.nvlink-domain: the trays of a rack in one NVLink domain ---------------------------


def nvlink_domain_of(report: NvidiaSmiReport) -> str | None:
    """The one NVLink domain every GPU of a node is registered in, `clique N of cluster
    UUID`; None where a GPU is not registered, is in no domain or the GPUs disagree (which
    gpu.fabric-state names GPU by GPU)."""
    found = set()
    for gpu in report.gpus:
        fabric = gpu.fabric
        if fabric.state != "Completed" or fabric.status != "Success":
            return None
        if fabric.clique_id is None or fabric.cluster_uuid in (None, ZERO_CLUSTER):
            return None
        found.add(f"clique {fabric.clique_id} of cluster {fabric.cluster_uuid}")
    return found.pop() if len(found) == 1 else None


def _derive_nvlink_domain(c: Context) -> Expect | Skip:
    if (skip := _no_gpus(c)) is not None:
        return skip
    if c.nvlink_domain is None:
        return Skip(
            f"{c.p}.server",
            "not a tray of a rack-scale NVLink domain (its NVLink stops at the server)",
        )
    name, trays = c.nvlink_domain
    fix = (
        "drain {node}; a tray in another NVLink domain than the rest of " + name + ": check "
        "its NVLink cables to the switch trays and the switch trays' partition (one "
        "partition a rack unless one was made on purpose), then reboot the tray"
    )
    return Expect({"domain": name, "trays": list(trays)}, f"{c.p}.server", fix)


def _evaluate_nvlink_domain(
    expected: dict[str, Any], facts: NodeFacts, view: ClusterView, node: str
) -> Outcome:
    if not view.gpu_domains.ok:
        return unavailable(view.gpu_domains)
    read = view.gpu_domains.get()
    name = expected["domain"]
    own = read.get(node)
    if own is None:
        return unknown("this tray's GPUs are in no one NVLink domain (see gpu.fabric-state)")
    others = {t: read[t] for t in expected["trays"] if t != node and read.get(t) is not None}
    if not others:
        return unknown(f"no other tray of {name} read")
    tally = Counter([own, *others.values()])
    (top, votes), *_ = tally.most_common()
    if tally[own] == len(others) + 1:
        return passed(f"{own}, as the {len(others)} other trays of {name} read")
    if own == top and votes * 2 > len(others) + 1:
        return passed(f"{own}, as {votes - 1} of the {len(others)} other trays of {name}")
    seen = "; ".join(
        f"{domain} ({', '.join(sorted(t for t, d in others.items() if d == domain))})"
        for domain, _ in tally.most_common()
        if domain != own
    )
    return failed(f"{own}; {name}'s other trays: {seen}")


GPU_NVLINK_DOMAIN = Check(
    id="gpu.nvlink-domain",
    title="the trays of a rack-scale NVLink domain all in one domain",
    spec_fields=("profiles.*.server",),
    derive=_derive_nvlink_domain,
    evaluate=_evaluate_nvlink_domain,
    explain=lambda expected: (
        f"the same NVLink domain (clique, cluster UUID) as the other trays of {expected['domain']}"
    ),
    per_node=True,
)


# --- gpu.imex-service ------------------------------------------------------------------------


def _no_nvlink_network(c: Context) -> Skip | None:
    if (skip := _no_gpus(c)) is not None:
        return skip
    if not nvlink_network(c.variables):
        return Skip(
            f"{c.p}.gpu.model",
            "not an NVLink-network tray (nvidia_driver_nvlink_fabric is not imex): no IMEX",
        )
    return None


def _derive_imex_service(c: Context) -> Expect | Skip:
    if (skip := _no_nvlink_network(c)) is not None:
        return skip
    return Expect(
        "nvidia-imex",
        f"{c.p}.gpu.model",
        bringup_fix("nvidia_driver", "systemctl enable --now nvidia-imex"),
    )


GPU_IMEX_SERVICE = Check(
    id="gpu.imex-service",
    title="IMEX daemon active",
    spec_fields=("profiles.*.gpu.model",),
    derive=_derive_imex_service,
    evaluate=unit_active,
    explain=explain_unit,
)


# --- gpu.imex-domain -------------------------------------------------------------------------


def _derive_imex_domain(c: Context) -> Expect | Skip:
    if (skip := _no_nvlink_network(c)) is not None:
        return skip
    return Expect(
        "UP",
        f"{c.p}.gpu.model",
        "nvidia-imex-ctl -N names the nodes and links that are down: bring those trays' "
        "IMEX daemons up (same driver version, same nodes_config.cfg), or "
        + bringup_fix("nvidia_driver"),
    )


def _evaluate_imex_domain(expected: str, facts: NodeFacts, view: ClusterView, node: str) -> Outcome:
    if not facts.imex.ok:
        return unavailable(facts.imex)
    domain = facts.imex.get()
    problems = [] if domain.state == expected else [f"domain {domain.state}"]
    problems += [f"{n.address} {n.status}" for n in domain.nodes if n.status != "READY"]
    problems += domain.broken_links()
    return verdict(problems, f"{domain.state}, {len(domain.nodes)} nodes READY, all connected")


GPU_IMEX_DOMAIN = Check(
    id="gpu.imex-domain",
    title="IMEX domain up: every node ready, every connection up",
    spec_fields=("profiles.*.gpu.model",),
    derive=_derive_imex_domain,
    evaluate=_evaluate_imex_domain,
    explain=lambda expected: f"domain {expected}, every node READY, every connection C",
)


# --- gpu.nvlink ------------------------------------------------------------------------------


def _derive_nvlink(c: Context) -> Expect | Skip:
    if (skip := _no_gpus(c)) is not None:
        return skip
    assert c.profile.gpu is not None
    model = c.catalog.gpus[c.profile.gpu.model]
    # PCIe cards are bridged in pairs at most; links of SXM parts and NVSwitch systems are
    # what all_reduce rides on, so those are the ones a down link slows.
    if model.nvlink_links <= 0 or (model.form_factor == "pcie" and c.profile.nvswitch <= 0):
        return Skip(f"{c.p}.gpu.model", f"{c.profile.gpu.model} has no NVLink fabric")
    return Expect(
        model.nvlink_links,
        f"{c.p}.gpu.model",
        "a GPU has NVLink links down: reset the GPU or the baseboard, replace if it stays",
    )


# 12,500 nodes x 8 GPUs x 18 links: attrgetter keeps the loop over links in C.
_INACTIVE = attrgetter("inactive")


def _evaluate_nvlink(expected: int, facts: NodeFacts, view: ClusterView, node: str) -> Outcome:
    if not facts.nvlink.ok:
        return unavailable(facts.nvlink)
    status = facts.nvlink.get()
    if not status.gpus:
        # nvidia-smi prints nothing where the driver sees no NVLink at all.
        return failed(f"no NVLink on this node; the profile's GPUs have {expected} links each")
    short = [
        f"GPU {gpu.index}: {gpu.active_links}/{expected} up"
        for gpu in status.gpus
        if len(gpu.links) != expected or any(map(_INACTIVE, gpu.links))
    ]
    # nvlink --status prints no count of its own; nvidia-smi -q -x lists every GPU, and a
    # GPU it lists that NVLink does not is a GPU whose links cannot be vouched for.
    unknowns: list[str] = []
    if not facts.gpus.ok:
        unknowns.append(f"GPU list not read, so no GPU is known complete: {facts.gpus.detail}")
    else:
        shown = {gpu.index for gpu in status.gpus}
        missing = [gpu.index for gpu in facts.gpus.get().gpus if gpu.index not in shown]
        short += [f"GPU {index}: not in nvlink --status" for index in missing]
    return verdict(short, f"{expected} links up on {len(status.gpus)} GPUs", unknowns)


GPU_NVLINK = Check(
    id="gpu.nvlink",
    title="NVLink links up",
    spec_fields=("profiles.*.gpu.model",),
    derive=_derive_nvlink,
    evaluate=_evaluate_nvlink,
    explain=lambda expected: f"{expected} links up per GPU",
)


# --- gpu.pcie --------------------------------------------------------------------------------


def _derive_pcie(c: Context) -> Expect | Skip:
    if (skip := _no_gpus(c)) is not None:
        return skip
    assert c.profile.gpu is not None
    model = c.catalog.gpus[c.profile.gpu.model]
    return Expect(
        {"gen": min(model.pcie_gen, c.profile.pcie.gen), "width": min(model.pcie_lanes, 16)},
        f"{c.p}.pcie.gen",
        "a GPU trained below its slot's link: reseat it, check the riser and BIOS settings",
    )


def _evaluate_pcie(
    expected: dict[str, Any], facts: NodeFacts, view: ClusterView, node: str
) -> Outcome:
    if (problem := _gpus_or(facts)) is not None:
        return problem
    slow, unread, seen = [], [], set()
    for gpu in facts.gpus.get().gpus:
        # GPUs drop the link's speed when idle; the max generation the GPU and its slot can
        # train to is what a missing riser lane or a Gen4 slot lowers.
        gen = gpu.pcie.gen_max or gpu.pcie.gen_current
        width = gpu.pcie.width_current or gpu.pcie.width_max
        if gen is None or width is None:
            unread.append(f"GPU {gpu.index}: link not reported")
            continue
        seen.add(f"Gen{gen} x{width}")
        if gen < expected["gen"] or width < expected["width"]:
            slow.append(f"GPU {gpu.index}: Gen{gen} x{width}")
    return verdict(slow, listed(sorted(seen)), unread)


GPU_PCIE = Check(
    id="gpu.pcie",
    title="GPU PCIe link",
    spec_fields=("profiles.*.pcie.gen",),
    derive=_derive_pcie,
    evaluate=_evaluate_pcie,
    explain=lambda expected: f"Gen{expected['gen']} x{expected['width']} per GPU",
)


# --- gpudirect.peermem -----------------------------------------------------------------------


def _derive_peermem(c: Context) -> Expect | Skip:
    if (skip := _no_gpus(c)) is not None:
        return skip
    if not c.variables.get("nvidia_driver_gpudirect_rdma"):
        return Skip("software.gpudirect_rdma", "GPUDirect RDMA is off or the fabric has no RDMA")
    # The nvidia_driver role registers GPU memory through DMA-BUF with the open kernel modules
    # (every supported OS's kernel is 5.12 or later) and loads nvidia-peermem only otherwise.
    method = c.variables.get("nvidia_driver_gpudirect_rdma_method", "auto")
    modules = c.variables.get("nvidia_driver_kernel_module_type", "open")
    if method == "dmabuf" or (method == "auto" and modules == "open"):
        return Skip(
            "software.gpudirect_rdma",
            "GPUDirect RDMA uses DMA-BUF, which needs no module (NCCL_DEBUG=INFO reports it)",
        )
    return Expect(
        "nvidia_peermem",
        "software.gpudirect_rdma",
        bringup_fix("nvidia_driver", "modprobe nvidia_peermem"),
    )


def _evaluate_peermem(expected: str, facts: NodeFacts, view: ClusterView, node: str) -> Outcome:
    if not facts.modules.ok:
        return unavailable(facts.modules)
    loaded = expected in facts.modules.get()
    return passed(f"{expected} loaded") if loaded else failed(f"{expected} not loaded")


GPUDIRECT_PEERMEM = Check(
    id="gpudirect.peermem",
    title="nvidia_peermem loaded",
    spec_fields=("software.gpudirect_rdma",),
    derive=_derive_peermem,
    evaluate=_evaluate_peermem,
    explain=lambda expected: f"{expected} loaded",
)


# --- gpu.mig ---------------------------------------------------------------------------------

# GPU families that can be partitioned (NVIDIA Multi-Instance GPU User Guide, "Supported
# GPUs"). Other GPUs print MIG mode N/A: for them that is the answer, not a gap.
MIG_FAMILIES = frozenset(
    {"a100", "a30", "a800", "h100", "h800", "h200", "h20", "b100", "b200", "b300", "gb200"}
)


def _derive_mig(c: Context) -> Expect | Skip:
    if (skip := _no_gpus(c)) is not None:
        return skip
    assert c.profile.gpu is not None
    # The spec has no MIG setting: Slurm's gres and Kubernetes' nvidia.com/gpu count whole
    # GPUs and NCCL runs on whole GPUs, so MIG must be off. With it on, the node exposes
    # MIG devices, and CUDA applications see no GPU unless they name a MIG device.
    return Expect(
        {"capable": c.profile.gpu.model.split("-")[0].lower() in MIG_FAMILIES},
        f"{c.p}.gpu.model",
        "drain {node}, disable MIG (nvidia-smi -i N -mig 0), then reset the GPU or reboot",
    )


def _evaluate_mig(
    expected: dict[str, Any], facts: NodeFacts, view: ClusterView, node: str
) -> Outcome:
    if (problem := _gpus_or(facts)) is not None:
        return problem
    on, unread, unsupported = [], [], 0
    for gpu in facts.gpus.get().gpus:
        current, pending = gpu.mig_current, gpu.mig_pending
        if current is None and pending is None and not expected["capable"]:
            unsupported += 1
        elif current is None or pending is None:
            unread.append(f"GPU {gpu.index}: MIG mode not reported")
        elif current:
            on.append(f"GPU {gpu.index} MIG on" + ("" if pending else ", off after reset"))
        elif pending:
            on.append(f"GPU {gpu.index} MIG on after reset")
    count = len(facts.gpus.get().gpus)
    good = f"off on {count} GPUs" if not unsupported else f"not supported on {unsupported} GPUs"
    return verdict(on, good, unread)


GPU_MIG = Check(
    id="gpu.mig",
    title="MIG mode off",
    spec_fields=("profiles.*.gpu.model",),
    derive=_derive_mig,
    evaluate=_evaluate_mig,
    explain=lambda expected: "off (current and pending) on every GPU",
)


# --- gpu.ecc ---------------------------------------------------------------------------------


def _derive_ecc(c: Context) -> Expect | Skip:
    if (skip := _no_gpus(c)) is not None:
        return skip
    # Every GPU of the catalog is a data-center part with ECC memory, on from the factory:
    # off, a bit flip corrupts a training step silently and row remapping cannot act.
    return Expect(
        True,
        f"{c.p}.gpu.model",
        "drain {node}, enable ECC (nvidia-smi -i N -e 1), then reset the GPU or reboot",
    )


def _evaluate_ecc(expected: bool, facts: NodeFacts, view: ClusterView, node: str) -> Outcome:
    if (problem := _gpus_or(facts)) is not None:
        return problem
    off, unread = [], []
    for gpu in facts.gpus.get().gpus:
        current, pending = gpu.ecc_current, gpu.ecc_pending
        if current is None or pending is None:
            unread.append(f"GPU {gpu.index}: ECC mode not reported")
        elif not current:
            off.append(f"GPU {gpu.index} ECC off" + (", on after reset" if pending else ""))
        elif not pending:
            off.append(f"GPU {gpu.index} ECC on, off after reset")
    return verdict(off, f"on for {len(facts.gpus.get().gpus)} GPUs", unread)


GPU_ECC = Check(
    id="gpu.ecc",
    title="ECC enabled on every GPU",
    spec_fields=("profiles.*.gpu.model",),
    derive=_derive_ecc,
    evaluate=_evaluate_ecc,
    explain=lambda expected: "on (current and pending) for every GPU",
)


# --- gpu.recovery-action ---------------------------------------------------------------------

# NVML added the GPU recovery action (NVML_FI_DEV_GET_GPU_RECOVERY_ACTION) in driver 565
# (the NVML API reference's change log, "Changes between v560 and v565").
RECOVERY_ACTION_FROM_BRANCH = 565


def _derive_recovery_action(c: Context) -> Expect | Skip:
    if (skip := _no_gpus(c)) is not None:
        return skip
    driver = c.spec.software.nvidia_driver
    branch = driver.split(".")[0] if driver else ""
    if branch.isdigit() and int(branch) < RECOVERY_ACTION_FROM_BRANCH:
        return Skip(
            "software.nvidia_driver",
            f"driver {driver} does not report a GPU recovery action (from "
            f"{RECOVERY_ACTION_FROM_BRANCH})",
        )
    return Expect(
        "None",
        f"{c.p}.gpu",
        "the driver asks for a recovery (myriad health --explain gpu.recovery-action): drain "
        "{node}, stop its GPU processes, then reset the GPU (nvidia-smi -r) or reboot as it "
        "says",
    )


def _evaluate_recovery_action(
    expected: str, facts: NodeFacts, view: ClusterView, node: str
) -> Outcome:
    if (problem := _gpus_or(facts)) is not None:
        return problem
    asked, unread = [], []
    gpus = facts.gpus.get().gpus
    for gpu in gpus:
        if gpu.recovery_action is None:
            unread.append(f"GPU {gpu.index}: no recovery action reported")
        elif gpu.recovery_action != expected:
            asked.append(f"GPU {gpu.index}: {gpu.recovery_action}")
    return verdict(asked, f"{expected} on {len(gpus)} GPUs", unread)


GPU_RECOVERY_ACTION = Check(
    id="gpu.recovery-action",
    title="the driver asks for no GPU recovery (reset, reboot, drain)",
    spec_fields=("profiles.*.gpu", "software.nvidia_driver"),
    derive=_derive_recovery_action,
    evaluate=_evaluate_recovery_action,
    explain=lambda expected: f"{expected} on every GPU",
)
