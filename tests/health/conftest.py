"""The node of the node health runner's tests: tests/health_node.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from health_node import Node, make_node


@pytest.fixture
def node(tmp_path: Path) -> Node:
    return make_node(tmp_path)
