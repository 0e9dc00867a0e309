"""The slurm role's Prolog/Epilog (templates/myriad-gpu-jobs.sh.j2), run with /bin/sh and the
environment slurmd gives it (doc/html/prolog_epilog.shtml at slurm-21-08-5-1:
SLURM_SCRIPT_CONTEXT, SLURM_JOB_ID, CUDA_VISIBLE_DEVICES as the node's GPU indices), against a
temporary mapping directory. What it must leave is what dcgm-exporter 4.1.3 reads
(internal/pkg/transformation/hpc.go at tag 4.2.3-4.1.3): a file named by the GPU index, one
job id a line.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import jinja2

ROLE = Path(__file__).resolve().parents[2] / "roles" / "slurm"


def script(tmp_path: Path, job_dir: Path) -> Path:
    environment = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    environment.filters["quote"] = shlex.quote
    template = environment.from_string((ROLE / "templates" / "myriad-gpu-jobs.sh.j2").read_text())
    path = tmp_path / "myriad-gpu-jobs.sh"
    path.write_text(template.render(ansible_managed="test", slurm_gpu_job_dir=str(job_dir)))
    return path


def run(path: Path, context: str, job: str, devices: str | None = None) -> None:
    # slurmd runs it with no PATH of its own choosing beyond the system's.
    env = {"PATH": "/usr/bin:/bin", "SLURM_SCRIPT_CONTEXT": context, "SLURM_JOB_ID": job}
    if devices is not None:
        env["CUDA_VISIBLE_DEVICES"] = devices
    done = subprocess.run(
        ["/bin/sh", str(path)], env=env, capture_output=True, text=True, timeout=30, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""


def mapping(job_dir: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(job_dir.iterdir())}


def test_prolog_maps_each_gpu_to_its_jobs_and_epilog_takes_them_back(tmp_path: Path) -> None:
    job_dir = tmp_path / "run" / "gpu-jobs"
    path = script(tmp_path, job_dir)
    run(path, "prolog_slurmd", "4711", "1,3")
    assert mapping(job_dir) == {"1": "4711\n", "3": "4711\n"}
    # Run twice, a job is still written once.
    run(path, "prolog_slurmd", "4711", "1,3")
    # A GPU shared by two jobs (shards, MPS) names both, one a line.
    run(path, "prolog_slurmd", "4712", "3")
    assert mapping(job_dir) == {"1": "4711\n", "3": "4711\n4712\n"}
    run(path, "epilog_slurmd", "4711", "1,3")
    assert mapping(job_dir) == {"3": "4712\n"}
    # The Epilog does not trust CUDA_VISIBLE_DEVICES: without it, the job still goes.
    run(path, "epilog_slurmd", "4712")
    assert mapping(job_dir) == {}


def test_a_job_without_gpus_and_odd_input_leave_nothing(tmp_path: Path) -> None:
    job_dir = tmp_path / "gpu-jobs"
    path = script(tmp_path, job_dir)
    run(path, "prolog_slurmd", "4711")
    run(path, "prolog_slurmd", "4711", "")
    run(path, "prolog_slurmd", "4711; rm -rf /", "0")
    run(path, "prolog_slurmd", "4713", "0,NoDevFiles")
    assert mapping(job_dir) == {"0": "4713\n"}
    # Other contexts (prolog_slurmctld, or none) touch nothing.
    run(path, "prolog_slurmctld", "4714", "2")
    assert mapping(job_dir) == {"0": "4713\n"}
    # A file that is no GPU index is not the script's to edit.
    (job_dir / "notes").write_text("4713\n")
    run(path, "epilog_slurmd", "4713")
    assert mapping(job_dir) == {"notes": "4713\n"}


def test_an_unwritable_directory_never_fails_the_prolog(tmp_path: Path) -> None:
    """A failing Prolog drains the node (slurm.conf(5) Prolog): bookkeeping must not."""
    blocked = tmp_path / "file"
    blocked.write_text("")
    path = script(tmp_path, blocked / "gpu-jobs")
    env = {"PATH": "/usr/bin:/bin", "SLURM_SCRIPT_CONTEXT": "prolog_slurmd"}
    done = subprocess.run(
        ["/bin/sh", str(path)],
        env={**env, "SLURM_JOB_ID": "4711", "CUDA_VISIBLE_DEVICES": "0"},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0
    assert os.path.isfile(blocked)
