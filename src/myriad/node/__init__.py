"""What runs on the nodes: standard library only, Python 3.10 and later.

Everything under this package is shipped to the nodes as one artefact and imported there by
the health runner, the converge runner, the facts playbook and the rdma and nccl roles
(hardware discovery), next to whatever Python the node's OS ships (Ubuntu 22.04: 3.10). It
imports nothing outside the standard library and nothing of Myriad outside `myriad.node` at
run time (a check's `derive`, the controller's half of its declaration, names the spec's and
the plan's types for type checkers only, in `checks/model.py`); the controller side imports
it, never the reverse.

    facts/        one declaration per fact (its probes and reader), the registry, NodeFacts
    gather.py     runs the declared probes: every tool's raw output, one JSON document
    parsers/      each tool's output, parsed (pure)
    checks/       the check model, the registry, the engine, one module per subject
    health.py     myriad-health, the node health runner
    converge.py   myriad-converge, image mode's runner of site.yml against the node itself
    hardware/     discovery: the node's hardware map, its check, the rules pinning RDMA names
"""
