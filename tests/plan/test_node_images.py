"""The node image record: what `myriad image build` writes and validation reads back."""

from __future__ import annotations

import json

from myriad.plan.node_images import ImageArchive, ImageManifest


def test_the_record_survives_json_and_sorts_its_tables() -> None:
    manifest = ImageManifest(
        cluster="lab",
        profile="dgx",
        content_hash="ab" * 32,
        tag="myriad-image-lab-dgx:abababababab",
        built_at="2026-12-01T22:00:00Z",
        base="sha256:482f",
        roles={"slurm": "2", "common": "1"},
        packages={"slurmd": "22.05.8-4", "munge": "0.5.15-2"},
        archive=ImageArchive(file="dgx-abababababab.tar.gz", sha256="cd" * 32, bytes=812),
    )
    text = json.dumps(manifest.to_dict())
    assert list(json.loads(text)["roles"]) == ["common", "slurm"]
    assert ImageManifest.from_dict(json.loads(text)) == manifest
    bare = ImageManifest.from_dict({**manifest.to_dict(), "archive": None})
    assert bare.archive is None and bare.packages == manifest.packages
