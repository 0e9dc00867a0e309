"""Provisioning: the local container environment that stands in for cluster nodes, reading
Pulumi stack outputs for real environments, and `resolve_cluster` (spec → inventory)."""
