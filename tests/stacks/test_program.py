"""The program's frame: provider registry, config reading, the entry point Pulumi runs, and the
instance-type table. Under Pulumi mocks; the Pulumi CLI itself is not installable here.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from typing import Any

import pulumi
import pytest

from myriad.spec import load_spec
from stacks import program
from stacks.instance_types import GPU_DEFAULTS, INSTANCE_TYPES, check_overrides, instance_type
from stacks.interface import StackError
from stacks.settings import PROJECT_ROOT, StackFileConfig, read_settings, spec_path

from stack_harness import ADMIN_KEY, REPO, run_program, spec_with, stack_config

LOCAL = REPO / "inventories/local/cluster.yaml"
STARTER = REPO / "inventories/starter-64/cluster.yaml"
AWS_DEV = REPO / "inventories/aws-dev/cluster.yaml"


def test_local_has_no_stack_and_says_what_to_run_instead() -> None:
    with pytest.raises(StackError, match=r"kind local has no Pulumi stack.*myriad up"):
        program.provider_build("local")


def test_every_registered_provider_builds() -> None:
    for kind in program.PROVIDERS:
        assert callable(program.provider_build(kind))


def test_a_provider_whose_sdk_is_missing_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(program.PROVIDERS, "aws", "pulumi_nonexistent_sdk")
    with pytest.raises(StackError, match=r"pip install 'myriad-cluster\[aws\]'"):
        program.provider_build("aws")


def test_main_builds_the_stack_its_config_names() -> None:
    def body() -> dict[str, Any]:
        program.main()
        return {}

    built = run_program(body, config=stack_config("aws-dev"))
    # ctl01 and login01 as instances, gpu01 and gpu02 as one EC2 Fleet request.
    assert len(built.of_type("ec2/instance:Instance")) == 2
    assert len(built.of_type("ec2/fleet:Fleet")) == 1


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("inventories/nowhere/cluster.yaml", "no such file"),
        ("inventories/local/cluster.yaml", "has no Pulumi stack"),
    ],
)
def test_main_reports_problems_without_a_traceback(spec: str, message: str) -> None:
    def body() -> dict[str, Any]:
        program.main()
        return {}

    with pytest.raises(pulumi.RunError, match=message):
        run_program(body, config={"myriad:spec": spec})


def test_the_entry_point_runs_as_pulumi_runs_it() -> None:
    # pulumi-language-python runs the `main:` folder with that folder as the working directory.
    script = textwrap.dedent(
        f"""
        import runpy, sys
        sys.path.insert(0, {str(REPO / "tests" / "stacks")!r})
        import pulumi
        from stack_harness import run_program
        sys.path.remove({str(REPO / "tests" / "stacks")!r})
        built = run_program(
            lambda: runpy.run_path(".", run_name="__main__") and {{}},
            config={{"myriad:spec": "inventories/aws-dev/cluster.yaml"}},
        )
        machines = ("ec2/instance:Instance", "ec2/fleet:Fleet")
        print(sum(r.type.endswith(machines) for r in built.resources))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO / "stacks",
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "3"


def test_spec_path_is_relative_to_the_project() -> None:
    config = StackFileConfig({"myriad:spec": "inventories/aws-dev/cluster.yaml"})
    assert spec_path(config) == PROJECT_ROOT / "inventories/aws-dev/cluster.yaml"
    with pytest.raises(StackError, match="pulumi config set myriad:spec"):
        spec_path(StackFileConfig({}))


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"myriad:island": -1}, "island must be 0 or more"),
        ({"myriad:powerTimeoutSeconds": 0}, "powerTimeoutSeconds must be a positive"),
        ({"myriad:sshAuthorizedKeys": ["ssh-ed25519"]}, "not an OpenSSH public key"),
        ({"myriad:sshAuthorizedKeys": "ssh-ed25519 AAAA"}, "is not a valid 'JSON object'"),
    ],
)
def test_bad_config_values_are_named(extra: dict[str, Any], message: str) -> None:
    spec = load_spec(AWS_DEV).spec

    def body() -> dict[str, Any]:
        read_settings(pulumi.Config("myriad"), spec, AWS_DEV)
        return {}

    with pytest.raises(StackError, match=message):
        run_program(body, config={**stack_config("aws-dev"), **extra})


def test_bmc_secret_of_the_wrong_shape_is_named() -> None:
    spec = spec_with(STARTER, hosts=True)
    config = {
        **stack_config("starter-64"),
        "myriad:sshAuthorizedKeys": [ADMIN_KEY],
        "myriad:bmc-admin": "admin:hunter2",
    }

    def body() -> dict[str, Any]:
        settings = read_settings(pulumi.Config("myriad"), spec, STARTER)
        assert settings.bmc_credentials is not None
        return {"credentials": settings.bmc_credentials}

    with pytest.raises(StackError, match="secret object with username and password") as caught:
        run_program(body, config=config, secret_keys=("myriad:bmc-admin",))
    assert "hunter2" not in str(caught.value)


def test_bmc_credentials_come_out_secret() -> None:
    spec = spec_with(STARTER, hosts=True)
    secret = {"username": "u", "password": "p"}
    config = {**stack_config("starter-64"), "myriad:sshAuthorizedKeys": [ADMIN_KEY]}
    seen: dict[str, bool] = {}

    def body() -> dict[str, Any]:
        settings = read_settings(pulumi.Config("myriad"), spec, STARTER)
        assert settings.bmc_credentials is not None

        async def secret_flag() -> bool:
            return await settings.bmc_credentials.is_secret()  # type: ignore[union-attr]

        return {"is_secret": pulumi.Output.from_input(secret_flag())}

    built = run_program(
        body,
        config={**config, "myriad:bmc-admin": json.dumps(secret)},
        secret_keys=("myriad:bmc-admin",),
    )
    seen.update(built.outputs)
    assert seen == {"is_secret": True}


def test_every_default_gpu_type_matches_its_shape() -> None:
    for (model, count), name in GPU_DEFAULTS.items():
        known = INSTANCE_TYPES[name]
        assert (known.gpu_model, known.gpu_count) == (model, count)
    efa = {name: t.efa_interfaces for name, t in INSTANCE_TYPES.items() if t.gpu_model}
    assert efa == {
        "p5.48xlarge": 32,
        "p5e.48xlarge": 32,
        "p5en.48xlarge": 16,
        "p4d.24xlarge": 4,
        "p4de.24xlarge": 4,
        "g6e.48xlarge": 4,
    }


def test_cpu_profiles_get_the_smallest_m7i_that_fits() -> None:
    def on_aws(data: dict[str, Any]) -> None:
        data["provider"] = {
            "kind": "aws",
            "region": "us-east-1",
            "availability_zone_id": "use1-az4",
            "admin_cidr": "192.0.2.0/24",
        }

    spec = spec_with(STARTER, edit=on_aws)
    # head: 2 sockets x 32 cores x 2 threads = 128 vCPUs, 512 GiB
    assert instance_type(spec, "head").name == "m7i.48xlarge"
    assert instance_type(spec, "h100-node").name == "p5.48xlarge"


def test_cpu_profiles_may_name_any_type_and_overrides_name_real_profiles() -> None:
    def custom(data: dict[str, Any]) -> None:
        data["provider"]["instance_types"] = {"head": "c7i.2xlarge"}

    spec = spec_with(AWS_DEV, edit=custom)
    chosen = instance_type(spec, "head")
    assert (chosen.name, chosen.efa_interfaces) == ("c7i.2xlarge", 0)

    def typo(data: dict[str, Any]) -> None:
        data["provider"]["instance_types"] = {"heads": "c7i.2xlarge"}

    with pytest.raises(StackError, match="unknown profiles: heads"):
        check_overrides(spec_with(AWS_DEV, edit=typo))
