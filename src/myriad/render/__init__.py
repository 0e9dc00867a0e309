"""From spec and plan to the artifacts other tools read: node lists, Ansible inventory."""
