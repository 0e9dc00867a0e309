"""The fact registry (myriad.node.facts.registry): every fact is declared once, with its
probes, every NodeFacts field has its declaration, every fact a check reads is declared,
and the gatherer runs exactly the declared probes, from the source tree and from the
zipapp the nodes are given."""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from myriad.node import artefact, gather
from myriad.node.facts import FACTS, PROBES, NodeFacts
from myriad.node.facts.declare import Declared, Probe, command, fact, file
from myriad.node.facts.registry import DeclarationError, collect, fact_modules, node_fields

SRC = Path(__file__).resolve().parents[2] / "src"
NODE = SRC / "myriad" / "node"
# What a check may read of NodeFacts besides the declared facts.
NOT_DECLARED = {"host", "seconds", "hca_ports", "unit"}


def module(name: str, **values: object) -> ModuleType:
    made = ModuleType(f"myriad.node.facts.{name}")
    vars(made).update(values)
    return made


def test_every_nodefacts_field_is_one_declared_fact() -> None:
    assert sorted(FACTS) == sorted(node_fields())
    # Each declaration lives in exactly one fact module.
    declared_in = [
        (name, m.__name__)
        for m in fact_modules()
        for name, v in vars(m).items()
        if isinstance(v, Declared)
    ]
    assert len(declared_in) == len(FACTS)


def test_a_fact_declared_twice_is_refused_naming_both_modules() -> None:
    probe = file("hostname", "/proc/sys/kernel/hostname")
    first = module("hostname", HOSTNAME=fact("hostname", probe, "hostname", str.strip))
    again = module("names", HOST=fact("hostname", probe, "hostname", str.split))
    with pytest.raises(DeclarationError, match=r"fact 'hostname' is declared twice: in "
                       r"hostname\.py and names\.py"):  # fmt: skip
        collect([first, again], ["hostname"])


def test_one_probe_name_for_two_different_probes_is_refused() -> None:
    one = module("a", A=fact("a", command("tool", "tool", "-a"), "tool", str))
    other = module("b", B=fact("b", command("tool", "tool", "-b"), "tool", str))
    with pytest.raises(
        DeclarationError, match=r"probe 'tool' is declared twice: in a\.py and b\.py"
    ):
        collect([one, other], ["a", "b"])


def test_facts_sharing_one_probe_object_are_one_probe() -> None:
    shared = command("tool", "tool")
    found = collect(
        [module("a", A=fact("a", shared, "tool", str), B=fact("b", shared, "tool", str.upper))],
        ["a", "b"],
    )
    assert found.probes == (shared,)


def test_a_nodefacts_field_nobody_declares_is_refused() -> None:
    with pytest.raises(DeclarationError, match=r"NodeFacts\.gpus has no declaration"):
        collect([module("hostname", H=FACTS["hostname"])], ["hostname", "gpus"])


def test_a_declaration_without_a_nodefacts_field_is_refused() -> None:
    extra = module("extra", X=fact("fan_speed", command("fans", "fans"), "fans", str))
    with pytest.raises(DeclarationError, match=r"fact 'fan_speed' \(extra\.py\) is not a field"):
        collect([extra], [])


# --- the checks' side: what they read is declared ----------------------------------------------


def fact_reads(source: str, path: str) -> list[tuple[str, str]]:
    """(file:line, attribute) for every `facts.X` in a function whose `facts` is NodeFacts."""
    reads = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        arguments = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
        typed = any(
            a.arg == "facts"
            and a.annotation is not None
            and ast.unparse(a.annotation) == "NodeFacts"
            for a in arguments
        )
        if not typed:
            continue
        for inner in ast.walk(node):
            if (
                isinstance(inner, ast.Attribute)
                and isinstance(inner.value, ast.Name)
                and inner.value.id == "facts"
            ):
                reads.append((f"{path}:{inner.lineno}", inner.attr))
    return reads


def undeclared(reads: list[tuple[str, str]]) -> list[str]:
    return [
        f"{where} reads facts.{name}, which no module of myriad.node.facts declares"
        for where, name in reads
        if name not in FACTS and name not in NOT_DECLARED
    ]


def test_every_fact_a_check_or_the_health_runner_reads_is_declared() -> None:
    sources = [*sorted((NODE / "checks").glob("*.py")), NODE / "health.py"]
    reads = [r for p in sources for r in fact_reads(p.read_text(encoding="utf-8"), p.name)]
    assert len({name for _, name in reads}) > 30, "the scan found too few reads to mean much"
    assert undeclared(reads) == []


def test_a_check_reading_a_fact_nobody_declares_is_named_with_its_line() -> None:
    source = (
        "def _evaluate(expected: int, facts: NodeFacts, view: object, node: str) -> None:\n"
        "    return facts.fan_speed\n"
    )
    assert undeclared(fact_reads(source, "fans.py")) == [
        "fans.py:2 reads facts.fan_speed, which no module of myriad.node.facts declares"
    ]
    # Attribute reads through NodeFacts itself (its own fields and helpers) are fine.
    assert all(name in vars(NodeFacts) or name in FACTS for name in NOT_DECLARED - {"unit"})


# --- the gatherer runs the declared probes -----------------------------------------------------


def probe_names(argv: list[str]) -> set[str]:
    return set(gather.probes(gather.parse_args(argv)))


def test_the_gatherer_runs_every_declared_probe_that_its_options_ask_for() -> None:
    everything = probe_names(
        ["--controller", "slurm", "--job-nodes", "a", "--qos-nics", "eth4", "--mount", "/d"]
    )
    families = {p.name for p in PROBES if p.each is not None}
    singles = {p.name for p in PROBES if p.each is None} - {"kubectl_nodes"}
    assert everything == singles | {f"{name}:eth4" for name in families}
    # Controller probes only where asked; kubectl is Kubernetes' own.
    plain = probe_names([])
    assert {"scontrol_nodes", "sinfo", "srun_job", "kubectl_nodes", "findmnt"}.isdisjoint(plain)
    assert probe_names(["--controller", "kubernetes"]) - plain == {"kubectl_nodes"}


def test_every_declared_probe_is_read_by_the_fact_that_names_it() -> None:
    assert all(isinstance(p, Probe) for d in FACTS.values() for p in d.probes)
    named = {p.name for d in FACTS.values() for p in d.probes}
    assert named == {p.name for p in PROBES}


# --- from the zipapp -------------------------------------------------------------------------


def run_pyz(pyz: Path, *args: str, root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-I", "-S", str(pyz), *args, "--root", str(root)],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": str(root / "bin")},
    )


def test_the_zipapp_finds_every_fact_and_probe(tmp_path: Path) -> None:
    pyz = artefact.write(tmp_path / artefact.NAME)
    (tmp_path / "bin").mkdir()
    done = run_pyz(pyz, "gather", "--controller", "slurm", "--qos-nics", "eth4", root=tmp_path)
    assert done.returncode == 0, done.stderr
    gathered = set(json.loads(done.stdout)["probes"])
    assert gathered == probe_names(["--controller", "slurm", "--qos-nics", "eth4"])
    listed = subprocess.run(
        [sys.executable, "-I", "-S", "-c",
         "import sys; sys.path.insert(0, sys.argv[1]); from myriad.node.facts import FACTS;"
         " print(' '.join(sorted(FACTS)))", str(pyz)],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert listed.stdout.split() == sorted(FACTS)


def test_a_new_fact_module_in_the_zipapp_is_discovered(tmp_path: Path) -> None:
    """Discovery, not a list: a module dropped into facts/ is found inside the zipapp too
    (and refused here, as it names no NodeFacts field)."""
    copy = tmp_path / "myriad"
    shutil.copytree(NODE, copy / "node", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(SRC / "myriad" / "__init__.py", copy / "__init__.py")
    (copy / "node" / "facts" / "fans.py").write_text(
        "from myriad.node.facts.declare import command, fact\n"
        "FANS = fact('fan_speed', command('fans', 'sensors'), 'sensors', str)\n",
        encoding="utf-8",
    )
    pyz = artefact.write(tmp_path / artefact.NAME, artefact.build(copy / "node"))
    (tmp_path / "bin").mkdir()
    done = run_pyz(pyz, "gather", root=tmp_path)
    assert done.returncode != 0
    assert "fact 'fan_speed' (fans.py) is not a field of NodeFacts" in done.stderr
