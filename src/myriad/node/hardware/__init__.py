"""The node's hardware, found in sysfs rather than assumed from the spec.

`sysfs` reads a sysfs root (the live `/sys`, or a captured tree in a test) and can record
what it read; `tree` writes and reads such a record as one text file; `discover` turns the
PCI tree, `class/infiniband` and `class/net` into the node's hardware map (GPUs, ports, the
PCIe switch each port shares with which GPU); `profile` checks that map against what the
spec's profile promises and says, per port, what is wrong and how to fix it.
"""
