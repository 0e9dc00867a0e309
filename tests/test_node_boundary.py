"""myriad.node imports the standard library and itself only: import-linter's contract (in
pyproject.toml) holds for the tree, breaks on a sneaked import, and names every third-party
package the rest of Myriad uses; and its Python floor, 3.10, is what ruff is told for it.

The bare-interpreter tests (tests/validate/test_node_side.py, tests/health/test_runner.py)
show the same at run time for the modules they load; these cover every module statically.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent
CONFIG = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
CONTRACT = next(c for c in CONFIG["tool"]["importlinter"]["contracts"] if c["id"] == "node-stdlib")


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    """`lint-imports` over the `myriad` under root/src, with root's pyproject.toml."""
    return subprocess.run(
        [str(VENV_BIN / "lint-imports"), "--no-cache"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        # The copy's `myriad` first, ahead of the editable install of the checkout.
        env={**os.environ, "PYTHONPATH": str(root / "src")},
    )


def copy_of_the_tree(tmp_path: Path) -> Path:
    shutil.copytree(
        ROOT / "src" / "myriad",
        tmp_path / "src" / "myriad",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def test_the_contract_holds_for_the_tree() -> None:
    done = lint_imports(ROOT)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "1 kept, 0 broken" in done.stdout


@pytest.mark.parametrize(
    ("sneaked", "named"),
    [
        ("import yaml\n", "myriad.node.facts -> yaml"),
        ("from myriad.spec import models\n", "myriad.node.facts -> myriad.spec.models"),
        # A deferred import is an import all the same.
        ("def later() -> None:\n    import rich\n", "myriad.node.facts -> rich"),
    ],
    ids=["third-party", "controller", "in-a-function"],
)
def test_a_sneaked_import_breaks_the_contract(tmp_path: Path, sneaked: str, named: str) -> None:
    root = copy_of_the_tree(tmp_path)
    facts = root / "src" / "myriad" / "node" / "facts" / "__init__.py"
    facts.write_text(facts.read_text(encoding="utf-8") + "\n" + sneaked, encoding="utf-8")
    done = lint_imports(root)
    assert done.returncode == 1, done.stdout[-4000:] + done.stderr[-2000:]
    assert "1 broken" in done.stdout
    assert named in done.stdout, done.stdout[-4000:]


def _third_party_imports_of_the_tree() -> set[str]:
    graph = grimp.build_graph(
        "myriad", include_external_packages=True, exclude_type_checking_imports=True
    )
    squashed = {m for m in graph.modules if "." not in m and m != "myriad"}
    return squashed - set(sys.stdlib_module_names)


def test_the_contract_forbids_every_third_party_package_myriad_uses() -> None:
    """A dependency added to Myriad without a line in the contract fails here: what the rest
    of the tree imports, and every distribution pyproject.toml names, by import name."""
    forbidden = set(CONTRACT["forbidden_modules"])
    used = _third_party_imports_of_the_tree()
    assert used, "the graph holds no third-party package; is include_external_packages on?"
    assert used <= forbidden, sorted(used - forbidden)
    names = [*CONFIG["project"]["dependencies"], *CONFIG["project"]["optional-dependencies"]["aws"]]
    distributions = {re.split(r"[<>=\[ ;]", name, maxsplit=1)[0].lower() for name in names}
    provided = importlib.metadata.packages_distributions()
    imported_as = {
        module
        for module, dists in provided.items()
        if {d.lower() for d in dists} & distributions and not module.startswith("_")
    }
    assert imported_as, "no installed distribution matched the project's dependencies"
    assert imported_as <= forbidden, sorted(imported_as - forbidden)


def test_the_node_package_imports_nothing_but_the_standard_library() -> None:
    """Wider than the contract's list: no module outside the standard library at all."""
    graph = grimp.build_graph(
        "myriad", include_external_packages=True, exclude_type_checking_imports=True
    )
    node = {m for m in graph.modules if m == "myriad.node" or m.startswith("myriad.node.")}
    outside = {
        (module, target)
        for module in node
        for target in graph.find_modules_directly_imported_by(module)
        if target not in node and target.split(".")[0] not in sys.stdlib_module_names
    }
    assert not outside, sorted(outside)


def test_ruff_holds_the_node_package_to_python_3_10(tmp_path: Path) -> None:
    """pyproject.toml's per-file target: 3.11 syntax is refused under src/myriad/node only."""
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    newer = "try:\n    pass\nexcept* ValueError:\n    pass\n"
    for folder in ("node", "spec"):
        (tmp_path / "src" / "myriad" / folder).mkdir(parents=True)
        (tmp_path / "src" / "myriad" / folder / "groups.py").write_text(newer, encoding="utf-8")
    done = subprocess.run(
        [str(VENV_BIN / "ruff"), "check", "--no-cache", "--output-format", "concise", "src"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    flagged = [line for line in done.stdout.splitlines() if "Python 3.10" in line]
    assert len(flagged) == 1 and flagged[0].startswith("src/myriad/node/groups.py"), done.stdout
