"""Myriad's packages form layers that only point down, and no two packages import each other.

Every import of `src/myriad` is read with `ast`: module-level ones, those inside functions
(deferred imports are still dependencies) and those under `if TYPE_CHECKING:` (a type named
from a higher layer is still knowledge of it). An import of a package from a higher layer
fails the test with its file:line and the import; so does a cycle between packages, even
within one layer, and a module that belongs to no layer (a new package must be placed).

LAYERS is the one statement of the order; docs/architecture.md shows it and names this test
as what enforces it. A package may import its own layer and every layer below.
"""

from __future__ import annotations

import ast
import itertools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"

# Bottom first. Each entry is a package or a top-level module of `myriad`; `myriad` itself is
# the package's __init__ (the version), importable from everywhere.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("myriad", "myriad.errors", "myriad.fsutil", "myriad.paths"),
    ("myriad.spec", "myriad.catalog"),
    ("myriad.plan",),
    # Above spec and plan only because a check's `derive` names their types for type checkers
    # (checks/model.py, under TYPE_CHECKING); at run time it imports the standard library
    # alone (the import-linter contract in pyproject.toml, tests/test_node_boundary.py).
    ("myriad.node",),
    ("myriad.render",),
    ("myriad.provision",),
    ("myriad.runner",),
    ("myriad.bringup",),
    ("myriad.validate",),
    ("myriad.health", "myriad.ops"),
    # `up` and `bringup` as commands: bring-up, the rollout, validation, health documents.
    ("myriad.lifecycle",),
    ("myriad.views",),
    ("myriad.cli",),
)


@dataclass(frozen=True, slots=True)
class Import:
    file: Path
    line: int
    importer: str  # the importing module, e.g. myriad.render.inventory
    target: str  # the imported module, e.g. myriad.plan.nodes
    text: str  # the statement as written


def module_name(path: Path, src: Path) -> str:
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_module(name: str, src: Path) -> bool:
    base = src.joinpath(*name.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def _targets(
    node: ast.Import | ast.ImportFrom, importer: str, is_package: bool, src: Path
) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        # `from . import x` in a module means its package; in a package's __init__, itself.
        parts = importer.split(".") if is_package else importer.split(".")[:-1]
        parts = parts[: len(parts) - (node.level - 1)]
        base = ".".join([*parts, *([node.module] if node.module else [])])
    else:
        base = node.module or ""
    # `from myriad import paths` imports the module myriad.paths, not the package myriad.
    return [
        f"{base}.{alias.name}" if _is_module(f"{base}.{alias.name}", src) else base
        for alias in node.names
    ]


def iter_imports(src: Path, package: str = "myriad") -> Iterator[Import]:
    """Every import of a `myriad` module by a module under `src/<package>`."""
    for path in sorted((src / package).rglob("*.py")):
        importer = module_name(path, src)
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text, filename=str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            statement = ast.get_source_segment(text, node) or ast.unparse(node)
            targets = _targets(node, importer, path.name == "__init__.py", src)
            for target in dict.fromkeys(targets):  # `from m import a, b` is one import of m
                if target == package or target.startswith(package + "."):
                    yield Import(path, node.lineno, importer, target, " ".join(statement.split()))


def unit_of(module: str, layers: Sequence[Sequence[str]] = LAYERS) -> str | None:
    """The LAYERS entry a module belongs to: the longest one that is it or contains it."""
    best: str | None = None
    for layer in layers:
        for unit in layer:
            inside = module == unit or (unit.count(".") > 0 and module.startswith(unit + "."))
            if inside and (best is None or len(unit) > len(best)):
                best = unit
    return best


def layer_index(layers: Sequence[Sequence[str]] = LAYERS) -> dict[str, int]:
    return {unit: index for index, layer in enumerate(layers) for unit in layer}


def _where(item: Import, root: Path) -> str:
    file = item.file.relative_to(root) if item.file.is_relative_to(root) else item.file
    return f"{file}:{item.line}"


def upward_imports(
    imports: Sequence[Import], root: Path, layers: Sequence[Sequence[str]] = LAYERS
) -> list[str]:
    """One line per import that points up a layer, or that involves a module of no layer."""
    index = layer_index(layers)
    problems: list[str] = []
    for item in imports:
        source, target = unit_of(item.importer, layers), unit_of(item.target, layers)
        where = _where(item, root)
        if source is None or target is None:
            missing = item.importer if source is None else item.target
            problems.append(
                f"{where}: {item.text} — {missing} is in no layer; add it to LAYERS in "
                "tests/test_layers.py and to docs/architecture.md"
            )
        elif index[target] > index[source]:
            problems.append(
                f"{where}: {item.text} — {source} (layer {index[source]}) imports {target} "
                f"(layer {index[target]}), which sits above it"
            )
    return problems


def package_cycles(
    imports: Sequence[Import], root: Path, layers: Sequence[Sequence[str]] = LAYERS
) -> list[str]:
    """One line per cycle between LAYERS entries, with one import of each step."""
    edges: dict[str, dict[str, Import]] = {}
    for item in imports:
        source, target = unit_of(item.importer, layers), unit_of(item.target, layers)
        if source is not None and target is not None and source != target:
            edges.setdefault(source, {}).setdefault(target, item)
    problems: list[str] = []
    for component in _strongly_connected(edges):
        if len(component) < 2:
            continue
        cycle = _cycle_through(sorted(component)[0], component, edges)
        steps = [
            f"{a} → {b} ({_where(edges[a][b], root)}: {edges[a][b].text})"
            for a, b in itertools.pairwise(cycle)
        ]
        problems.append("package cycle: " + "; ".join(steps))
    return problems


def _strongly_connected(edges: Mapping[str, Mapping[str, Import]]) -> list[set[str]]:
    """Tarjan's algorithm over the package graph (a few dozen nodes: recursion is fine)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []
    nodes = set(edges) | {t for targets in edges.values() for t in targets}

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in edges.get(node, {}):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component: set[str] = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            found.append(component)

    for node in sorted(nodes):
        if node not in index:
            visit(node)
    return found


def _cycle_through(
    start: str, component: set[str], edges: Mapping[str, Mapping[str, Import]]
) -> list[str]:
    """A shortest path start → … → start inside the component (breadth first)."""
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following: list[str] = []
        for node in frontier:
            for nxt in sorted(edges.get(node, {})):
                if nxt not in component:
                    continue
                if nxt == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [*reversed(path), start]
                if nxt not in previous:
                    previous[nxt] = node
                    following.append(nxt)
        frontier = following
    raise AssertionError(f"{start} is in a cycle but no path back to it was found")


# --- the project's own imports -----------------------------------------------------------


def test_imports_only_point_down() -> None:
    imports = list(iter_imports(SRC))
    assert len(imports) > 100, "the walk found too few imports; is SRC right?"
    problems = upward_imports(imports, SRC.parent)
    assert not problems, "imports that point up a layer:\n" + "\n".join(problems)


def test_no_package_imports_another_that_imports_it_back() -> None:
    problems = package_cycles(list(iter_imports(SRC)), SRC.parent)
    assert not problems, "\n".join(problems)


def test_every_module_sits_in_a_layer() -> None:
    modules = [module_name(p, SRC) for p in (SRC / "myriad").rglob("*.py")]
    unplaced = sorted(m for m in modules if unit_of(m) is None)
    assert not unplaced, f"add these to LAYERS (and docs/architecture.md): {unplaced}"


def test_the_architecture_document_shows_the_same_layers() -> None:
    doc = (SRC.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert "tests/test_layers.py" in doc
    for layer in LAYERS:
        for unit in layer:
            assert f"`{unit}`" in doc, f"docs/architecture.md does not name the layer `{unit}`"


# The Pulumi program (stacks/) sits outside the package, above provision: it plans, reads the
# spec and calls the providers' clients (provision.redfish, provision.aws_release), and finds
# the cluster's state folder (bringup.flow.state_base); nothing in the package imports it.
STACKS_UP_TO = "myriad.bringup"


def stacks_imports(root: Path) -> Iterator[Import]:
    """Every import of a `myriad` module by a module of `stacks/`."""
    for path in sorted((root / "stacks").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        for node in ast.walk(ast.parse(text, filename=str(path))):
            if not isinstance(node, ast.Import | ast.ImportFrom) or getattr(node, "level", 0):
                continue
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
            )
            for target in names:
                if target == "myriad" or target.startswith("myriad."):
                    statement = " ".join((ast.get_source_segment(text, node) or "").split())
                    yield Import(path, node.lineno, f"stacks.{path.stem}", target, statement)


def stacks_problems(root: Path) -> list[str]:
    ceiling = layer_index()[STACKS_UP_TO]
    return [
        f"{_where(item, root)}: {item.text}"
        for item in stacks_imports(root)
        if (unit := unit_of(item.target)) is None or layer_index()[unit] > ceiling
    ]


def test_stacks_import_the_layers_up_to_bringup_only() -> None:
    assert len(list(stacks_imports(SRC.parent))) > 10, "the walk found too few stacks imports"
    problems = stacks_problems(SRC.parent)
    assert not problems, f"stacks/ imports above {STACKS_UP_TO}:\n" + "\n".join(problems)


def test_a_stack_importing_the_cli_is_reported(tmp_path: Path) -> None:
    (tmp_path / "stacks").mkdir()
    (tmp_path / "stacks" / "aws.py").write_text(
        "from myriad.plan import nodes\nimport myriad.cli\n"
    )
    assert stacks_problems(tmp_path) == ["stacks/aws.py:2: import myriad.cli"]


def test_nothing_in_the_package_imports_the_pulumi_program() -> None:
    found = []
    for path in sorted((SRC / "myriad").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import | ast.ImportFrom):
                names = (
                    [a.name for a in node.names]
                    if isinstance(node, ast.Import)
                    else [node.module or ""]
                )
                found += [f"{path}:{node.lineno}" for n in names if n.split(".")[0] == "stacks"]
    assert not found, (
        "the package imports stacks/ (Pulumi's program, not a library):\n" + "\n".join(found)
    )


# --- the checker itself can fail ---------------------------------------------------------


def _tree(tmp_path: Path, files: Mapping[str, str]) -> Path:
    src = tmp_path / "src"
    for name, text in files.items():
        path = src / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    for directory in [p for p in (src / "myriad").rglob("*") if p.is_dir()] + [src / "myriad"]:
        (directory / "__init__.py").touch()
    return src


def test_an_upward_import_is_reported_with_its_line(tmp_path: Path) -> None:
    src = _tree(
        tmp_path,
        {
            "myriad/errors.py": "class MyriadError(Exception): ...\n",
            "myriad/views/plan.py": "def show() -> None: ...\n",
            "myriad/spec/loader.py": (
                "from typing import TYPE_CHECKING\n"
                "from myriad.errors import MyriadError\n"
                "if TYPE_CHECKING:\n"
                "    from myriad.views.plan import show\n"
            ),
        },
    )
    problems = upward_imports(list(iter_imports(src)), src.parent)
    assert problems == [
        "src/myriad/spec/loader.py:4: from myriad.views.plan import show — myriad.spec "
        "(layer 1) imports myriad.views (layer 11), which sits above it"
    ]


def test_a_function_level_and_a_relative_upward_import_are_both_found(tmp_path: Path) -> None:
    src = _tree(
        tmp_path,
        {
            "myriad/runner.py": "X = 1\n",
            "myriad/plan/nodes.py": "def f() -> None:\n    from .. import runner\n",
            "myriad/render/inventory.py": "import myriad.bringup.flow\n",
            "myriad/bringup/flow.py": "Y = 2\n",
        },
    )
    problems = upward_imports(list(iter_imports(src)), src.parent)
    assert [p.split(" — ")[0] for p in problems] == [
        "src/myriad/plan/nodes.py:2: from .. import runner",
        "src/myriad/render/inventory.py:1: import myriad.bringup.flow",
    ]


def test_a_cycle_between_packages_of_one_layer_is_reported(tmp_path: Path) -> None:
    src = _tree(
        tmp_path,
        {
            "myriad/health/probe.py": "from myriad.ops import roll\n",
            "myriad/ops/roll.py": "def later() -> None:\n    from myriad.health import probe\n",
        },
    )
    imports = list(iter_imports(src))
    assert upward_imports(imports, src.parent) == []
    assert package_cycles(imports, src.parent) == [
        "package cycle: myriad.health → myriad.ops (src/myriad/health/probe.py:1: from "
        "myriad.ops import roll); myriad.ops → myriad.health (src/myriad/ops/roll.py:2: from "
        "myriad.health import probe)"
    ]


def test_a_module_outside_every_layer_is_reported(tmp_path: Path) -> None:
    src = _tree(tmp_path, {"myriad/gadgets/thing.py": "from myriad.errors import X\n"})
    (src / "myriad" / "errors.py").write_text("X = 1\n", encoding="utf-8")
    problems = upward_imports(list(iter_imports(src)), src.parent)
    assert len(problems) == 1
    assert "myriad.gadgets.thing is in no layer" in problems[0]


@pytest.mark.parametrize(
    ("module", "unit"),
    [
        ("myriad", "myriad"),
        ("myriad.errors", "myriad.errors"),
        ("myriad.plan.nodes", "myriad.plan"),
        ("myriad.node.parsers.slurm", "myriad.node"),
        ("myriad.cli", "myriad.cli"),
        ("myriad.unknown", None),
    ],
)
def test_modules_map_to_their_layer_entry(module: str, unit: str | None) -> None:
    assert unit_of(module) == unit
