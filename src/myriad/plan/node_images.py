"""What a baked node image holds: the record `myriad image build` writes beside the image.

A node image is built per profile (one server shape): the roles' install steps for every part
the profile's pools play. Its `content_hash` names its inputs (the base image, the roles and
playbooks, the variables the install steps read), so an unchanged input set is never rebuilt,
and `myriad validate` can tell a node started from an older image of its profile. The record
is plain JSON: the image carries it (`/etc/myriad/image.json`, and a Docker label locally), the
cluster's state folder keeps the current one per profile, and bare-metal PXE files and the AWS
stack read it from there.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

# Where a node started from a baked image finds the record of that image.
IMAGE_RECORD_PATH = "/etc/myriad/image.json"


@dataclass(frozen=True, slots=True)
class ImageArchive:
    """The image as a root file system archive (bare metal: what the PXE install unpacks)."""

    file: str
    sha256: str
    bytes: int


@dataclass(frozen=True, slots=True)
class ImageManifest:
    cluster: str
    profile: str
    content_hash: str
    # The image's name where it lives: a Docker tag locally, an AMI name on AWS.
    tag: str
    built_at: str
    # The image it was built from (the node image's id locally, the parent AMI on AWS).
    base: str
    # Role name → sha256 over the role's files; the playbooks under the key "playbooks".
    roles: Mapping[str, str] = field(default_factory=dict)
    # Debian package name → installed version, as dpkg reports them after the build.
    packages: Mapping[str, str] = field(default_factory=dict)
    archive: ImageArchive | None = None
    # AWS: the build kit the stack uploads and its Image Builder component applies (see
    # stacks/aws_images.py): a tar.gz rooted at `/` with the converge bundle under /opt/myriad
    # and the build inventory under /opt/myriad/image-build/.
    kit: ImageArchive | None = None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["roles"] = dict(sorted(self.roles.items()))
        data["packages"] = dict(sorted(self.packages.items()))
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ImageManifest:
        archive = data.get("archive")
        image_archive = (
            None
            if archive is None
            else ImageArchive(str(archive["file"]), str(archive["sha256"]), int(archive["bytes"]))
        )
        return cls(
            cluster=str(data["cluster"]),
            profile=str(data["profile"]),
            content_hash=str(data["content_hash"]),
            tag=str(data["tag"]),
            built_at=str(data["built_at"]),
            base=str(data["base"]),
            roles={str(k): str(v) for k, v in dict(data.get("roles") or {}).items()},
            packages={str(k): str(v) for k, v in dict(data.get("packages") or {}).items()},
            archive=image_archive,
            kit=_archive(data.get("kit")),
        )


def _archive(data: Mapping[str, Any] | None) -> ImageArchive | None:
    if data is None:
        return None
    return ImageArchive(str(data["file"]), str(data["sha256"]), int(data["bytes"]))
