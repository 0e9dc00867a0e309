"""The cluster's current image per profile, as `myriad image build` recorded it.

One reader for `<state>/images/<profile>.json`, so bring-up, validation and the image roll
agree on what a damaged record means: the run stops and says how to rebuild.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from myriad.errors import FlowError
from myriad.plan.node_images import ImageManifest


def read_manifest(folder: Path, profile: str) -> ImageManifest | None:
    """The profile's record in `folder`; None when none was built."""
    path = folder / f"{profile}.json"
    try:
        data = json.loads(path.read_text())
        if not isinstance(data, dict):
            raise TypeError(f"a JSON {type(data).__name__}, not an object")
        return ImageManifest.from_dict(data)
    except FileNotFoundError:
        return None
    except (ValueError, KeyError, TypeError) as exc:
        raise FlowError(
            f"{path} is damaged ({exc}); move it away and run again: the image is rebuilt"
        ) from None


def read_manifests(folder: Path, profiles: Sequence[str]) -> dict[str, ImageManifest]:
    """Each of `profiles` that has a record."""
    found = {}
    for profile in profiles:
        manifest = read_manifest(folder, profile)
        if manifest is not None:
            found[profile] = manifest
    return found
