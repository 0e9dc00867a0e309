"""`docker info --format '{{json .}}'` parser.

fixtures/docker-info_20.10.24_runc-only.json and ..._daemon-unreachable.json are real
output captured on a development machine (Docker 20.10.24 daemon, 28.2.2 client);
..._edited_nvidia-default-runtime.json is the first with only the runtime, cgroup and
data-root fields changed to what the NVIDIA Container Toolkit documentation configures
(runtimes.nvidia.path = nvidia-container-runtime, default-runtime nvidia).
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from myriad.node.parsers import DockerInfo, DockerRuntime, ParseFailure, parse_docker_info
from myriad.node.parsers.common import INTERNAL_ERROR

RUNC_ONLY = "docker-info_20.10.24_runc-only.json"
NVIDIA = "docker-info_edited_nvidia-default-runtime.json"
DAEMON_DOWN = "docker-info_client-28.2.2_daemon-unreachable.json"


def test_real_capture_without_nvidia_runtime(fixture_text):
    info = parse_docker_info(fixture_text(RUNC_ONLY))
    assert info.server_version == "20.10.24+dfsg1"
    assert info.default_runtime == "runc"
    assert info.runtime_names == {"io.containerd.runc.v2", "io.containerd.runtime.v1.linux", "runc"}
    assert "nvidia" not in info.runtime_names
    assert (info.cgroup_driver, info.cgroup_version) == ("cgroupfs", "1")
    assert info.data_root == "/var/lib/docker"
    assert info.storage_driver == "overlay2"
    assert info.warnings == ()


def test_nvidia_default_runtime(fixture_text):
    info = parse_docker_info(fixture_text(NVIDIA))
    assert info.default_runtime == "nvidia"
    assert DockerRuntime("nvidia", "nvidia-container-runtime") in info.runtimes
    assert (info.cgroup_driver, info.cgroup_version) == ("systemd", "2")
    assert info.data_root == "/data/docker"
    assert info.warnings == ("WARNING: bridge-nf-call-iptables is disabled",)


def test_unreachable_daemon_fails(fixture_text):
    # The client still prints its JSON, with every server field empty.
    with pytest.raises(ParseFailure, match="no ServerVersion"):
        parse_docker_info(fixture_text(DAEMON_DOWN))


def test_server_errors_become_the_reason():
    # Clients before 23.0 put the connection error into the JSON as ServerErrors.
    document = {
        "ServerVersion": "",
        "ServerErrors": ["Cannot connect to the Docker daemon at unix:///var/run/docker.sock."],
    }
    with pytest.raises(ParseFailure, match="no daemon answered: Cannot connect"):
        parse_docker_info(json.dumps(document))


def test_runtime_without_path():
    document = {
        "ServerVersion": "27.3.1",
        "DefaultRuntime": "runc",
        "Runtimes": {"runc": {"path": "runc"}, "gvisor": {"runtimeType": "io.containerd.runsc.v1"}},
    }
    info = parse_docker_info(json.dumps(document))
    assert info.runtimes == (DockerRuntime("gvisor", None), DockerRuntime("runc", "runc"))


@pytest.mark.parametrize("name", [RUNC_ONLY, NVIDIA])
def test_truncations(fixture_text, check_truncations, name):
    check_truncations(parse_docker_info, fixture_text(name))


@pytest.mark.parametrize(
    ("document", "reason"),
    [
        ("[]", "JSON object"),
        ('{"ServerVersion": 27}', "not a string"),
        ('{"ServerVersion": "27.3.1", "Runtimes": []}', "Runtimes"),
        ('{"ServerVersion": "27.3.1", "Runtimes": {"runc": "runc"}}', "runc"),
        ('{"ServerVersion": "27.3.1", "Warnings": "none"}', "Warnings"),
        ("{'ServerVersion': '27'}", "not valid JSON"),
    ],
)
def test_malformed(document, reason):
    with pytest.raises(ParseFailure, match=reason):
        parse_docker_info(document)


def test_empty_and_garbage(garbage):
    for text in garbage:
        with pytest.raises(ParseFailure):
            parse_docker_info(text)


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["ServerVersion", "Runtimes", "DefaultRuntime", "Warnings", "Driver"]),
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.text(max_size=5),
            lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner),
            max_leaves=10,
        ),
    )
)
def test_fuzz_never_raises_anything_else(document):
    try:
        assert isinstance(parse_docker_info(json.dumps(document)), DockerInfo)
    except ParseFailure as failure:
        assert not failure.reason.startswith(INTERNAL_ERROR), failure
