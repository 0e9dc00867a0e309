"""Judge the hardware in a box with the checks `myriad validate` runs.

The verify play gathers the node's facts with Myriad's gatherer (as `playbooks/facts.yml`
does) and pipes them here, on the controller, with an expectation document written by hand
from the scenario's inventory. Evaluation is the node-side code of `myriad.node.checks`,
the same code the node health runner uses. Prints one line per check; exits 1 unless every
check passed.

Usage: evaluate.py EXPECTATIONS_JSON < gathered.json
"""

from __future__ import annotations

import json
import sys

from myriad.node.checks.engine import evaluate_node, view_of
from myriad.node.checks.model import NodeExpectations
from myriad.node.facts import decode, node_facts


def main(argv: list[str]) -> int:
    expectations = NodeExpectations.from_dict(json.loads(argv[1]))
    facts = node_facts(expectations.node, decode(sys.stdin.read()))
    results = evaluate_node(expectations, facts, view_of(facts, "none"))
    for r in results:
        print(f"{r.status:<8} {r.check:<14} expected {r.expected!r}, got {r.actual!r}")
    return 0 if all(r.status == "pass" for r in results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
