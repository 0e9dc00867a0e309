"""Parser for `docker info --format '{{json .}}'`: runtimes, cgroup driver, data root."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from myriad.node.parsers.common import ParseFailure, guarded, load_json

__all__ = ["DockerInfo", "DockerRuntime", "parse_docker_info"]

TOOL = "docker info"


@dataclass(frozen=True, slots=True)
class DockerRuntime:
    name: str
    path: str | None


@dataclass(frozen=True, slots=True)
class DockerInfo:
    server_version: str
    default_runtime: str | None
    runtimes: tuple[DockerRuntime, ...]
    cgroup_driver: str | None
    cgroup_version: str | None
    data_root: str | None
    storage_driver: str | None
    warnings: tuple[str, ...]

    @property
    def runtime_names(self) -> frozenset[str]:
        return frozenset(runtime.name for runtime in self.runtimes)


def _optional_str(info: dict[str, Any], key: str) -> str | None:
    value = info.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ParseFailure(TOOL, f"{key} is not a string: {value!r}")
    return value


def _runtimes(info: dict[str, Any]) -> tuple[DockerRuntime, ...]:
    raw = info.get("Runtimes")
    if raw is None:
        return ()
    if not isinstance(raw, dict):
        raise ParseFailure(TOOL, "Runtimes is not an object")
    runtimes = []
    for name, spec in sorted(raw.items()):
        if not isinstance(spec, dict):
            raise ParseFailure(TOOL, f"runtime {name!r} is not an object")
        # Runtimes configured by runtimeType (containerd shims) have no path.
        path = spec.get("path")
        runtimes.append(DockerRuntime(name=name, path=path if isinstance(path, str) else None))
    return tuple(runtimes)


def _server_error(info: dict[str, Any]) -> str | None:
    errors = info.get("ServerErrors")
    if isinstance(errors, list) and errors:
        return str(errors[0])
    return None


@guarded(TOOL)
def parse_docker_info(text: str) -> DockerInfo:
    """Parse the JSON form of `docker info`; a client that reached no daemon fails."""
    info = load_json(TOOL, text)
    if not isinstance(info, dict):
        raise ParseFailure(TOOL, f"expected a JSON object, got {type(info).__name__}")
    version = _optional_str(info, "ServerVersion")
    if version is None:
        # The client still prints JSON when the daemon is down, with the error inside.
        error = _server_error(info)
        reason = f"no daemon answered: {error}" if error else "no ServerVersion"
        raise ParseFailure(TOOL, reason)
    warnings = info.get("Warnings")
    if warnings is None:
        warnings = []
    if not isinstance(warnings, list):
        raise ParseFailure(TOOL, "Warnings is not a list")
    return DockerInfo(
        server_version=version,
        default_runtime=_optional_str(info, "DefaultRuntime"),
        runtimes=_runtimes(info),
        cgroup_driver=_optional_str(info, "CgroupDriver"),
        cgroup_version=_optional_str(info, "CgroupVersion"),
        data_root=_optional_str(info, "DockerRootDir"),
        storage_driver=_optional_str(info, "Driver"),
        warnings=tuple(str(w) for w in warnings),
    )
