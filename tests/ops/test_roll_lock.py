"""Day-2 operations hold the same cluster lock as `up`, `bringup` and `down`: a roll, remove
or replace never runs on nodes that a bring-up is changing, and the reverse."""

from __future__ import annotations

from pathlib import Path

import pytest

from myriad.bringup.lock import hold_cluster_lock, is_locked
from myriad.errors import ClusterBusy
from myriad.ops.roll import cluster_lock


def test_a_roll_refuses_while_a_bringup_holds_the_cluster(tmp_path: Path) -> None:
    with (
        hold_cluster_lock(tmp_path, "bringup"),
        pytest.raises(ClusterBusy, match="bringup"),
        cluster_lock(tmp_path, "roll"),
    ):
        pytest.fail("the roll ran while the bring-up held the cluster")


def test_a_bringup_refuses_while_a_roll_holds_the_cluster(tmp_path: Path) -> None:
    with cluster_lock(tmp_path, "roll"):
        assert is_locked(tmp_path)
        with pytest.raises(ClusterBusy, match="roll"), hold_cluster_lock(tmp_path, "bringup"):
            pytest.fail("the bring-up ran while the roll held the cluster")
    assert not is_locked(tmp_path)
