"""From spec and plan to the artifacts other tools read: the Ansible inventory."""
