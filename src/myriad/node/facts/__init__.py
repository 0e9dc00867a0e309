"""Facts: what a node is, each declared once with the probes it needs and its reader.

    fact.py       Fact: a value with what became of its probe (ok, missing, failed, ...)
    declare.py    Probe, Declared, fact(): how a fact module declares a fact
    probe.py      running a probe on the node: a command, a file, files (one record each)
    node.py       NodeFacts: one typed field per fact, what the checks read
    registry.py   every Declared of every fact module, checked against NodeFacts
    read.py       a gathered document -> NodeFacts (node_facts, unreadable, decode)
    <subject>.py  the facts of one subject: gpu, hca, pci, network, slurm, ...

The gatherer (myriad.node.gather) runs the registry's probes; node_facts runs its readers.
Standard library only, like the whole node package.
"""

from myriad.node.facts.clock import TimeSync
from myriad.node.facts.declare import Declared, Probe, ProbeRecord, Reading, read_probe
from myriad.node.facts.efa import parse_fi_info_domains
from myriad.node.facts.fact import NOT_GATHERED, Fact, FactState, ok
from myriad.node.facts.hca import HcaLink
from myriad.node.facts.hosts import HOSTS_BEGIN, HOSTS_END, HostsFile
from myriad.node.facts.limits import Memlock, init_memlock
from myriad.node.facts.mount import Mount
from myriad.node.facts.node import NodeFacts
from myriad.node.facts.pci import PciFunction, pcie_gen
from myriad.node.facts.read import SCHEMA, decode, node_facts, unreadable
from myriad.node.facts.registry import FACTS, PROBES
from myriad.node.facts.runner import DiskSpace
from myriad.node.facts.slurm import FileDigest, JobRun, SinfoNode

__all__ = [
    "FACTS",
    "HOSTS_BEGIN",
    "HOSTS_END",
    "NOT_GATHERED",
    "PROBES",
    "SCHEMA",
    "Declared",
    "DiskSpace",
    "Fact",
    "FactState",
    "FileDigest",
    "HcaLink",
    "HostsFile",
    "JobRun",
    "Memlock",
    "Mount",
    "NodeFacts",
    "PciFunction",
    "Probe",
    "ProbeRecord",
    "Reading",
    "SinfoNode",
    "TimeSync",
    "decode",
    "init_memlock",
    "node_facts",
    "ok",
    "parse_fi_info_domains",
    "pcie_gen",
    "read_probe",
    "unreadable",
]
