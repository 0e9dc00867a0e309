"""`myriad image build`: a node image per profile, built by the same roles, built once.

An image's content hash names everything the image phase can read — the node image it starts
from, Myriad's roles and playbooks and the Ansible that runs them (`converge_bundle`), the
variables of the build inventory (`render.image_inventory`) — so an unchanged cluster never
rebuilds, and a changed role variable that the image reads does. The current record per
profile is `<state>/images/<profile>.json`; each build's record, log and Ansible events are
in its run folder.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from myriad import paths
from myriad.bringup.flow import ClusterState, cluster_state, planned
from myriad.bringup.image_records import read_manifest
from myriad.bringup.lock import hold_cluster_lock
from myriad.bringup.reporting import Reporter
from myriad.errors import BadArguments, FlowError, RunInterrupted
from myriad.fsutil import atomic_write_text
from myriad.plan.node_images import ImageArchive, ImageManifest
from myriad.plan.pipeline import PlanResult
from myriad.provision import converge_bundle, local_image
from myriad.render.image_inventory import (
    build_inputs_digest,
    image_build_inventory,
    profiles_in_use,
)
from myriad.render.inventory import Inventory, build_inventory
from myriad.render.writer import write_inventory
from myriad.runner import TUNED, Timeouts, Tuning, new_run_dir, run_playbook
from myriad.spec.models import Cluster


@dataclass(frozen=True, slots=True)
class ImageOutcome:
    manifest: ImageManifest
    built: bool
    seconds: float


@dataclass(frozen=True, slots=True)
class ImageBuildResult:
    """`myriad image build`: each profile's image (built this run or current), and the folder
    of the current records (`<records>/<profile>.json`)."""

    cluster: str
    images: Mapping[str, ImageOutcome]  # by profile, in the order they were built
    records: Path

    def file(self, outcome: ImageOutcome) -> Path | None:
        """The archive (bare metal) or kit (AWS) the image carries, if any."""
        carried = outcome.manifest.archive or outcome.manifest.kit
        return None if carried is None else self.records / carried.file

    def to_dict(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "records": str(self.records),
            "images": [
                {
                    "profile": profile,
                    "built": outcome.built,
                    "seconds": round(outcome.seconds, 3),
                    "file": None if self.file(outcome) is None else str(self.file(outcome)),
                    "manifest": outcome.manifest.to_dict(),
                }
                for profile, outcome in self.images.items()
            ],
        }


def images_dir(state: ClusterState) -> Path:
    return state.root / "images"


def current_manifest(state: ClusterState, profile: str) -> ImageManifest | None:
    return read_manifest(images_dir(state), profile)


_VARIABLE = re.compile(r"\b([a-z][a-z0-9]*_[a-z0-9_]+)\b")


def image_variables() -> set[str]:
    """The variables the image phase reads: every role's `image` entry point, the names the
    layer sort (playbooks/layers.yml) and playbooks/image.yml use, every myriad_* variable
    but the record of the image itself."""
    names: set[str] = set()
    for spec_file in sorted(paths.roles_dir().glob("*/meta/argument_specs.yml")):
        entry = (yaml.safe_load(spec_file.read_text()) or {}).get("argument_specs", {})
        names.update((entry.get("image") or {}).get("options") or {})
    for playbook in ("layers.yml", "image.yml"):
        path = paths.playbook(playbook)
        if path.is_file():
            names.update(_VARIABLE.findall(path.read_text()))
    # The declarations of every myriad_* variable: the file's one top-level mapping.
    for declarations in yaml.safe_load(paths.playbook("vars/myriad.yml").read_text()).values():
        names.update(declarations)
    return names - {"myriad_image", "myriad_address"}


def chosen_profiles(spec: Cluster, profiles: Sequence[str] | None) -> list[str]:
    """The profiles asked for (all in use when none); BadArguments for one no pool uses."""
    in_use = profiles_in_use(spec)
    wanted = list(profiles) if profiles else in_use
    unknown = sorted(set(wanted) - set(in_use))
    if unknown:
        raise BadArguments(
            f"--profile {', '.join(unknown)}: no pool of {spec.metadata.name} uses it; profiles "
            "in use: " + ", ".join(in_use)
        )
    return wanted


def content_hash(base: str, bundle: str, inputs: str) -> str:
    return hashlib.sha256(f"base={base}\nbundle={bundle}\ninputs={inputs}\n".encode()).hexdigest()


def build_images(
    result: PlanResult,
    inventory: Inventory,
    state: ClusterState,
    reporter: Reporter,
    *,
    profiles: Sequence[str] | None = None,
    force: bool = False,
    archive: bool = False,
    tuning: Tuning = TUNED,
) -> dict[str, ImageOutcome]:
    """Each profile's image, built only where its content hash changed (or `force`)."""
    spec = result.loaded.spec
    wanted = chosen_profiles(spec, profiles)
    base = local_image.base_image_id()
    bundle = converge_bundle.bundle_digest()
    variables = image_variables()
    outcomes = {}
    for profile in wanted:
        start = time.monotonic()
        build = image_build_inventory(spec, inventory, profile, connection={})
        digest = content_hash(base, bundle, build_inputs_digest(build, variables))
        tag = local_image.image_tag(spec.metadata.name, profile, digest)
        current = current_manifest(state, profile)
        with reporter.phase(f"image {profile}") as notes:
            if (
                not force
                and current is not None
                and current.content_hash == digest
                and local_image.image_id(tag) is not None
                and (not archive or current.archive is not None)
            ):
                notes.append(f"current ({digest[:12]}), not rebuilt")
                outcomes[profile] = ImageOutcome(current, False, time.monotonic() - start)
                continue
            manifest = _build(result, inventory, state, profile, digest, base, archive, tuning)
            notes.append(f"built {manifest.tag}")
            outcomes[profile] = ImageOutcome(manifest, True, time.monotonic() - start)
    return outcomes


def _build(
    result: PlanResult,
    inventory: Inventory,
    state: ClusterState,
    profile: str,
    digest: str,
    base: str,
    archive: bool,
    tuning: Tuning,
) -> ImageManifest:
    spec = result.loaded.spec
    run_dir = new_run_dir(state.root, f"image-{profile}")
    tag = local_image.image_tag(spec.metadata.name, profile, digest)
    with local_image.build_container(spec, profile) as container:
        connection = {
            "ansible_connection": "docker",
            "ansible_host": container,
            "ansible_become": False,
            "ansible_python_interpreter": "/usr/bin/python3",
        }
        build = image_build_inventory(spec, inventory, profile, connection)
        write_inventory(build, run_dir / "build-inventory")
        local_image.copy_tar(container, converge_bundle.write_bundle)
        settings = spec.bringup
        outcome = run_playbook(
            paths.playbook("image.yml"),
            run_dir / "build-inventory" / "hosts.yml",
            run_dir,
            hosts=1,
            tuning=tuning,
            timeouts=Timeouts(settings.task_timeout_s, settings.connect_timeout_s),
        )
        if outcome.interrupted:
            raise RunInterrupted(
                f"the image build of {profile} was interrupted during "
                f"{outcome.interrupted_during}; nothing was committed"
            )
        if not outcome.ok:
            failure = outcome.failures[0] if outcome.failures else None
            where = f"{failure.task}: {failure.message}" if failure else outcome.status
            raise FlowError(
                f"the image build of profile {profile} failed ({where}); nothing was committed. "
                f"Ansible's log: {run_dir / 'artifacts'}"
            )
        manifest = ImageManifest(
            cluster=spec.metadata.name,
            profile=profile,
            content_hash=digest,
            tag=tag,
            built_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            base=base,
            roles=converge_bundle.role_digests(),
            packages=local_image.installed_packages(container),
        )
        local_image.commit(container, tag, manifest.to_dict())
        if archive:
            # Bare metal: the same file system as the archive the PXE install unpacks.
            name = f"{profile}-{digest[:12]}.tar.gz"
            sha256, size = local_image.export_rootfs(container, images_dir(state) / name)
            manifest = replace(manifest, archive=ImageArchive(name, sha256, size))
    text = json.dumps(manifest.to_dict(), indent=2) + "\n"
    atomic_write_text(run_dir / "image.json", text)
    images_dir(state).mkdir(parents=True, exist_ok=True)
    atomic_write_text(images_dir(state) / f"{profile}.json", text)
    return manifest


def build_kit(
    result: PlanResult, inventory: Inventory, state: ClusterState, profile: str
) -> ImageOutcome:
    """AWS: no image is built here. The kit — the bundle and the build inventory (connection
    local) rooted at `/` — is what the stack's Image Builder component unpacks and applies on
    the build instance (stacks/aws_images.py); its record names the kit by digest."""
    spec = result.loaded.spec
    start = time.monotonic()
    local_connection = {
        "ansible_connection": "local",
        "ansible_python_interpreter": "/usr/bin/python3",
    }
    build = image_build_inventory(spec, inventory, profile, local_connection)
    base = f"aws:{spec.software.os}"
    inputs = build_inputs_digest(build, image_variables())
    digest = content_hash(base, converge_bundle.bundle_digest(), inputs)
    current = current_manifest(state, profile)
    name = f"{profile}-{digest[:12]}.kit.tar.gz"
    folder = images_dir(state)
    if current is not None and current.content_hash == digest and (folder / name).is_file():
        return ImageOutcome(current, False, time.monotonic() - start)
    folder.mkdir(parents=True, exist_ok=True)
    run_dir = new_run_dir(state.root, f"image-{profile}")
    write_inventory(build, run_dir / "build-inventory")
    sha256, size = converge_bundle.write_kit(folder / name, run_dir / "build-inventory")
    manifest = ImageManifest(
        cluster=spec.metadata.name,
        profile=profile,
        content_hash=digest,
        tag=f"myriad-{spec.metadata.name}-{profile}-{digest[:12]}",
        built_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        base=base,
        roles=converge_bundle.role_digests(),
        kit=ImageArchive(name, sha256, size),
    )
    text = json.dumps(manifest.to_dict(), indent=2) + "\n"
    atomic_write_text(run_dir / "image.json", text)
    atomic_write_text(folder / f"{profile}.json", text)
    return ImageOutcome(manifest, True, time.monotonic() - start)


def image_build(
    spec_path: Path,
    *,
    reporter: Reporter,
    profiles: Sequence[str] = (),
    force: bool = False,
    wait_s: float = 0.0,
    tuning: Tuning = TUNED,
) -> ImageBuildResult:
    """`myriad image build`: local → a Docker image; bare metal → that image's root file
    system as an archive too; AWS → the kit its Image Builder applies. Phases go to
    `reporter`; what was built is the result."""
    result = planned(spec_path)
    spec = result.loaded.spec
    plan = result.usable_plan()
    state = cluster_state(spec.metadata.name)
    state.check()
    inventory = build_inventory(spec, result.loaded.catalog, plan)
    kind = spec.provider.kind
    with hold_cluster_lock(state, "image build", wait_s=wait_s):
        if kind == "aws":
            wanted = chosen_profiles(spec, profiles)
            outcomes = {p: build_kit(result, inventory, state, p) for p in wanted}
        else:
            archive = kind == "baremetal"
            outcomes = build_images(result, inventory, state, reporter, profiles=profiles,
                                    force=force, archive=archive, tuning=tuning)  # fmt: skip
    return ImageBuildResult(spec.metadata.name, outcomes, images_dir(state))
