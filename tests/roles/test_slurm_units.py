"""The systemd units and drop-ins the GPU roles write, checked by systemd itself.

Each template is rendered by Ansible with its role's defaults and variables, installed under a
scratch root beside a stub of the unit a drop-in extends, and handed to `systemd-analyze verify`
(systemd 252 here, Debian 12): an unknown key, a bad value, a missing executable or a broken
dependency fails the test with systemd's own words. slurmd's pre-start GPU check then runs
against a fake driver directory and a fake nvidia-modprobe.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from health_stubs import h100_spec
from myriad.render.role_vars import pool_vars
from myriad.spec import load_spec, load_spec_text

ROOT = Path(__file__).resolve().parents[2]
ROLES = ROOT / "roles"
SYSTEMD_ANALYZE = shutil.which("systemd-analyze")
pytestmark = pytest.mark.skipif(
    SYSTEMD_ANALYZE is None, reason="systemd-analyze is not installed (Debian: package systemd)"
)

# (role, template, where the role installs it, the unit a drop-in extends or None)
UNITS = [
    ("slurm", "slurmd-gpus.conf.j2", "slurmd.service.d/50-myriad-gpus.conf", "slurmd.service"),
    (
        "slurm",
        "slurmd-options.conf.j2",
        "slurmd.service.d/40-myriad-options.conf",
        "slurmd.service",
    ),
    ("container_runtime", "nvidia-cdi-generate.service.j2", "myriad-nvidia-cdi.service", None),
    ("nvidia_driver", "myriad-pcie-acs-off.service.j2", "myriad-pcie-acs-off.service", None),
    ("common", "myriad-container-boot.service.j2", "myriad-container-boot.service", None),
    (
        "nvidia_driver",
        "nvidia-persistenced.conf.j2",
        "nvidia-persistenced.service.d/90-myriad.conf",
        "nvidia-persistenced.service",
    ),
]

# A GPU node as the rendered inventory describes one: 8 GPUs on NVSwitch.
GPU_NODE_VARS: dict[str, Any] = {
    "slurm_node_name": "gpu01",
    "slurm_controllers": [{"name": "ctl01"}],
    "slurm_nodes": [
        {
            "names": ["gpu01", "gpu02"],
            "sockets": 2,
            "cores_per_socket": 48,
            "threads_per_core": 1,
            "real_memory": 1000000,
            "gres": [{"name": "gpu", "type": "h100", "count": 8}],
        }
    ],
    "slurm_slurmd_gpu_units": ["nvidia-persistenced.service", "nvidia-fabricmanager.service"],
    "slurm_slurmd_options": "-b",
    "common_kernel_release_file": "/run/myriad/kernel-release",
}


def _render(templates: list[tuple[str, str, Path]], work: Path, extra: dict[str, Any]) -> None:
    """Template each (role, template, dest) with its role's defaults and vars (Ubuntu's)."""
    tasks: list[dict[str, Any]] = []
    for role, template, dest in templates:
        for vars_file in (
            ROLES / role / "defaults" / "main.yml",
            ROLES / role / "vars" / "main.yml",
            ROLES / role / "vars" / "Ubuntu.yml",
        ):
            if vars_file.exists():
                tasks.append(
                    {
                        "name": f"Load {role}/{vars_file.parent.name}/{vars_file.name}",
                        "ansible.builtin.include_vars": {"file": str(vars_file)},
                    }
                )
        tasks.append(
            {
                "name": f"Template {role}/{template}",
                "ansible.builtin.template": {
                    "src": str(ROLES / role / "templates" / template),
                    "dest": str(dest),
                    "mode": "0755" if template.endswith(".sh.j2") else "0644",
                },
            }
        )
    playbook = work / "render.yml"
    playbook.write_text(
        yaml.safe_dump(
            [{"name": "Render", "hosts": "localhost", "gather_facts": False, "tasks": tasks}]
        )
    )
    (work / "extra.json").write_text(json.dumps(extra))
    result = subprocess.run(
        [
            str(Path(sys.executable).parent / "ansible-playbook"),
            "-i",
            "localhost,",
            "--connection",
            "local",
            str(playbook),
            "-e",
            f"ansible_python_interpreter={sys.executable}",
            "-e",
            f"@{work / 'extra.json'}",
        ],
        env={**os.environ, "ANSIBLE_LOCAL_TEMP": str(work / "tmp")},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]


def _executables(unit_text: str) -> list[str]:
    """The programs a unit runs (Exec*= lines, without systemd's prefixes)."""
    found = []
    for line in unit_text.splitlines():
        key, _, value = line.partition("=")
        if key.strip().startswith("Exec") and value.strip():
            found.append(value.strip().split()[0].lstrip("-@:+!"))
    return found


def _stub(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every unit and drop-in of UNITS (plus slurmd's check script) under one directory."""
    work = tmp_path_factory.mktemp("units")
    units = work / "units"
    check = work / "libexec" / "myriad-slurmd-gpus"
    check.parent.mkdir(parents=True)
    templates = [(role, template, units / dest) for role, template, dest, _ in UNITS]
    for _, _, dest in templates:
        dest.parent.mkdir(parents=True, exist_ok=True)
    templates.append(("slurm", "myriad-slurmd-gpus.sh.j2", check))
    templates.append(
        ("common", "myriad-container-boot.sh.j2", check.parent / "myriad-container-boot")
    )
    # The drop-in runs the rendered script from where this test put it.
    _render(templates, work, {**GPU_NODE_VARS, "__slurm_gpu_check_path": str(check)})
    return work


@pytest.mark.parametrize(("role", "template", "dest", "base"), UNITS, ids=[u[2] for u in UNITS])
def test_systemd_accepts_the_unit(
    role: str, template: str, dest: str, base: str | None, rendered: Path, tmp_path: Path
) -> None:
    unit_dir = tmp_path / "system"
    installed = unit_dir / dest
    installed.parent.mkdir(parents=True)
    text = (rendered / "units" / dest).read_text()
    installed.write_text(text)
    # Programs the unit runs exist on a node but not here: stubs at a path systemd can check.
    # Absolute paths of the node are kept by verifying under a root that holds them.
    verified = installed if base is None else unit_dir / base
    if base is not None:
        # A drop-in extends the package's unit: a minimal one stands in for it.
        (unit_dir / base).write_text(
            f"[Unit]\nDescription=stand-in for the package's {base}\n\n"
            "[Service]\nType=simple\nExecStart=/bin/sleep infinity\n\n"
            "[Install]\nWantedBy=multi-user.target\n"
        )
    missing = [p for p in _executables(text) if not Path(p).exists()]
    if missing:
        # Rewrite only the program paths, to stubs of the same name in the scratch tree.
        for program in missing:
            stub = tmp_path / "bin" / Path(program).name
            _stub(stub)
            text = text.replace(program, str(stub))
        installed.write_text(text)
    result = subprocess.run(
        [str(SYSTEMD_ANALYZE), "verify", str(verified)],
        env={**os.environ, "SYSTEMD_UNIT_PATH": f"{unit_dir}:"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    said = (result.stdout + result.stderr).strip()
    assert result.returncode == 0, said
    # systemd warns, without failing, about keys it does not know: those are mistakes too.
    assert said == "", said


def test_slurmd_waits_for_the_gpu_driver(rendered: Path) -> None:
    dropin = (rendered / "units" / "slurmd.service.d" / "50-myriad-gpus.conf").read_text()
    lines = [line for line in dropin.splitlines() if line and not line.startswith("#")]
    assert "After=nvidia-persistenced.service nvidia-fabricmanager.service" in lines
    assert "Wants=nvidia-persistenced.service nvidia-fabricmanager.service" in lines
    assert "Restart=on-failure" in lines
    assert "RestartSec=15" in lines
    assert "StartLimitIntervalSec=0" in lines
    # The pre-start reads the driver's own list of GPUs on a real node.
    assert "Environment=MYRIAD_NVIDIA_GPUS_DIR=/proc/driver/nvidia/gpus" in lines
    # The node's gres count (8) is what the pre-start checks for.
    assert any(line.startswith("ExecStartPre=") and line.endswith(" 8") for line in lines), lines


def _fake_driver(tmp_path: Path, gpus: int) -> dict[str, str]:
    """A driver directory with `gpus` GPUs and an nvidia-modprobe that logs its calls."""
    gpus_dir = tmp_path / "proc-gpus"
    gpus_dir.mkdir()
    for i in range(gpus):
        (gpus_dir / f"0000:{0x18 + i:02x}:00.0").mkdir()
    dev = tmp_path / "dev"
    dev.mkdir()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "modprobe.log"
    # Device nodes cannot be made without privileges: the fake makes the names checked with -c
    # by linking /dev/null (a character device) there, as nvidia-modprobe's mknod would.
    (bin_dir / "nvidia-modprobe").write_text(
        "#!/bin/sh\n"
        f'echo "$@" >> {log}\n'
        'if [ "$1" = -u ]; then ln -sf /dev/null ' + f"{dev}/nvidia-uvm; exit 0; fi\n"
        f'ln -sf /dev/null {dev}/nvidia"$2"\n'
    )
    (bin_dir / "nvidia-modprobe").chmod(0o755)
    return {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "MYRIAD_NVIDIA_GPUS_DIR": str(gpus_dir),
        "MYRIAD_DEV_DIR": str(dev),
    }


@pytest.mark.parametrize(("gpus", "ok"), [(8, True), (7, False)])
def test_the_pre_start_counts_the_gpus(gpus: int, ok: bool, rendered: Path, tmp_path: Path) -> None:
    env = _fake_driver(tmp_path, gpus)
    check = rendered / "libexec" / "myriad-slurmd-gpus"
    result = subprocess.run(
        [str(check), "8"], env=env, capture_output=True, text=True, timeout=30, check=False
    )
    if ok:
        assert result.returncode == 0, result.stderr
        calls = (tmp_path / "modprobe.log").read_text().splitlines()
        assert calls == [f"-c {i}" for i in range(8)] + ["-u -c 0"]
    else:
        assert result.returncode == 1
        assert "the driver has 7 GPUs, gres says 8" in result.stderr


def test_the_pre_start_refuses_without_the_driver(rendered: Path, tmp_path: Path) -> None:
    env = {**os.environ, "MYRIAD_NVIDIA_GPUS_DIR": str(tmp_path / "absent")}
    check = rendered / "libexec" / "myriad-slurmd-gpus"
    result = subprocess.run(
        [str(check), "8"], env=env, capture_output=True, text=True, timeout=30, check=False
    )
    assert result.returncode == 1
    assert "the NVIDIA driver is not loaded" in result.stderr


def test_the_twins_stub_gpus_are_checked_against_its_stand_in_driver() -> None:
    # The local twin's GPUs have no driver in /proc/driver/nvidia; its stand-in driver
    # (tests/health_stubs.py) lists them under /run, and the pre-start reads that. Real GPU
    # nodes read the driver's own directory.
    local = load_spec_text(yaml.safe_dump(h100_spec("twin", "172.31.99.0/24")), "twin.yaml")
    twin_pool = next(p for p in local.spec.pools if p.role == "compute")
    twin = pool_vars(local.spec, local.catalog, twin_pool)
    assert twin["slurm_slurmd_gpu_driver_dir"] == "/run/myriad-twin/nvidia/gpus"
    assert "slurm_slurmd_gpu_check" not in twin
    starter = load_spec(ROOT / "inventories" / "starter-64" / "cluster.yaml")
    pool = next(p for p in starter.spec.pools if p.role == "compute")
    real = pool_vars(starter.spec, starter.catalog, pool)
    assert "slurm_slurmd_gpu_check" not in real
    assert "slurm_slurmd_gpu_driver_dir" not in real


def test_the_twins_boot_puts_back_the_kernel_grub_boots_and_the_hosts_block(
    rendered: Path, tmp_path: Path
) -> None:
    """The common role's container stand-in for a server's boot, run as the unit runs it
    (paths moved under tmp_path): the newest /boot/vmlinuz-* by version (10 after 9, which a
    plain sort gets wrong), else the running kernel; the saved hosts block appended to a
    /etc/hosts that lacks it, once."""
    script = (rendered / "libexec" / "myriad-container-boot").read_text()
    boot, record = tmp_path / "boot", tmp_path / "run" / "myriad" / "kernel-release"
    hosts, saved = tmp_path / "hosts", tmp_path / "hosts-block"
    for node_path, here in (
        ("/run/myriad/kernel-release", record),
        ("/etc/myriad/hosts-block", saved),
        ("/etc/hosts", hosts),
        ("/boot", boot),
    ):
        assert node_path in script, node_path
        script = script.replace(node_path, str(here))
    boot.mkdir()
    docker_hosts = "127.0.0.1\tlocalhost\n172.31.77.12\tnode02\n"
    hosts.write_text(docker_hosts)
    begin = "# BEGIN MYRIAD MANAGED BLOCK: cluster hosts"
    block = f"{begin}\n172.31.77.10    ctl01\n# END MYRIAD MANAGED BLOCK: cluster hosts\n"
    saved.write_text(block)
    subprocess.run(["sh", "-c", script], check=True, timeout=30)
    assert record.read_text().strip() == os.uname().release
    assert hosts.read_text() == docker_hosts + block
    for release in ("6.1.0-9-amd64", "6.1.0-10-amd64"):
        (boot / f"vmlinuz-{release}").write_text("")
    (boot / "config-6.1.0-11-amd64").write_text("")  # not a kernel image
    subprocess.run(["sh", "-c", script], check=True, timeout=30)
    assert record.read_text().strip() == "6.1.0-10-amd64"
    assert hosts.read_text() == docker_hosts + block  # not twice
