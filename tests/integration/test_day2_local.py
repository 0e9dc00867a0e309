"""Day-2 operations end to end on one local cluster: drain/resume, and rolls that never kill a job.

One cluster lifecycle for the module (a unique name and subnet, `down` at the end even on
failure). The change a roll applies is real: a package version bump from a small APT
repository this test builds with dpkg-deb and copies into the containers (pinned through the
common role's `common_packages_extra: [name=version]`), and a slurm.conf setting
(`slurm_message_timeout`), which the controller takes by `scontrol reconfigure`.

1. drain/resume: the reason carries who and why; a node the health runner drained is not
   resumed without --force.
2. Roll with sleep jobs on node01 and node02, one node at a time: the idle node03 first;
   node01 and node02 only once their jobs ended; SIGTERM while node01 waits and SIGKILL while
   node02 waits, each followed by `--resume`; every job exits 0, the log's timestamps show one
   node out at a time, no node drained twice, every node on the new version and validated.
3. An injected drift (NCCL defaults edited on node02, outside the roll's --tags): node02
   fails validation, stays drained, the roll stops with exit 1 naming node02 and the check.
4. Replace, scale out and remove (see each test).
5. A kernel roll: the spec names a kernel from the same repository; each node is drained,
   moved, rebooted (its container restarts) and validated while a job on node01 finishes.
"""

from __future__ import annotations

import getpass
import hashlib
import itertools
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from run_names import free_subnet, unique_name

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "inventories" / "local" / "cluster.yaml"
MYRIAD = [sys.executable, "-m", "myriad.cli"]
PACKAGE = "myriad-roll-probe"
NODES = ("ctl01", "node01", "node02", "node03")
REPO_IN_NODE = "/opt/myriad-roll-repo"
ROLL_TAGS = "common,slurm"


class Day2:
    def __init__(self, name: str, spec: Path, state: Path) -> None:
        self.name, self.spec, self.state = name, spec, state
        self.repo = spec.parent / "repo"

    def env(self) -> dict[str, str]:
        return {**os.environ, "MYRIAD_STATE_DIR": str(self.state), "COLUMNS": "200"}

    def myriad(self, *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*MYRIAD, *args],
            cwd=ROOT,
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def start(self, *args: str) -> subprocess.Popen[bytes]:
        """In the background, its output in a file (a pipe nobody reads could fill up)."""
        out = (self.spec.parent / f"roll-{time.monotonic_ns()}.out").open("w")
        return subprocess.Popen(
            [*MYRIAD, *args], cwd=ROOT, env=self.env(), stdout=out, stderr=subprocess.STDOUT
        )

    def node(self, node: str, *command: str, check: bool = True) -> str:
        done = subprocess.run(
            ["docker", "exec", f"{self.name}-{node}", *command],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if check:
            assert done.returncode == 0, f"{node}: {command}: {done.stderr}"
        return done.stdout

    def roll_log(self) -> Path | None:
        logs = sorted((self.state / self.name / "runs").glob("*-roll*/roll.log"))
        return logs[-1] if logs else None


def build_deb(
    folder: Path,
    name: str,
    version: str,
    files: dict[str, str],
    description: str,
    postinst: str = "",
) -> str:
    """One package built with dpkg-deb into `folder`; returns its Packages index entry, as
    dpkg-scanpackages would write it."""
    root = folder / f"build-{name}-{version}"
    (root / "DEBIAN").mkdir(parents=True)
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    control = (
        f"Package: {name}\nVersion: {version}\nArchitecture: all\n"
        f"Maintainer: Myriad tests <tests@myriad.invalid>\nDescription: {description}\n"
    )
    (root / "DEBIAN" / "control").write_text(control)
    if postinst:
        (root / "DEBIAN" / "postinst").write_text(postinst)
        (root / "DEBIAN" / "postinst").chmod(0o755)
    deb = folder / f"{name}_{version}_all.deb"
    subprocess.run(
        ["dpkg-deb", "--root-owner-group", "--build", str(root), str(deb)],
        check=True,
        capture_output=True,
        timeout=60,
    )
    subprocess.run(["rm", "-rf", str(root)], check=True, timeout=60)
    data = deb.read_bytes()
    return control.replace(
        "Description:",
        f"Filename: ./{deb.name}\nSize: {len(data)}\n"
        f"SHA256: {hashlib.sha256(data).hexdigest()}\nDescription:",
    )


# A kernel release no node has: its image and headers packages stand in for a distribution's
# (same names, same postinst hook run: Debian 12's linux-image-6.1.0-57-amd64 postinst runs
# `run-parts --report --exit-on-error --arg=$version --arg=$image_path /etc/kernel/postinst.d`
# when that folder exists), without a kernel a container could not boot anyway.
KERNEL = "6.1.0-99-myriad"
KERNEL_POSTINST = f"""#!/bin/sh
set -e
# As Debian's linux-image packages do: the kernel hooks (DKMS, initramfs, GRUB) for the release.
if [ "$1" = configure ] && [ -d /etc/kernel/postinst.d ]; then
  run-parts --report --exit-on-error --arg={KERNEL} --arg=/boot/vmlinuz-{KERNEL} \\
    /etc/kernel/postinst.d
fi
"""


def build_repo(folder: Path, versions: tuple[str, ...]) -> Path:
    """A flat APT repository (`deb [trusted=yes] file:DIR ./`): the marker package in each
    version, and the packages of kernel KERNEL."""
    folder.mkdir(parents=True)
    entries = [
        build_deb(
            folder,
            PACKAGE,
            version,
            {f"usr/share/{PACKAGE}/VERSION": version + "\n"},
            "marker package that a roll moves from version to version",
        )
        for version in versions
    ]
    entries.append(
        build_deb(
            folder,
            f"linux-image-{KERNEL}",
            "6.1.99-1",
            {f"boot/vmlinuz-{KERNEL}": "a stand-in: containers boot no kernel\n"},
            "stand-in kernel image for the kernel roll",
            KERNEL_POSTINST,
        )
    )
    entries.append(
        build_deb(
            folder,
            f"linux-headers-{KERNEL}",
            "6.1.99-1",
            {f"usr/src/linux-headers-{KERNEL}/Makefile": "# stand-in headers\n"},
            "stand-in kernel headers for the kernel roll",
        )
    )
    (folder / "Packages").write_text("\n".join(entries))
    return folder


def add_repo(cluster: Day2, node: str) -> None:
    """The test's repository on `node`, as an APT source whose list is fetched."""
    copied = subprocess.run(
        ["docker", "cp", str(cluster.repo), f"{cluster.name}-{node}:{REPO_IN_NODE}"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert copied.returncode == 0, copied.stderr
    source = f"deb [trusted=yes] file:{REPO_IN_NODE} ./\n"
    cluster.node(node, "sh", "-c", f"printf '{source}' > /etc/apt/sources.list.d/roll.list")
    # Only this source is fetched: the Debian mirror's lists stay as bring-up left them.
    cluster.node(
        node, "apt-get", "update", "-qq",
        "-o", "Dir::Etc::sourcelist=sources.list.d/roll.list",
        "-o", "Dir::Etc::sourceparts=-", "-o", "APT::Get::List-Cleanup=0",
    )  # fmt: skip


@pytest.fixture(scope="module")
def day2(docker_available: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Day2]:
    folder = tmp_path_factory.mktemp("day2")
    name = unique_name("it-day2")
    text = EXAMPLE.read_text()
    for old, new in (
        ("name: local\n", f"name: {name}\n"),
        ("172.31.77.0/24", free_subnet()),
        # Day-2 operations do not depend on monitoring (test_local_cluster.py covers it):
        # without it every up, replace and roll here installs less.
        ("monitoring: {enabled: true}\n", "monitoring: {enabled: false}\n"),
    ):
        assert old in text, old
        text = text.replace(old, new)
    spec = folder / f"{name}.yaml"
    spec.write_text(text)
    cluster = Day2(name, spec, folder / "state")
    try:
        up = cluster.myriad("up", str(spec), "--no-validate", timeout=1800)
        assert up.returncode == 0, up.stdout[-6000:] + up.stderr[-3000:]
        cluster.repo = build_repo(folder / "repo", ("1.0", "2.0", "3.0"))
        for node in NODES:
            add_repo(cluster, node)
            cluster.node(node, "apt-get", "install", "-y", "-qq", f"{PACKAGE}=1.0")
        yield cluster
    finally:
        cluster.myriad("down", str(spec), "--yes", timeout=300)


def sinfo(day2: Day2) -> dict[str, tuple[str, str]]:
    """{node: (state, reason)}; sinfo prints `none` for no reason."""
    out = day2.node("ctl01", "sinfo", "-h", "-N", "-o", "%N|%T|%E")
    found = {}
    for line in out.splitlines():
        if line:
            node, state, reason = line.split("|", 2)
            found[node] = (state, "" if reason == "none" else reason)
    return found


def hold_file(node: str) -> str:
    return f"/tmp/day2-hold-{node}"


def submit(day2: Day2, node: str, seconds: int, *, held: bool = False) -> str:
    """A batch job on `node`: `seconds` long, or (held) running until the test removes the
    node's hold file (at most `seconds`), so the test, not the machine's speed, decides
    when it ends."""
    if held:
        day2.node(node, "touch", hold_file(node))
        work = (
            f"t=0; while [ -e {hold_file(node)} ] && [ $t -lt {seconds} ]; do sleep 1; "
            "t=$((t+1)); done; echo finished"
        )
    else:
        work = f"sleep {seconds}; echo finished"
    out = day2.node(
        "ctl01", "sbatch", "-w", node, "-o", "/tmp/day2-%j.out", "--wrap", work,
    )  # fmt: skip
    found = re.search(r"Submitted batch job (\d+)", out)
    assert found, out
    return found[1]


def wait_until(what: str, condition: object, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if callable(condition) and condition():
            return
        time.sleep(1)
    raise AssertionError(f"timed out waiting for {what}")


def log_has(day2: Day2, needle: str) -> bool:
    log = day2.roll_log()
    return log is not None and needle in log.read_text()


def job_record(day2: Day2, job: str) -> dict[str, str]:
    out = day2.node("ctl01", "scontrol", "-o", "show", "job", job)
    return dict(item.split("=", 1) for item in out.split() if "=" in item)


def write_vars(day2: Day2, version: str, timeout: int) -> Path:
    path = day2.spec.parent / f"roll-{version}.yaml"
    path.write_text(
        f"common_packages_extra: [{PACKAGE}={version}]\nslurm_message_timeout: {timeout}\n"
    )
    return path


@pytest.mark.docker
@pytest.mark.slow
def test_drain_and_resume_say_who_and_respect_the_health_runner(day2: Day2) -> None:
    spec = str(day2.spec)
    drained = day2.myriad("drain", spec, "node03", "--reason", "bad DIMM", timeout=120)
    assert drained.returncode == 0, drained.stderr
    assert sinfo(day2)["node03"] == ("drained", f"myriad: drain by {getpass.getuser()}: bad DIMM")

    day2.node("ctl01", "scontrol", "update", "NodeName=node02", "State=DRAIN",
              "Reason=myriad-health: gpu.ecc failed")  # fmt: skip
    refused = day2.myriad("resume", spec, "node02,node03", timeout=120)
    assert refused.returncode == 1
    assert "node02 (myriad-health: gpu.ecc failed)" in refused.stderr
    assert sinfo(day2)["node03"][0] == "drained"  # nothing resumed when one is refused

    forced = day2.myriad("resume", spec, "node02,node03", "--force", timeout=120)
    assert forced.returncode == 0, forced.stderr
    # Right after a resume sinfo may show `idle*` until slurmctld's next ping of the node.
    wait_until(
        "three idle nodes",
        lambda: [state for state, _ in sinfo(day2).values()] == ["idle"] * 3,
        timeout=120,
    )
    assert all(reason == "" for _, reason in sinfo(day2).values())

    unknown = day2.myriad("drain", spec, "node09", "--reason", "x", timeout=120)
    assert unknown.returncode == 2
    assert "node09: not a compute node" in unknown.stderr


@pytest.mark.docker
@pytest.mark.slow
def test_roll_waits_for_jobs_survives_kills_and_resumes(day2: Day2) -> None:
    spec = str(day2.spec)
    # Held until the roll is seen waiting for them, however slow the machine: the plan, the
    # controller and node03 come first.
    jobs = {n: submit(day2, n, 900, held=True) for n in ("node01", "node02")}
    wait_until(
        "both jobs running",
        lambda: len(day2.node("ctl01", "squeue", "-h", "-t", "R", "-o", "%i").split()) == 2,
        timeout=60,
    )
    variables = write_vars(day2, "2.0", 40)
    args = ["roll", spec, "--reason", "probe 2.0", "--vars", str(variables),
            "--tags", ROLL_TAGS, "--batch", "1", "--poll", "2"]  # fmt: skip

    plan = day2.myriad(*args, "--plan", timeout=600)
    assert plan.returncode == 0, plan.stdout[-4000:] + plan.stderr[-2000:]
    assert "scontrol reconfigure" in plan.stdout and "messagetimeout" in plan.stdout
    assert re.search(rf"node01\s.*{jobs['node01']} \(root\)", plan.stdout), plan.stdout
    assert day2.roll_log() is None  # the plan rolled nothing

    started = time.monotonic()
    first = day2.start(*args)
    wait_until("node01 waiting", lambda: log_has(day2, "node01 waiting"), timeout=600)
    first.send_signal(signal.SIGTERM)
    assert first.wait(timeout=60) == 130

    second = day2.start(*args[:2], "--resume")
    day2.node("node01", "rm", "-f", hold_file("node01"))  # node01's job ends now
    wait_until("node02 waiting", lambda: log_has(day2, "node02 waiting"), timeout=600)
    second.kill()  # SIGKILL: no chance to save anything beyond what is already saved
    second.wait(timeout=60)
    day2.node("node02", "rm", "-f", hold_file("node02"))

    third = day2.myriad(*args[:2], "--resume", timeout=900)
    seconds = time.monotonic() - started
    assert third.returncode == 0, third.stdout[-6000:] + third.stderr[-3000:]
    log = day2.roll_log()
    assert log is not None
    lines = log.read_text().splitlines()
    print(f"roll of 3 nodes with two kills: {seconds:.0f} s\n" + "\n".join(lines))

    # Every job ran to its end, with exit 0.
    for node, job in jobs.items():
        record = job_record(day2, job)
        assert (record["JobState"], record["ExitCode"]) == ("COMPLETED", "0:0"), record
        assert day2.node(node, "cat", f"/tmp/day2-{job}.out").strip() == "finished"

    stamps: dict[tuple[str, str], list[str]] = {}
    for line in lines:
        stamp, subject, event = line.split()[:3]
        stamps.setdefault((subject, event), []).append(stamp)
    # Drained exactly once each, across the kills and resumes; resumed exactly once each.
    for node in ("node01", "node02", "node03"):
        assert len(stamps[(node, "drained")]) == 1, node
        assert len(stamps[(node, "resumed")]) == 1, node
    # One node out of service at a time, the idle one first.
    order = sorted(("node01", "node02", "node03"), key=lambda n: stamps[(n, "drained")][0])
    assert order == ["node03", "node01", "node02"]
    for before, after in itertools.pairwise(order):
        assert stamps[(before, "resumed")][0] < stamps[(after, "drained")][0]
    # node01 and node02 changed only after their jobs ended (UTC on both sides).
    for node, job in jobs.items():
        ended = job_record(day2, job)["EndTime"]
        assert stamps[(node, "jobs-ended")][0] < stamps[(node, "converged")][0]
        assert ended <= stamps[(node, "converged")][0][:19], (node, ended)
    assert stamps[("roll", "interrupted")]  # the SIGTERM was seen and the state saved
    assert len(stamps[("roll", "resumed")]) == 2

    for node in NODES:
        version = day2.node(node, "dpkg-query", "-W", "-f", "${Version}", PACKAGE)
        assert version == "2.0", node
        assert "MessageTimeout=40" in day2.node(node, "cat", "/etc/slurm/slurm.conf"), node
    config = day2.node("ctl01", "scontrol", "show", "config")
    assert re.search(r"MessageTimeout\s*=\s*40 sec", config), config
    wait_until("idle nodes", lambda: {s for s, _ in sinfo(day2).values()} == {"idle"}, 120)
    validated = day2.myriad("validate", spec, timeout=600)
    assert validated.returncode == 0, validated.stdout[-4000:]


@pytest.mark.docker
@pytest.mark.slow
def test_a_node_failing_validation_stays_drained_and_stops_the_roll(day2: Day2) -> None:
    spec = str(day2.spec)
    # Drift outside the roll's tags: the site play (common, slurm) leaves it, validation sees it.
    day2.node("node02", "sh", "-c", "echo NCCL_DEBUG=INFO >> /etc/nccl.conf")
    variables = write_vars(day2, "3.0", 40)
    started = time.monotonic()
    failed = day2.myriad(
        "roll", spec, "--reason", "probe 3.0", "--vars", str(variables),
        "--tags", ROLL_TAGS, "--batch", "1", "--poll", "2",
    )  # fmt: skip
    print(f"roll stopped by a validation failure after {time.monotonic() - started:.0f} s")
    assert failed.returncode == 1, failed.stdout[-6000:] + failed.stderr[-3000:]
    assert "node02 failed: validation: nccl.conf" in failed.stdout, failed.stdout[-4000:]
    assert "not rolled: node03" in failed.stdout
    states = sinfo(day2)
    assert states["node02"] == ("drained", f"myriad: roll by {getpass.getuser()}: probe 3.0")
    assert states["node01"][0] == "idle" and states["node03"][0] == "idle"
    versions = {
        node: day2.node(node, "dpkg-query", "-W", "-f", "${Version}", PACKAGE)
        for node in ("node01", "node02", "node03")
    }
    # node02 got the change (the play ran) but failed validation; node03 was never reached.
    assert versions == {"node01": "3.0", "node02": "3.0", "node03": "2.0"}


def container_id(day2: Day2, node: str) -> str:
    return subprocess.run(
        ["docker", "inspect", "--format", "{{.Id}}", f"{day2.name}-{node}"],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout.strip()  # fmt: skip


@pytest.mark.docker
@pytest.mark.slow
def test_replace_brings_a_node_back_on_a_new_container(day2: Day2) -> None:
    # The rolls above ran with --vars, which last only for their roll: the cluster runs
    # MessageTimeout=40 where the spec says 30. A replaced node is built from the spec, so
    # put the cluster back on its spec first, as an operator would after a trial roll;
    # otherwise slurm.config-files rightly finds node02's slurm.conf unlike the controller's.
    back = day2.myriad("bringup", str(day2.spec), "--tags", "slurm", timeout=900)
    assert back.returncode == 0, back.stdout[-6000:] + back.stderr[-3000:]
    # node02 is still drained by the failed roll above: replace takes that drain over.
    before = container_id(day2, "node02")
    cluster_key = day2.node("ctl01", "sha256sum", "/etc/munge/munge.key").split()[0]
    started = time.monotonic()
    replaced = day2.myriad("replace", str(day2.spec), "node02", "--reason", "new mainboard")
    print(f"replace of node02: {time.monotonic() - started:.0f} s")
    assert replaced.returncode == 0, replaced.stdout[-6000:] + replaced.stderr[-3000:]
    assert "node02 taken-over was drained: myriad: roll by" in replaced.stdout
    assert container_id(day2, "node02") != before
    # The cluster's munge key, copied from its key host; nothing of the old container (the
    # drift injected into its NCCL defaults is gone with it).
    assert day2.node("node02", "sha256sum", "/etc/munge/munge.key").split()[0] == cluster_key
    assert "NCCL_DEBUG" not in day2.node("node02", "cat", "/etc/nccl.conf")
    # slurmctld marks the node responding (`idle`, not `idle*`) at its next contact.
    wait_until("node02 idle", lambda: sinfo(day2)["node02"] == ("idle", ""), timeout=120)
    ran = day2.node("ctl01", "timeout", "120", "srun", "-w", "node02", "hostname")
    assert ran.strip() == "node02"


@pytest.mark.docker
@pytest.mark.slow
def test_scale_out_keeps_a_running_job(day2: Day2) -> None:
    job = submit(day2, "node01", 60)
    wait_until(
        "the job running",
        lambda: day2.node("ctl01", "squeue", "-h", "-j", job, "-o", "%T").strip() == "RUNNING",
        timeout=60,
    )
    text = day2.spec.read_text()
    old = "{name: node, profile: container, count: 3, role: compute}"
    assert old in text
    day2.spec.write_text(text.replace(old, old.replace("count: 3", "count: 4")))
    started = time.monotonic()
    up = day2.myriad("up", str(day2.spec), "--no-validate", timeout=1800)
    print(f"scale out 3 -> 4 with a job running: {time.monotonic() - started:.0f} s")
    assert up.returncode == 0, up.stdout[-6000:] + up.stderr[-3000:]
    assert day2.node("ctl01", "squeue", "-h", "-j", job, "-o", "%T").strip() in (
        "RUNNING",
        "COMPLETING",
        "",
    )
    wait_until(
        "the job to end",
        lambda: not day2.node("ctl01", "squeue", "-h", "-j", job, "-o", "%i", check=False).strip(),
        timeout=180,
    )
    record = job_record(day2, job)
    assert (record["JobState"], record["ExitCode"]) == ("COMPLETED", "0:0"), record
    wait_until("four idle nodes", lambda: len(sinfo(day2)) == 4, timeout=120)
    assert sorted(sinfo(day2)) == ["node01", "node02", "node03", "node04"]
    hosts = day2.node("ctl01", "timeout", "120", "srun", "-N4", "hostname")
    assert sorted(hosts.split()) == ["node01", "node02", "node03", "node04"]


@pytest.mark.docker
@pytest.mark.slow
def test_remove_waits_for_the_job_then_takes_the_node_out(day2: Day2) -> None:
    job = submit(day2, "node04", 30)
    wait_until(
        "the job running",
        lambda: day2.node("ctl01", "squeue", "-h", "-j", job, "-o", "%T").strip() == "RUNNING",
        timeout=60,
    )
    refused = day2.myriad("remove", str(day2.spec), "node04", timeout=120)
    assert refused.returncode == 2 and "node04 still in the spec" in refused.stderr
    text = day2.spec.read_text()
    day2.spec.write_text(text.replace("count: 4, role: compute", "count: 3, role: compute"))
    # `up` would take the container and its job with it: it refuses and points to remove.
    not_up = day2.myriad("up", str(day2.spec), "--no-validate", timeout=120)
    assert not_up.returncode == 2, not_up.stdout[-3000:] + not_up.stderr[-3000:]
    assert f"`myriad remove {day2.spec} node04`" in not_up.stderr
    assert day2.node("ctl01", "squeue", "-h", "-j", job, "-o", "%T").strip() == "RUNNING"
    started = time.monotonic()
    removed = day2.myriad("remove", str(day2.spec), "node04", "--reason", "scale in")
    print(f"remove of node04 with a 30 s job: {time.monotonic() - started:.0f} s")
    assert removed.returncode == 0, removed.stdout[-6000:] + removed.stderr[-3000:]
    record = job_record(day2, job)
    assert (record["JobState"], record["ExitCode"]) == ("COMPLETED", "0:0"), record
    log = removed.stdout
    assert log.index("node04 jobs-ended") < log.index("slurm-conf") < log.index("node04 removed")
    assert sorted(sinfo(day2)) == ["node01", "node02", "node03"]
    left = subprocess.run(
        ["docker", "ps", "-a", "-q", "--filter", f"name=^{day2.name}-node04$"],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert left.stdout.strip() == ""


def exists(day2: Day2, node: str, path: str) -> bool:
    return (
        subprocess.run(
            ["docker", "exec", f"{day2.name}-{node}", "test", "-e", path],
            capture_output=True,
            timeout=60,
            check=False,
        ).returncode
        == 0
    )


def boot_stamp(day2: Day2, node: str) -> str:
    """When the node's PID 1 started: it changes at every boot of a container."""
    return day2.node(node, "cut", "-d", " ", "-f", "22", "/proc/1/stat").strip()


@pytest.mark.docker
@pytest.mark.slow
def test_a_kernel_roll_reboots_each_node_into_the_kernel_and_keeps_the_job(day2: Day2) -> None:
    """The spec names a new kernel; `myriad roll --tags common` moves every compute node.

    Real here: the roll's drain, job wait, the common role's package moves and holds (dpkg,
    apt, the kernel package's postinst hook), site.yml's reboot play restarting the node's
    container (systemd's reboot; Docker restarts it), slurmd coming back, the roll's
    validation (`host.kernel` included) and resume. Stand-ins: the kernel packages (no kernel
    inside), the boot loader (the common role's boot record: the newest /boot/vmlinuz-*, as
    GRUB's default entry), and DKMS, which the twin's nodes do not have (no module to build).
    """
    spec = str(day2.spec)
    for node in ("node01", "node02", "node03"):
        if not exists(day2, node, REPO_IN_NODE):
            add_repo(day2, node)  # node02 is a new container since the replace above
    before = {node: boot_stamp(day2, node) for node in ("node01", "node02", "node03")}
    job = submit(day2, "node01", 600, held=True)
    wait_until(
        "the job running",
        lambda: day2.node("ctl01", "squeue", "-h", "-j", job, "-o", "%T").strip() == "RUNNING",
        timeout=60,
    )
    text = day2.spec.read_text()
    old = "  orchestrator: slurm\n"
    assert old in text
    day2.spec.write_text(text.replace(old, f"{old}  kernel: {KERNEL}\n"))
    args = ["roll", spec, "--reason", f"kernel {KERNEL}", "--tags", "common",
            "--batch", "1", "--poll", "2"]  # fmt: skip
    started = time.monotonic()
    rolling = day2.start(*args)
    wait_until("node01 waiting", lambda: log_has(day2, "node01 waiting"), timeout=900)
    # node02 and node03 rebooted into the kernel while node01 kept running its job.
    assert day2.node("ctl01", "squeue", "-h", "-j", job, "-o", "%T").strip() == "RUNNING"
    day2.node("node01", "rm", "-f", hold_file("node01"))
    assert rolling.wait(timeout=900) == 0, (day2.roll_log() or Path("/dev/null")).read_text()
    print(f"kernel roll of 3 nodes, one waiting for its job: {time.monotonic() - started:.0f} s")

    record = job_record(day2, job)
    assert (record["JobState"], record["ExitCode"]) == ("COMPLETED", "0:0"), record
    log = day2.roll_log()
    assert log is not None
    events = [line.split()[1:3] for line in log.read_text().splitlines()]
    for node in ("node01", "node02", "node03"):
        assert events.count([node, "drained"]) == 1 and events.count([node, "resumed"]) == 1
        # Rebooted once (the container's PID 1 is new), booted the spec's kernel, held.
        assert boot_stamp(day2, node) != before[node], node
        assert day2.node(node, "cat", "/run/myriad/kernel-release").strip() == KERNEL
        held = day2.node(node, "apt-mark", "showhold").split()
        assert {f"linux-image-{KERNEL}", f"linux-headers-{KERNEL}"} <= set(held), (node, held)
        assert not exists(day2, node, "/run/reboot-required"), node
    wait_until("idle nodes", lambda: {s for s, _ in sinfo(day2).values()} == {"idle"}, 120)
