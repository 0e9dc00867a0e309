"""Which slurm.conf changes a reconfigure applies and which need slurmctld restarted."""

from __future__ import annotations

from myriad.ops.slurmconf import changed_keys, diff_texts, reload_for_texts

BEFORE = """# Managed by Ansible
ClusterName=c
SlurmctldHost=ctl01(172.31.66.2)
SlurmctldPort=6817
MessageTimeout=30
NodeName=node[01-03] Sockets=1 CoresPerSocket=2 RealMemory=1800
PartitionName=batch Nodes=ALL Default=YES State=UP
"""


def test_a_timeout_is_reconfigured_in_place() -> None:
    after = BEFORE.replace("MessageTimeout=30", "MessageTimeout=40")
    assert reload_for_texts(BEFORE, after) == ("reconfigure", ["messagetimeout"])


def test_nothing_changed_needs_nothing() -> None:
    assert reload_for_texts(BEFORE, BEFORE + "# a comment\n") == ("none", [])


def test_a_port_or_a_new_node_needs_a_restart() -> None:
    port = BEFORE.replace("SlurmctldPort=6817", "SlurmctldPort=6900")
    assert reload_for_texts(BEFORE, port)[0] == "restart"
    grown = BEFORE.replace("node[01-03]", "node[01-04]")
    reload, keys = reload_for_texts(BEFORE, grown)
    assert reload == "restart"
    assert keys == ["nodename=node[01-03]", "nodename=node[01-04]"]


def test_new_attributes_of_the_same_nodes_are_reconfigured() -> None:
    more_memory = BEFORE.replace("RealMemory=1800", "RealMemory=1900")
    assert reload_for_texts(BEFORE, more_memory) == ("reconfigure", ["nodename=node[01-03]"])


def test_partition_change_is_a_reconfigure() -> None:
    after = BEFORE.replace("State=UP", "State=UP MaxTime=60")
    assert changed_keys(BEFORE, after) == ["partitionname=batch"]
    assert reload_for_texts(BEFORE, after)[0] == "reconfigure"


def test_diff_texts_reads_ansibles_shapes() -> None:
    assert diff_texts({"before": "a", "after": "b"}) == ("a", "b")
    assert diff_texts([{"prepared": "x"}, {"before": "", "after": "b"}]) == ("", "b")
    assert diff_texts(None) is None
