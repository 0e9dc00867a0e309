"""What runs on the nodes: standard library only, Python 3.10 and later.

Everything under this package is shipped to the nodes as one artefact and imported there by
the health runner, the converge runner and the facts playbook, next to whatever Python the
node's OS ships (Ubuntu 22.04: 3.10). It imports nothing outside the standard library and
nothing of Myriad outside `myriad.node`; the controller side imports it, never the reverse.
"""
