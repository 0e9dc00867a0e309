"""Node health, the controller's side: the validation checks run on every node all the time
by myriad-health (myriad.node.health, standard library only: it runs on nodes).

    render.py   each node's document: its expectations and the spec's health policy
    view.py     `myriad health`: the cluster's health in one gathering pass
"""
