"""The container runtimes: `docker info`, /etc/docker/daemon.json, containerd's config."""

from __future__ import annotations

from myriad.node.facts.declare import command, fact, file, files, json_of, text_files
from myriad.node.parsers import parse_docker_info

DOCKER = fact(
    "docker",
    command("docker_info", "docker", "info", "--format", "{{json .}}"),
    "docker info",
    parse_docker_info,
)
DOCKER_DAEMON = fact(
    "docker_daemon",
    file("docker_daemon_json", "/etc/docker/daemon.json"),
    "/etc/docker/daemon.json",
    json_of("daemon.json"),
)
CONTAINERD = fact(
    "containerd",
    files("containerd_config", "/etc/containerd/config.toml", "/etc/containerd/conf.d/*.toml"),
    "containerd config",
    text_files("containerd config"),
)
