"""Provisioning: the local container environment that stands in for cluster nodes, and reading
Pulumi stack outputs for real environments."""
