"""Node health: the validation checks, run on every node all the time (see node.py).

    node.py     myriad-health, the node's runner (standard library only: it runs on nodes)
    render.py   each node's document: its expectations and the spec's health policy
    view.py     `myriad health`: the cluster's health in one gathering pass

Nothing is imported here: the node imports `myriad.health.node` alone.
"""
