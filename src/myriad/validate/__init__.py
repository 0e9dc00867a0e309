"""Validation: compare facts gathered from every node with what the spec promises."""
