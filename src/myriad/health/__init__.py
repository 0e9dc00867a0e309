"""Node health, the controller's side: the validation checks run on every node all the time
by myriad-health (myriad.node.health, standard library only: it runs on nodes).

    render.py   each node's document: its expectations and the spec's health policy
    report.py   `myriad health`: the cluster's health in one gathering pass
    actions.py  the action each finding asks for (actions.yaml: NVIDIA's XID catalog, the
                driver's GPU Recovery Action, Myriad's checks); `myriad health --explain`
    remedy.py   the remediation core: each drained node's decision within the spec's budget
                and breaker, the action log's records and the needs-hardware hook's payload
"""
