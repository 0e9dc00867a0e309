"""Kubernetes: the nodes as the API server has them (`kubectl get nodes -o json`)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from myriad.node.facts.declare import Probe, controller_is, fact
from myriad.node.facts.probe import run
from myriad.node.parsers import parse_kubectl_nodes

if TYPE_CHECKING:
    from myriad.node.facts.probe import Record

KUBECONFIGS = ("/etc/kubernetes/admin.conf", "/root/.kube/config")


def kubectl_nodes(timeout: float) -> Record:
    env = dict(os.environ)
    if "KUBECONFIG" not in env:
        for path in KUBECONFIGS:
            if os.path.isfile(path):
                env["KUBECONFIG"] = path
                break
    return run(["kubectl", "get", "nodes", "-o", "json"], timeout, env=env)


KUBE_NODES = fact(
    "kube_nodes",
    Probe("kubectl_nodes", lambda o: kubectl_nodes(o.timeout), when=controller_is("kubernetes")),
    "kubectl get nodes",
    parse_kubectl_nodes,
)
