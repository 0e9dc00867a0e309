"""Each RoCE rail's QoS (`mlnx_qos -i NETDEV`): trust mode, PFC, DSCP mapping."""

from __future__ import annotations

from collections.abc import Mapping

from myriad.node.facts.declare import Declared, Probe, Reading
from myriad.node.facts.fact import Fact
from myriad.node.facts.probe import run
from myriad.node.parsers import MlnxQos, parse_mlnx_qos

# One probe per netdev the gatherer is asked about: mlnx_qos:eth4, mlnx_qos:eth5, ...
MLNX_QOS = Probe(
    "mlnx_qos", lambda o: run(["mlnx_qos", "-i", o.item], o.timeout), each=lambda o: o.qos_nics
)
_PREFIX = MLNX_QOS.name + ":"


def _qos(r: Reading) -> Mapping[str, Fact[MlnxQos]]:
    return {
        name.split(":", 1)[1]: r.read(name, f"mlnx_qos -i {name[len(_PREFIX) :]}", parse_mlnx_qos)
        for name in r.probes
        if name.startswith(_PREFIX)
    }


# netdev -> its fact; a document that cannot be read has none.
QOS: Declared[Mapping[str, Fact[MlnxQos]]] = Declared(
    "qos", (MLNX_QOS,), _qos, unusable=lambda reason: {}
)
