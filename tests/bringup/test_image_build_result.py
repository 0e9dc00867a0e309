"""`myriad image build` returns what it built (an `ImageBuildResult`); `views/images.py` draws
it, `--json` prints it with `format`, the phases stream on the reporter. The builds
themselves are faked here (the image phase has its own tests and the image-mode suite)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from myriad import JSON_FORMAT
from myriad.bringup import images
from myriad.bringup.images import ImageBuildResult, ImageOutcome
from myriad.cli import main
from myriad.plan.node_images import ImageArchive, ImageManifest


def manifest(profile: str, archive: ImageArchive | None = None) -> ImageManifest:
    return ImageManifest(
        "c", profile, "ab" * 32, f"myriad-c-{profile}:abababababab", "2026-12-03T18:00:00Z",
        "sha256:00", packages={"munge": "0.5.15"}, archive=archive,
    )  # fmt: skip


BUILT = ImageOutcome(manifest("gpu", ImageArchive("gpu.tar.zst", "ff", 10)), True, 61.2)
CURRENT = ImageOutcome(manifest("ctl"), False, 0.0)


@pytest.mark.parametrize(("kind", "archive"), [("local", False), ("baremetal", True)])
def test_image_build_returns_each_profiles_image_and_where_records_are(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, kind: str, archive: bool
) -> None:
    spec = SimpleNamespace(metadata=SimpleNamespace(name="c"), provider=SimpleNamespace(kind=kind))
    plan = SimpleNamespace(
        loaded=SimpleNamespace(spec=spec, catalog=None), usable_plan=lambda: None
    )
    state = SimpleNamespace(root=tmp_path, check=lambda: None)
    asked: dict[str, Any] = {}

    @contextlib.contextmanager
    def lock(*args: Any, **kwargs: Any) -> Iterator[None]:
        yield

    def build(*args: Any, **kwargs: Any) -> dict[str, ImageOutcome]:
        asked.update(kwargs)
        return {"gpu": BUILT, "ctl": CURRENT}

    monkeypatch.setattr(images, "planned", lambda path: plan)
    monkeypatch.setattr(images, "cluster_state", lambda name: state)
    monkeypatch.setattr(images, "build_inventory", lambda *a: None)
    monkeypatch.setattr(images, "hold_cluster_lock", lock)
    monkeypatch.setattr(images, "build_images", build)
    result = images.image_build(Path("c.yaml"), reporter=None, force=True)  # type: ignore[arg-type]
    assert asked["archive"] is archive and asked["force"] is True
    assert result.cluster == "c" and result.records == tmp_path / "images"
    assert list(result.images) == ["gpu", "ctl"] and result.images["gpu"] is BUILT
    assert result.file(BUILT) == tmp_path / "images" / "gpu.tar.zst"
    assert result.file(CURRENT) is None


def test_the_cli_draws_the_images_or_prints_them_as_json(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    result = ImageBuildResult("c", {"gpu": BUILT, "ctl": CURRENT}, Path("/s/images"))
    monkeypatch.setattr(images, "image_build", lambda spec, **kwargs: result)
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["image", "build", "c.yaml"]) == 0
    out = capsys.readouterr().out
    assert "Node images of c" in out and "built (61 s)" in out and "current, not rebuilt" in out
    assert "/s/images/gpu.tar.zst" in out
    assert "records: /s/images/<profile>.json" in out
    assert main(["image", "build", "c.yaml", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["format"] == JSON_FORMAT and document["records"] == "/s/images"
    first = document["images"][0]
    assert first["profile"] == "gpu" and first["built"] is True and first["seconds"] == 61.2
    assert first["file"] == "/s/images/gpu.tar.zst" and first["manifest"]["packages"] == {
        "munge": "0.5.15"
    }
