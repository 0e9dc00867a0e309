"""Validation checks: one declaration per check, in checks/<subject>.py (see README.md).

Standard library only: this package, myriad.node.facts and myriad.node.parsers are
what the node health runner imports on a node. Deriving expectations from the spec is the
controller's part (myriad.validate.expectations); it hands each check's `derive` a Context
and the checks never import the spec or the plan themselves.

    CHECKS                 every check, in report order (collected from the subject modules)
    BY_ID                  check id -> Check
    evaluate(...)          a cluster's expectations against its nodes' facts
    evaluate_node(...)     one node's (what the node health runner calls)
    NodeExpectations       plain data; to_dict() / from_dict() is the node's JSON document
"""

from myriad.node.checks.engine import (
    CHECK_ORDER,
    REACHABLE,
    TITLES,
    Prepared,
    cluster_view,
    evaluate,
    evaluate_node,
    prepare,
    reachable_result,
    unreachable_result,
    view_of,
)
from myriad.node.checks.model import (
    EXPECTATIONS_SCHEMA,
    STATUSES,
    Check,
    CheckResult,
    ClusterExpectations,
    ClusterView,
    Context,
    Expect,
    Expectation,
    NodeExpectations,
    Outcome,
    Skip,
    SlurmNodeView,
    Status,
)
from myriad.node.checks.registry import BY_ID, CHECKS

__all__ = [
    "BY_ID",
    "CHECKS",
    "CHECK_ORDER",
    "EXPECTATIONS_SCHEMA",
    "REACHABLE",
    "STATUSES",
    "TITLES",
    "Check",
    "CheckResult",
    "ClusterExpectations",
    "ClusterView",
    "Context",
    "Expect",
    "Expectation",
    "NodeExpectations",
    "Outcome",
    "Prepared",
    "Skip",
    "SlurmNodeView",
    "Status",
    "cluster_view",
    "evaluate",
    "evaluate_node",
    "prepare",
    "reachable_result",
    "unreachable_result",
    "view_of",
]
