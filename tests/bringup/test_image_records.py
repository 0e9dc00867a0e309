"""The one reader of `<state>/images/<profile>.json`: bring-up, validation and the image roll
see the same records, and a damaged one stops them with where it is and what to do."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from myriad.bringup.image_records import read_manifest, read_manifests
from myriad.errors import FlowError
from myriad.plan.node_images import ImageManifest

MANIFEST = ImageManifest(
    cluster="lab",
    profile="container",
    content_hash="ab" * 32,
    tag="myriad-image-lab-container:abababababab",
    built_at="2026-12-01T22:00:00Z",
    base="sha256:482f",
    roles={"common": "1"},
    packages={"munge": "0.5.15-2"},
)


def test_records_of_the_asked_profiles_only(tmp_path: Path) -> None:
    (tmp_path / "container.json").write_text(json.dumps(MANIFEST.to_dict()))
    (tmp_path / "gone.json").write_text(json.dumps(MANIFEST.to_dict()))
    assert read_manifests(tmp_path, ["container", "gpu"]) == {"container": MANIFEST}
    assert read_manifest(tmp_path, "gpu") is None


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ('{"tag": "x"', "Expecting"),
        ('{"tag": "x"}', "'cluster'"),
        ("[1]", "a JSON list, not an object"),
    ],
    ids=["truncated", "missing-field", "a-list"],
)
def test_a_damaged_record_stops_with_its_path_and_the_way_out(
    tmp_path: Path, text: str, why: str
) -> None:
    (tmp_path / "container.json").write_text(text)
    with pytest.raises(FlowError) as error:
        read_manifests(tmp_path, ["container"])
    message = str(error.value)
    assert message.startswith(f"{tmp_path / 'container.json'} is damaged (")
    assert why in message
    assert message.endswith("move it away and run again: the image is rebuilt")
