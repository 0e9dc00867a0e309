"""The efa role's tested matrix (roles/efa/vars/matrix.yml) and what the role does with it.

Issue 26: the role pinned one EFA installer (1.41.0) and always built aws-ofi-nccl 1.12.1-aws
when the installer's plugin was not found, with no record of which installer bundles which
plugin or which NCCL that plugin was tested with. The matrix holds those facts with their
sources; the role takes the installer's SHA-256 and the bundled plugin from its row, refuses
a version it has no checksum for unless `efa_installer_sha256` is given, and warns about an
NCCL outside the plugin's tested range.

The refusals and warnings run the role's own tasks with ansible-playbook on this machine
(tests/roles/test_preflight_matrix.py's `run_play`: injected facts, no node). Not exercised:
the download, the installer and the plugin on an EFA instance (roles/efa/README.md, "First
node").
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_preflight_matrix import failures, run_play

ROOT = Path(__file__).resolve().parents[2]
ROLE = ROOT / "roles" / "efa"
MATRIX = yaml.safe_load((ROLE / "vars" / "matrix.yml").read_text())
INSTALLERS = {row["version"]: row for row in MATRIX["__efa_installers"]}
RELEASES = MATRIX["__efa_ofi_nccl_releases"]
DEFAULTS = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
SPECS = yaml.safe_load((ROLE / "meta" / "argument_specs.yml").read_text())["argument_specs"]
SHA256 = re.compile(r"^[0-9a-f]{64}$")
NCCL = re.compile(r"^\d+\.\d+\.\d+(-\d+)?$")
# AWS ParallelCluster's pin of 1.41.0 (the role's pin before the matrix, unchanged).
PCLUSTER_1_41_0 = "3506354cdfbe31ff552fe75f5d0d9bb7efd29cf79bd99457347d29c751c38f9f"
SOME_DIGEST = "0" * 63 + "1"


def test_every_row_is_sourced_and_well_formed() -> None:
    versions = [row["version"] for row in MATRIX["__efa_installers"]]
    assert len(versions) == len(set(versions))
    assert versions == sorted(versions, key=lambda v: tuple(int(p) for p in v.split(".")))
    for row in INSTALLERS.values():
        assert set(row) == {
            "version", "sha256", "sha256_source", "libfabric", "rdma_core", "efa_driver",
            "ofi_nccl", "drops", "notes",
        }  # fmt: skip
        if row["sha256"] is None:
            assert row["sha256_source"] is None
        else:
            assert SHA256.match(row["sha256"]), row
            assert "pcluster" in row["sha256_source"], row
        # A bundled plugin the matrix names has its NCCL facts (or says they were not read).
        assert row["ofi_nccl"] is None or row["ofi_nccl"] in RELEASES, row
    for name, release in RELEASES.items():
        assert release["source"], name
        if release["nccl_tested"] is not None:
            assert all(NCCL.match(v) for v in release["nccl_tested"]), name
            assert NCCL.match(release["nccl_floor"]), name
    # What the issue and AWS's notes state, as the rows carry it.
    assert INSTALLERS["1.41.0"]["sha256"] == PCLUSTER_1_41_0
    assert INSTALLERS["1.51.0"]["sha256"] is None  # no digest published where it was read
    assert INSTALLERS["1.51.0"]["ofi_nccl"] == "1.22.0"
    assert INSTALLERS["1.51.0"]["libfabric"] == "2.7.0amzn2.0"
    assert INSTALLERS["1.50.0"]["ofi_nccl"] == "1.21.1"
    assert RELEASES["1.19.2"]["nccl_tested"] == ["2.27.3-1", "2.28.7-1", "2.29.7-1"]
    assert RELEASES["1.21.1"] == {**RELEASES["1.21.1"], "nccl_floor": "2.17.1"}


def test_the_default_pin_is_a_matrix_row_with_its_checksum() -> None:
    """The role's default installs from the matrix; defaults and the argument spec agree."""
    row = INSTALLERS[DEFAULTS["efa_installer_version"]]
    assert row["sha256"] and row["ofi_nccl"]  # a checksum, and a bundled plugin: no build
    assert DEFAULTS["efa_installer_sha256"] == ""  # empty: the matrix's
    for entry in ("main", "image"):
        options = SPECS[entry]["options"]
        assert options["efa_installer_sha256"]["default"] == ""
        assert options["efa_installer_version"]["default"] == DEFAULTS["efa_installer_version"]
    assert SPECS["main"]["options"]["efa_nccl_version"]["default"] == DEFAULTS["efa_nccl_version"]


def preflight(work: Path, **variables: Any) -> dict[str, Any]:
    tasks = [
        {
            "name": "Run the efa preflight",
            "ansible.builtin.include_role": {"name": "efa", "tasks_from": "main.yml"},
            "tags": ["always"],
        }
    ]
    extra = [arg for key, value in variables.items() for arg in ("-e", json.dumps({key: value}))]
    return run_play(tasks, "ubuntu-24.04", work, *extra, "--tags", "preflight,always")


def flat(report: dict[str, Any]) -> list[str]:
    return [" ".join(f.split()) for f in failures(report)]


@pytest.mark.slow
def test_the_default_pin_passes_the_preflight(tmp_path: Path) -> None:
    report = preflight(tmp_path)
    assert report["rc"] == 0, flat(report)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("version", "why"),
    [
        ("1.99.0", "is not in the tested matrix"),
        ("1.51.0", "has no published SHA-256 in the tested matrix"),
    ],
)
def test_an_installer_without_a_checksum_is_refused(version: str, why: str, tmp_path: Path) -> None:
    report = preflight(tmp_path, efa_installer_version=version)
    assert report["rc"] != 0
    (found,) = [f for f in flat(report) if "efa: EFA installer" in f]
    assert f"EFA installer {version} {why}" in found
    assert "roles/efa/vars/matrix.yml" in found and "1.41.0" in found  # where, and what would do
    assert "set efa_installer_sha256" in found


@pytest.mark.slow
def test_an_explicit_checksum_installs_a_version_the_matrix_cannot_pin(tmp_path: Path) -> None:
    for version in ("1.51.0", "1.99.0"):
        report = preflight(
            tmp_path, efa_installer_version=version, efa_installer_sha256=SOME_DIGEST
        )
        assert report["rc"] == 0, flat(report)


@pytest.mark.slow
def test_no_checksum_is_needed_where_nothing_is_installed(tmp_path: Path) -> None:
    report = preflight(tmp_path, efa_installer_version="1.51.0", efa_install=False)
    assert report["rc"] == 0, flat(report)


def resolved(work: Path, **variables: Any) -> dict[str, str]:
    """The role's internal values for the pins, as its tasks see them."""
    names = ("__efa_installer_checksum", "__efa_bundled_version", "__efa_plugin_version")
    load = {"name": "efa", "tasks_from": "resolve.yml", "public": True}
    tasks: list[dict[str, Any]] = [
        # public: the role's variables stay visible to the tasks after it.
        {"name": "Load the matrix", "ansible.builtin.include_role": load},
        *(
            {"name": f"Report {n}", "ansible.builtin.debug": {"msg": f"{{{{ {n} }}}}"}}
            for n in names
        ),
    ]
    extra = [arg for key, value in variables.items() for arg in ("-e", json.dumps({key: value}))]
    report = run_play(tasks, "ubuntu-24.04", work, *extra)
    assert report["rc"] == 0, flat(report)
    results = report["plays"][0]["tasks"][-len(names) :]
    return {n: str(r["hosts"]["localhost"]["msg"]) for n, r in zip(names, results, strict=True)}


@pytest.mark.slow
def test_the_row_gives_the_checksum_and_the_bundled_plugin(tmp_path: Path) -> None:
    found = resolved(tmp_path)
    assert found["__efa_installer_checksum"] == PCLUSTER_1_41_0
    assert found["__efa_bundled_version"] == "1.14.2"
    assert found["__efa_plugin_version"] == "1.14.2"
    # An installer the notes read here do not show bundling the plugin: the role builds its own.
    found = resolved(tmp_path, efa_installer_version="1.34.0")
    assert found["__efa_bundled_version"] == ""
    assert found["__efa_plugin_version"] == DEFAULTS["efa_ofi_nccl_version"]
    # The operator's checksum wins over the row's.
    found = resolved(tmp_path, efa_installer_sha256=SOME_DIGEST)
    assert found["__efa_installer_checksum"] == SOME_DIGEST


def test_an_installer_that_bundles_the_plugin_builds_none() -> None:
    """install.yml builds from source only where the row names no bundled plugin."""
    tasks = yaml.safe_load((ROLE / "tasks" / "install.yml").read_text())
    (build,) = [t for t in tasks if t.get("ansible.builtin.import_tasks") == "ofi_nccl.yml"]
    assert "__efa_bundled_version | length == 0" in build["when"]
    (missing,) = [t for t in tasks if "Refuse" in t["name"] and "bundle" in t["name"]]
    assert "__efa_bundled_version | length > 0" in missing["when"]


def nccl_check(work: Path, **variables: Any) -> list[str]:
    """The warnings the role's NCCL check prints for the given inputs."""
    tasks = [
        {
            "name": "Check NCCL",
            "ansible.builtin.include_role": {"name": "efa", "tasks_from": "nccl_check.yml"},
        }
    ]
    extra = [arg for key, value in variables.items() for arg in ("-e", json.dumps({key: value}))]
    report = run_play(tasks, "ubuntu-24.04", work, *extra)
    assert report["rc"] == 0, flat(report)
    return [
        str(outcome["msg"])
        for task in report["plays"][0]["tasks"]
        for outcome in task["hosts"].values()
        if "Warn" in task["task"]["name"] and not outcome.get("skipped")
    ]


@pytest.mark.slow
def test_an_nccl_older_than_the_plugins_floor_is_warned_about(tmp_path: Path) -> None:
    (warning,) = nccl_check(tmp_path, efa_nccl_version="2.16.5-1")
    assert "NCCL 2.16.5-1 is older than aws-ofi-nccl 1.14.2 supports" in warning
    assert "2.17.1" in warning and "vars/matrix.yml" in warning


@pytest.mark.slow
def test_an_nccl_newer_than_every_tested_one_is_warned_about(tmp_path: Path) -> None:
    (warning,) = nccl_check(tmp_path, efa_nccl_version="2.31.2-1")
    assert "NCCL 2.31.2-1 is newer than every NCCL aws-ofi-nccl 1.14.2 was tested with" in warning
    assert "2.26.2-1" in warning
    # The installer whose plugin was tested with it: no warning.
    assert nccl_check(tmp_path, efa_nccl_version="2.31.2-1", efa_installer_version="1.50.0") == []


@pytest.mark.slow
def test_an_nccl_in_range_or_unknown_gives_no_warning(tmp_path: Path) -> None:
    assert nccl_check(tmp_path, efa_nccl_version="2.26.2-1+cuda12.8") == []
    assert nccl_check(tmp_path, efa_nccl_version="2.21.5") == []
    # Plugin 1.22.0's notes were not read: nothing to compare with.
    assert nccl_check(tmp_path, efa_nccl_version="2.40.0", efa_installer_version="1.51.0") == []


def test_the_readme_table_lists_every_row_as_the_matrix_has_it() -> None:
    text = (ROLE / "README.md").read_text()
    table = [line for line in text.splitlines() if re.match(r"^\| \**\d+\.\d+\.\d+", line)]
    rows = {re.search(r"\d+\.\d+\.\d+", line).group(0): line for line in table}  # type: ignore[union-attr]
    assert list(rows) == list(INSTALLERS)
    for version, row in INSTALLERS.items():
        cells = [c.strip() for c in rows[version].split("|")[1:-1]]
        assert cells[1] == (f"`{row['sha256'][:8]}…`" if row["sha256"] else "none read"), version
        assert cells[3] == row["ofi_nccl"] or (row["ofi_nccl"] is None and "built" in cells[3])
