"""The `myriad` command: a thin layer that parses arguments, calls the library, prints.

Exit codes: 0 success, 1 the cluster has a problem (lint error, failed check), 2 the
input is unusable (invalid spec, bad arguments).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from rich.console import Console

from myriad import JSON_FORMAT, __version__
from myriad.errors import BadArguments, MyriadError, SpecError, format_path
from myriad.fsutil import atomic_write_lines, atomic_write_text

if TYPE_CHECKING:
    from myriad.lifecycle.up import UpResult
    from myriad.ops.nodes import NodeChange
    from myriad.ops.remedy import RemedyResult
    from myriad.ops.roll_result import RollResult
    from myriad.runner import Tuning
    from myriad.spec.catalog_models import Catalog
    from myriad.validate.report import ValidationReport

EXIT_OK, EXIT_PROBLEM, EXIT_INVALID = 0, 1, 2


def _output_file(flag: str, path: Path, suffix: str | None = None) -> None:
    """Refuse, before any work, a file argument that cannot be written as asked: a missing
    folder is a typo more often than a wish (nothing is created for it)."""
    if suffix is not None and path.suffix != suffix:
        raise BadArguments(f"{flag} writes {suffix[1:].upper()}: name the file {path.stem}{suffix}")
    if path.is_dir():
        raise BadArguments(f"{flag} {path}: is a folder; name a file in it")
    if not path.parent.is_dir():
        what = "is a file, not a folder" if path.parent.exists() else "does not exist"
        raise BadArguments(f"{flag} {path}: the folder {path.parent} {what}; create it first")


def _output_folder(flag: str, path: Path) -> None:
    """A folder Myriad may create, if nothing on the way to it is a file."""
    for candidate in (path, *path.parents):
        if candidate.exists():
            if not candidate.is_dir():
                raise BadArguments(f"{flag} {path}: {candidate} is a file, not a folder")
            return


def _explain(name: str) -> int:
    from myriad.spec.references import suggestion
    from myriad.spec.rules import RULES

    rule = RULES.get(name)
    if rule is None:
        raise BadArguments(f"no lint rule '{name}'; {suggestion(name, RULES)}")
    kind = "warning; can be accepted" if rule.acceptable else "error; fixed, never accepted"
    sys.stdout.write(f"{rule.id} ({kind})\n  why: {rule.why}\n  fix: {rule.fix}\n")
    return EXIT_OK


def _old_plan(path: Path) -> Mapping[str, Any]:
    from myriad.plan.diff import plan_document

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise BadArguments(f"--diff {path}: {exc.strerror}") from exc
    except json.JSONDecodeError as exc:
        raise BadArguments(f"--diff {path} is not JSON: line {exc.lineno}: {exc.msg}") from exc
    return plan_document(data, str(path))


def _print_diff(
    args: argparse.Namespace,
    out: Console,
    old: Mapping[str, Any],
    new: Mapping[str, Any],
    has_errors: bool,
) -> int:
    from myriad.plan.diff import diff_plans
    from myriad.views.plan import diff_table

    changes = diff_plans(old, new)
    if args.json:
        document = {"format": JSON_FORMAT, "diff": [c.to_dict() for c in changes]}
        sys.stdout.write(json.dumps(document, indent=2) + "\n")
    elif changes:
        out.print(diff_table(str(args.diff), changes))
    else:
        out.print(f"no change against {args.diff}", markup=False)
    return EXIT_PROBLEM if has_errors else EXIT_OK


def _cmd_plan(args: argparse.Namespace, out: Console, err: Console) -> int:
    from myriad.plan.pipeline import plan_spec

    if args.explain is not None:
        return _explain(args.explain)
    if args.spec is None:
        raise BadArguments("plan needs a spec (myriad plan SPEC), or --explain RULE")
    if args.cabling is not None:
        _output_file("--cabling", args.cabling)
    if args.svg is not None:
        _output_file("--svg", args.svg, ".svg")
    if args.out is not None:
        _output_folder("--out", args.out)
    old = _old_plan(args.diff) if args.diff is not None else None
    result = plan_spec(args.spec)
    document = {"format": JSON_FORMAT, **result.to_dict()}
    if old is not None:
        return _print_diff(args, out, old, document, result.has_errors)
    from myriad.views.json_stream import json_chunks

    try:
        if args.cabling is not None or args.svg is not None:
            from myriad.views.fabric_files import write_fabric_files

            cabling = write_fabric_files(result, args.cabling, args.svg)
            if cabling:
                document["cabling"] = cabling
        if args.out is not None:
            atomic_write_lines(args.out / "plan.json", json_chunks(document))
    except OSError as exc:
        raise BadArguments(f"cannot write {exc.filename}: {exc.strerror}") from exc
    if args.json:
        sys.stdout.writelines(json_chunks(document))
    else:
        from myriad.views.plan import print_plan

        print_plan(out, result)
        if "cabling" in document and args.cabling is not None:
            from myriad.views.fabric_files import sheet_summary

            out.print(sheet_summary(args.cabling, document["cabling"]), markup=False)
        if args.out is not None:
            out.print(f"plan written to {args.out / 'plan.json'}", markup=False)
    return EXIT_PROBLEM if result.has_errors else EXIT_OK


def _cmd_render(args: argparse.Namespace, out: Console, err: Console) -> int:
    from myriad.provision.resolve import render_spec

    machines_file: Path | None = args.stack_outputs
    result = render_spec(
        args.spec,
        args.out,
        stack=args.stack,
        stack_outputs=machines_file,
        ssh_user=args.ssh_user,
    )
    if args.json:
        document = {
            "format": JSON_FORMAT,
            "cluster": result.cluster,
            "hosts": result.hosts,
            "groups": result.groups,
            "path": str(result.path),
        }
        sys.stdout.write(json.dumps(document, indent=2) + "\n")
        return EXIT_OK
    out.print(
        f"inventory for {result.cluster}: {result.hosts:,} hosts in {result.groups} groups "
        f"written to {result.path}",
        markup=False,
    )
    return EXIT_OK


def _cmd_up(args: argparse.Namespace, out: Console, err: Console) -> int:
    from myriad.lifecycle.up import up
    from myriad.views.progress import Phases
    from myriad.views.up import print_up
    from myriad.views.validation import GatherStatus

    result = up(
        args.spec,
        out,
        reporter=Phases(out),
        gathering=GatherStatus(out),
        validate=not args.no_validate,
        retry_failed=args.retry_failed,
        tuning=_tuning(args),
        wait_s=args.wait,
    )
    print_up(out, result)
    return _up_exit(result)


def _up_exit(result: UpResult) -> int:
    """0 only when bring-up, the image rollout (if any) and validation (unless skipped) passed."""
    if result.bringup_failed or result.rollout_failed:
        return EXIT_PROBLEM
    return _validation_exit(result.validation) if result.validation is not None else EXIT_OK


def _tuning(args: argparse.Namespace) -> Tuning:
    from myriad import runner

    if args.ansible_defaults:
        return runner.ANSIBLE_DEFAULTS
    return runner.TUNED_WITHOUT_MITOGEN if args.no_mitogen else runner.TUNED


def _cmd_bringup(args: argparse.Namespace, out: Console, err: Console) -> int:
    from myriad.lifecycle.bringup import bringup
    from myriad.views.bringup import print_bringup
    from myriad.views.progress import Phases

    done = bringup(
        args.spec,
        out,
        reporter=Phases(out),
        stack=args.stack,
        stack_outputs=args.stack_outputs,
        limit=_split(args.limit),
        tags=_split(args.tags),
        retry_failed=args.retry_failed,
        tuning=_tuning(args),
        check=args.check,
        wait_s=args.wait,
    )
    print_bringup(out, done.run)
    return EXIT_OK if done.run.ok else EXIT_PROBLEM


def _cmd_down(args: argparse.Namespace, out: Console, err: Console) -> int:
    from myriad.bringup import verbs

    return verbs.down(args.spec, out, yes=args.yes)


def _cmd_status(args: argparse.Namespace, out: Console, err: Console) -> int:
    from myriad.bringup import verbs

    status = verbs.status(args.spec)
    if args.json:
        sys.stdout.write(json.dumps({"format": JSON_FORMAT, **status.to_dict()}, indent=2) + "\n")
    else:
        from myriad.views.status import print_status

        print_status(out, status)
    return EXIT_OK


def _split(value: str | None) -> list[str] | None:
    return [part for part in value.split(",") if part] if value else None


def _cmd_validate(args: argparse.Namespace, out: Console, err: Console) -> int:
    # With --json the document is the only thing on stdout; tables and progress go to stderr.
    screen = err if args.json else out
    if args.fabric:
        from myriad.validate.fabric_service import run_validate_fabric
        from myriad.views.validation import print_lines

        fabric = run_validate_fabric(
            args.spec,
            from_file=args.fabric_from,
            stack=args.stack,
            stack_outputs=args.stack_outputs,
            junit=args.junit,
            speed_cap=args.speed_cap,
            topology_conf=args.topology_conf,
        )
        if args.json:
            from myriad.validate.report import to_json

            sys.stdout.write(to_json(fabric.report))
        else:
            print_lines(out, fabric.lines)
        return _validation_exit(fabric.report)
    if args.fabric_from is not None or args.speed_cap is not None or args.topology_conf:
        from myriad.errors import FabricInputError

        raise FabricInputError("--from, --speed-cap and --topology-conf go with --fabric")
    from myriad.validate.service import run_validate
    from myriad.views.validation import GatherStatus, print_report

    report = run_validate(
        args.spec,
        inventory_dir=args.inventory,
        stack=args.stack,
        stack_outputs=args.stack_outputs,
        junit=args.junit,
        perf=args.perf,
        limit=_split(args.limit),
        jobs=not args.no_jobs,
        progress=GatherStatus(screen),
    )
    if args.json:
        from myriad.validate.report import to_json

        sys.stdout.write(to_json(report))
    else:
        print_report(screen, report, args.verbose)
    if args.junit is not None:
        # A path whole, never folded at the console's width (stderr is not widened).
        screen.print(f"JUnit XML written to {args.junit}", markup=False, soft_wrap=True)
    return _validation_exit(report)


def _validation_exit(report: ValidationReport) -> int:
    """0 when every check passed or did not apply; 1 when one failed, could not be read, or a
    node did not answer."""
    return EXIT_OK if report.ok else EXIT_PROBLEM


def _cmd_image_build(args: argparse.Namespace, out: Console, err: Console) -> int:
    from myriad.bringup.images import image_build
    from myriad.views.progress import Phases

    # Under --json the phases go to stderr and stdout holds the document.
    result = image_build(
        args.spec,
        reporter=Phases(err if args.json else out),
        profiles=args.profile or (),
        force=args.force,
        wait_s=args.wait,
        tuning=_tuning(args),
    )
    if args.json:
        sys.stdout.write(json.dumps({"format": JSON_FORMAT, **result.to_dict()}, indent=2) + "\n")
    else:
        from myriad.views.images import print_image_build

        print_image_build(out, result)
    return EXIT_OK


def _health_explain(args: argparse.Namespace, out: Console) -> int:
    from myriad.health.actions import load_action_map
    from myriad.spec.references import suggestion

    actions = load_action_map()
    entries = actions.explain(args.explain)
    if not entries:
        known = [*actions.names(), "xid:N", "gpu.xid:N", "gpu.recovery-action:VALUE"]
        raise BadArguments(
            f"no check or entry '{args.explain}' in the action map; "
            f"{suggestion(args.explain, known)}"
        )
    if args.json:
        document = {
            "format": JSON_FORMAT,
            "catalog": actions.catalog_source,
            "entries": [{"entry": name, **rule.to_dict()} for name, rule in entries],
        }
        sys.stdout.write(json.dumps(document, indent=2) + "\n")
    else:
        from myriad.views.health import print_explain

        print_explain(out, args.explain, entries)
    return EXIT_OK


def _cmd_health(args: argparse.Namespace, out: Console, err: Console) -> int:
    from myriad.health.report import health_report

    if args.explain is not None:
        return _health_explain(args, out)
    if args.spec is None:
        raise BadArguments("health needs a spec (myriad health SPEC), or --explain CHECK")
    from myriad.bringup.flow import cluster_state
    from myriad.ops.remedy import load_history

    report = health_report(args.spec, stack=args.stack, stack_outputs=args.stack_outputs)
    actions = load_history(cluster_state(report.cluster).root)
    if args.json:
        document = {
            "format": JSON_FORMAT,
            **report.to_dict(),
            "remediation_actions": [r.to_dict() for r in actions],
        }
        sys.stdout.write(json.dumps(document, indent=2) + "\n")
    else:
        from myriad.views.health import print_health

        print_health(out, report, actions)
    # 1 while a node is drained, failing, unreachable or stale.
    return EXIT_OK if report.healthy else EXIT_PROBLEM


def _remedy_every(
    args: argparse.Namespace, run_pass: Callable[[], RemedyResult], out: Console, err: Console
) -> int:
    """`remedy --every S`: passes until SIGTERM or Ctrl-C, which end it after the pass in
    progress (exit 0); with --json one document a line per pass."""
    import signal
    import threading

    from myriad.ops.remedy import MIN_EVERY_S, remedy_every

    if args.every < MIN_EVERY_S:
        raise BadArguments(
            f"--every {args.every}: at least {MIN_EVERY_S} s between passes (a reboot "
            "through Slurm takes minutes)"
        )

    def report(result: RemedyResult | str) -> None:
        if args.json:
            body = {"skipped": result} if isinstance(result, str) else result.to_dict()
            sys.stdout.write(json.dumps({"format": JSON_FORMAT, **body}) + "\n")
            sys.stdout.flush()
        elif isinstance(result, str):
            err.print(result, markup=False)
        else:
            from myriad.views.health import print_remedy

            print_remedy(out, result)

    stop = threading.Event()
    wanted = (signal.SIGTERM, signal.SIGINT)
    previous = {s: signal.signal(s, lambda signum, frame: stop.set()) for s in wanted}
    try:
        passes = remedy_every(run_pass, args.every, report, stop)
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
    err.print(f"stopped after {passes} passes", markup=False)
    return EXIT_OK


def _cmd_remedy(args: argparse.Namespace, out: Console, err: Console) -> int:
    from myriad.ops.remedy import remedy

    def run_pass() -> RemedyResult:
        return remedy(
            args.spec, dry_run=args.dry_run, stack=args.stack, stack_outputs=args.stack_outputs
        )

    if args.every is not None:
        return _remedy_every(args, run_pass, out, err)
    result = run_pass()
    if args.json:
        sys.stdout.write(json.dumps({"format": JSON_FORMAT, **result.to_dict()}, indent=2) + "\n")
    else:
        from myriad.views.health import print_remedy

        print_remedy(out, result)
    # 1 when an action failed, the breaker stopped automatic actions or a rack is at fault:
    # a person should look.
    stopped = result.plan.breaker.tripped or result.plan.racks
    return EXIT_PROBLEM if result.failed or stopped else EXIT_OK


def _catalog_of(args: argparse.Namespace) -> Catalog:
    if args.spec is not None:
        from myriad.spec.loader import load_spec

        return load_spec(args.spec).catalog
    from myriad.spec.loader import shipped_catalog

    return shipped_catalog()


def _cmd_catalog_list(args: argparse.Namespace, out: Console, err: Console) -> int:
    from myriad.views import catalog as view

    catalog = _catalog_of(args)
    selected = [view.kind(args.kind)] if args.kind else view.kinds()
    if args.json:
        content = {kind: _entries_json(catalog, kind) for kind in selected}
        sys.stdout.write(json.dumps(view.document(None, content), indent=2) + "\n")
    else:
        view.print_list(out, catalog, selected)
    return EXIT_OK


def _entries_json(catalog: Catalog, kind: str) -> dict[str, object]:
    entries = getattr(catalog, kind)
    return {name: entry.model_dump(mode="json") for name, entry in sorted(entries.items())}


def _cmd_catalog_show(args: argparse.Namespace, out: Console, err: Console) -> int:
    from myriad.views import catalog as view

    kind, entry = view.find(_catalog_of(args), args.name)
    if args.json:
        document = view.document(kind, {"name": args.name, "entry": entry})
        sys.stdout.write(json.dumps(document, indent=2) + "\n")
    else:
        view.print_entry(out, args.name, kind, entry)
    return EXIT_OK


def _cmd_init(args: argparse.Namespace, out: Console, err: Console) -> int:
    from myriad.plan.pipeline import plan_loaded
    from myriad.spec.loader import load_spec_text, shipped_catalog
    from myriad.spec.scaffold import Choices, ask_missing, default_name, gpu_models, scaffold

    target: Path = args.file
    if target.exists():
        raise BadArguments(f"{target} exists: name a new file (init never overwrites one)")
    _output_folder("init", target.parent)
    catalog = shipped_catalog()
    given = {
        "name": args.name or default_name(target),
        "gpu": args.gpu,
        "nodes": args.nodes,
        "fabric": args.fabric,
        "os": args.os,
        "orchestrator": args.scheduler,
    }
    if sys.stdin.isatty() and not args.yes:
        given = ask_missing(given, gpu_models(catalog), input)
    choices = Choices(**{key: value for key, value in given.items() if value is not None})
    text = scaffold(choices, catalog)
    result = plan_loaded(load_spec_text(text, str(target)))
    errors = [f for f in result.findings if f.severity == "error"]
    if errors:
        # Never write a first spec that does not plan: say what the choices ran into.
        lines = [f"{f.id}: {f.message}; {f.suggestion}" for f in errors]
        raise BadArguments("these choices do not plan, nothing written:\n  " + "\n  ".join(lines))
    atomic_write_text(target, text)
    plan = result.plan
    gpus = plan.gpus if plan is not None else 0
    # Plain write: rich would fold a long path at 80 columns when piped.
    sys.stdout.write(
        f"wrote {target}: {choices.nodes} GPU nodes, {gpus:,} GPUs, {choices.fabric}, "
        f"{choices.os}, {choices.orchestrator}; next: myriad plan {target}\n"
    )
    return EXIT_OK


def _cmd_report(args: argparse.Namespace, out: Console, err: Console) -> int:
    from myriad.plan.pipeline import plan_spec

    _output_folder("--out", args.out)
    result = plan_spec(args.spec)
    validation = _validation_for(args, result.loaded.spec.metadata.name)
    health = _health_for(result.loaded.spec.metadata.name)
    svg = None
    if result.plan is not None and result.plan.fabric is not None:
        from myriad.views.fabric_files import fabric_picture

        svg = fabric_picture(result)
    from myriad.plan.nodes import iter_nodes
    from myriad.views.report import render_report

    islands = {
        node.name: f"island {node.island}" if node.island is not None else f"{node.role}s"
        for node in iter_nodes(result.loaded.spec)
    }
    page = render_report(
        {"format": JSON_FORMAT, **result.to_dict()},
        result.loaded.spec.metadata.description,
        svg,
        validation,
        islands,
        health,
    )
    target = args.out / "index.html"
    try:
        atomic_write_text(target, page)
    except OSError as exc:
        raise BadArguments(f"cannot write {exc.filename}: {exc.strerror}") from exc
    kept = "with the last validation" if validation is not None else "no validation kept yet"
    sys.stdout.write(f"report written to {target} ({kept})\n")
    return EXIT_OK


def _validation_for(args: argparse.Namespace, cluster: str) -> Mapping[str, Any] | None:
    if args.validation is not None:
        try:
            document: Mapping[str, Any] = json.loads(args.validation.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise BadArguments(f"--validation {args.validation}: {exc}") from exc
        if not isinstance(document, Mapping) or "results" not in document:
            raise BadArguments(f"--validation {args.validation}: not `myriad validate --json`")
        return document
    from myriad.bringup.flow import state_base
    from myriad.validate.report import read_last

    root = state_base() / cluster
    return read_last(root) if root.is_dir() else None


def _health_for(cluster: str) -> Mapping[str, Any] | None:
    from myriad.bringup.flow import state_base
    from myriad.health.report import read_last

    root = state_base() / cluster
    return read_last(root) if root.is_dir() else None


def _cmd_completion(args: argparse.Namespace, out: Console, err: Console) -> int:
    from myriad.views.completion import bash_script

    sys.stdout.write(bash_script(build_parser()))
    return EXIT_OK


def _cmd_schema(args: argparse.Namespace, out: Console, err: Console) -> int:
    from myriad.spec.models import Cluster

    schema = Cluster.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    sys.stdout.write(json.dumps(schema, indent=2) + "\n")
    return EXIT_OK


def _cmd_provision_wait(args: argparse.Namespace, out: Console, err: Console) -> int:
    from myriad.provision.wait import pxe_root_for, run

    # Plain lines, flushed: progress is read through pipes and logs as it happens; under
    # --json they go to stderr and stdout holds the document.
    stream = sys.stderr if args.json else sys.stdout
    result = run(
        args.spec,
        pxe_root=pxe_root_for(args.stack, args.pxe_root),
        poll_s=args.poll,
        ssh_port=args.ssh_port,
        print_line=lambda line: print(line, file=stream, flush=True),
    )
    print(result.summary(), file=stream, flush=True)
    if args.json:
        document = {"format": JSON_FORMAT, **result.to_dict()}
        sys.stdout.write(json.dumps(document, indent=2) + "\n")
    return EXIT_PROBLEM if result.failed else EXIT_OK


# --- day-2 operations (myriad.ops) ---------------------------------------------------------


def _cmd_drain(args: argparse.Namespace, out: Console, err: Console) -> int:
    from myriad.ops import nodes

    changes = nodes.drain(
        args.spec,
        _split(args.nodes) or [],
        args.reason,
        stack=args.stack,
        stack_outputs=args.stack_outputs,
    )
    return _print_changes(args, changes)


def _cmd_resume(args: argparse.Namespace, out: Console, err: Console) -> int:
    from myriad.ops import nodes
    from myriad.ops.accept_cluster import retest_repaired

    where = {"stack": args.stack, "stack_outputs": args.stack_outputs}
    changes = nodes.resume(
        args.spec,
        _split(args.nodes) or [],
        force=args.force,
        # A node back from repair returns only through a quick acceptance of it.
        retest=lambda repaired: retest_repaired(args.spec, repaired, **where),
        **where,
    )
    return _print_changes(args, changes)


def _print_changes(args: argparse.Namespace, changes: Sequence[NodeChange]) -> int:
    if args.json:
        document = {"format": JSON_FORMAT, "nodes": [change.to_dict() for change in changes]}
        sys.stdout.write(json.dumps(document, indent=2) + "\n")
    else:
        sys.stdout.write("".join(change.describe() + "\n" for change in changes))
    return EXIT_OK


def _cmd_roll(args: argparse.Namespace, out: Console, err: Console) -> int:
    from myriad.errors import OpsInputError
    from myriad.ops.batches import Amount
    from myriad.ops.roll import RollOptions, plan_roll, read_variables, roll

    where = {"stack": args.stack, "stack_outputs": args.stack_outputs}
    if args.resume:
        return _roll_outcome(
            args, out, err, lambda p: roll(args.spec, p, None, resume=True, **where)
        )
    if not args.reason:
        raise OpsInputError("myriad roll: --reason TEXT is required (or --resume)")
    options = RollOptions(
        reason=args.reason,
        tags=tuple(_split(args.tags) or ()),
        batch=Amount.parse(args.batch, "--batch"),
        max_unavailable=(
            None
            if args.max_unavailable is None
            else Amount.parse(args.max_unavailable, "--max-unavailable")
        ),
        max_failures=Amount.parse(args.max_failures, "--max-failures", allow_zero=True),
        drain_timeout_s=args.drain_timeout,
        kill_after_s=args.kill_after,
        variables=read_variables(args.vars) if args.vars else {},
        poll_s=args.poll,
    )
    if args.plan:
        planned = plan_roll(args.spec, options, **where)
        if args.json:
            document = {"format": JSON_FORMAT, **planned.to_dict()}
            sys.stdout.write(json.dumps(document, indent=2) + "\n")
        else:
            from myriad.views.roll_plan import print_roll_plan

            print_roll_plan(out, planned)
        return EXIT_PROBLEM if planned.failures else EXIT_OK
    return _roll_outcome(args, out, err, lambda p: roll(args.spec, p, options, **where))


def _cmd_accept(args: argparse.Namespace, out: Console, err: Console) -> int:
    """0 when every node passed, 1 when one failed (drained) or the fabric above the nodes
    did, 2 on bad input."""
    from myriad.errors import OpsInputError
    from myriad.ops.accept_cluster import accept
    from myriad.ops.accept_state import to_junit

    if args.level is None and not args.resume:
        raise OpsInputError("myriad accept: --level quick|full|burn-in is required (or --resume)")
    if args.junit is not None:
        _output_file("--junit", args.junit, ".xml")
    outcome = accept(
        args.spec,
        args.level or "quick",
        limit=_split(args.limit) or (),
        nodes_from=args.nodes_from,
        resume=args.resume,
        stack=args.stack,
        stack_outputs=args.stack_outputs,
    )
    if args.junit is not None:
        args.junit.write_text(to_junit(outcome.run, outcome.cluster))
    if args.json:
        sys.stdout.write(json.dumps({"format": JSON_FORMAT, **outcome.to_dict()}, indent=2) + "\n")
    else:
        from myriad.views.accept import print_accept

        print_accept(out, outcome)
    if args.junit is not None:
        (err if args.json else out).print(
            f"JUnit XML written to {args.junit}", markup=False, soft_wrap=True
        )
    return EXIT_OK if outcome.result.passed else EXIT_PROBLEM


def _cmd_replace(args: argparse.Namespace, out: Console, err: Console) -> int:
    from myriad.ops.replace import replace

    return _roll_outcome(
        args,
        out,
        err,
        lambda progress: replace(
            args.spec,
            args.node,
            progress,
            reason=args.reason,
            drain_timeout_s=args.drain_timeout,
            kill_after_s=args.kill_after,
        ),
    )


def _cmd_remove(args: argparse.Namespace, out: Console, err: Console) -> int:
    from myriad.ops.remove import remove

    return _roll_outcome(
        args,
        out,
        err,
        lambda progress: remove(
            args.spec,
            _split(args.nodes) or [],
            progress,
            reason=args.reason,
            drain_timeout_s=args.drain_timeout,
            kill_after_s=args.kill_after,
        ),
    )


def _roll_outcome(
    args: argparse.Namespace,
    out: Console,
    err: Console,
    run: Callable[[Callable[[str], None]], RollResult],
) -> int:
    """A roll's lines stream as it goes (to stderr under --json, where stdout holds the
    document); then its outcome: 0 when every node was rolled, 1 when one failed, was
    skipped or not reached."""
    from myriad.views.roll import print_roll, progress_lines

    result = run(progress_lines(err if args.json else out))
    if args.json:
        sys.stdout.write(json.dumps({"format": JSON_FORMAT, **result.to_dict()}, indent=2) + "\n")
    else:
        print_roll(out, result)
    return EXIT_OK if result.ok else EXIT_PROBLEM


def _add_ops_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    def cluster_source(command: argparse.ArgumentParser) -> None:
        source = command.add_mutually_exclusive_group()
        source.add_argument("--stack", metavar="ENV", help="node addresses from this Pulumi stack")
        source.add_argument("--stack-outputs", type=Path, metavar="FILE", help="...or from a file")

    drain = commands.add_parser(
        "drain", help="drain compute nodes in Slurm, the reason saying who and why"
    )
    drain.add_argument("spec", type=Path, help="the cluster.yaml")
    drain.add_argument("nodes", help="comma-separated compute nodes")
    drain.add_argument("--reason", required=True, help="why (recorded with your user name)")
    cluster_source(drain)
    drain.add_argument("--json", action="store_true", help="what changed, as JSON")
    drain.set_defaults(handler=_cmd_drain)

    resume = commands.add_parser(
        "resume",
        help="resume drained nodes (never those the health runner drained, unless --force)",
    )
    resume.add_argument("spec", type=Path, help="the cluster.yaml")
    resume.add_argument("nodes", help="comma-separated compute nodes")
    resume.add_argument(
        "--force",
        action="store_true",
        help="also resume nodes drained by the node health runner, or sent for repair by "
        "remediation (without testing them again)",
    )
    cluster_source(resume)
    resume.add_argument("--json", action="store_true", help="what changed, as JSON")
    resume.set_defaults(handler=_cmd_resume)

    remedy = commands.add_parser(
        "remedy",
        help="repair drained nodes within health.remediation's budget: GPU reset, reboot "
        "through Slurm, BMC power cycle, or keep drained and run the hook",
    )
    remedy.add_argument("spec", type=Path, help="the cluster.yaml")
    remedy.add_argument(
        "--dry-run", action="store_true", help="decide and say what would be done; do nothing"
    )
    remedy.add_argument(
        "--every",
        type=int,
        metavar="SECONDS",
        help="a pass every SECONDS (at least 60) until SIGTERM or Ctrl-C, which end it after "
        "the pass in progress; a pass the cluster's lock refuses is skipped",
    )
    cluster_source(remedy)
    remedy.add_argument("--json", action="store_true", help="the decisions and outcomes as JSON")
    remedy.set_defaults(handler=_cmd_remedy)

    roll = commands.add_parser(
        "roll", help="apply a change batch by batch, draining nodes without killing jobs"
    )
    roll.add_argument("spec", type=Path, help="the cluster.yaml")
    roll.add_argument("--reason", help="what the change is (the drain reason names it)")
    roll.add_argument("--tags", metavar="ROLES", help="comma-separated role tags of the site play")
    roll.add_argument(
        "--vars", type=Path, metavar="FILE", help="YAML file of role variables for this change"
    )
    roll.add_argument("--batch", default="1", metavar="N|P%", help="nodes per batch (default 1)")
    roll.add_argument(
        "--max-unavailable",
        metavar="N|P%",
        help="at most this many nodes out of service at once, counting those already down",
    )
    roll.add_argument(
        "--max-failures",
        default="0",
        metavar="N|P%",
        help="nodes that may fail before the roll stops (default 0: the first failure)",
    )
    roll.add_argument(
        "--drain-timeout",
        type=float,
        default=3600.0,
        metavar="S",
        help="seconds to wait for a node's jobs; then it is skipped and resumed untouched",
    )
    roll.add_argument(
        "--kill-after",
        type=float,
        metavar="S",
        help="cancel the jobs still on a drained node after S seconds (never without it)",
    )
    roll.add_argument("--poll", type=float, default=5.0, metavar="S", help=argparse.SUPPRESS)
    roll.add_argument(
        "--plan", action="store_true", help="dry run: batches, check-mode changes, blocking jobs"
    )
    roll.add_argument(
        "--resume", action="store_true", help="continue the last unfinished roll where it stopped"
    )
    cluster_source(roll)
    roll.add_argument(
        "--json",
        action="store_true",
        help="the outcome as JSON (with --plan: the plan); the lines as it goes on stderr",
    )
    roll.set_defaults(handler=_cmd_roll)

    accept = commands.add_parser(
        "accept",
        help="acceptance before production: DCGM, NCCL and RDMA as Slurm job steps, judged "
        "against the plan; failed nodes drained",
    )
    accept.add_argument("spec", type=Path, help="the cluster.yaml")
    accept.add_argument(
        "--level",
        choices=("quick", "full", "burn-in"),
        help="quick (minutes), full (DCGM level 3 and the slow-node search) or burn-in (hours)",
    )
    accept.add_argument("--limit", metavar="NODES", help="only these comma-separated nodes")
    accept.add_argument(
        "--nodes-from",
        choices=("drained", "repaired"),
        default="all",
        help="drained: re-test the nodes accept drained; repaired: those remediation sent "
        "for repair; those that pass are resumed",
    )
    accept.add_argument(
        "--resume", action="store_true", help="continue the last unfinished acceptance"
    )
    cluster_source(accept)
    accept.add_argument("--json", action="store_true", help="the outcome as JSON")
    accept.add_argument("--junit", type=Path, metavar="FILE", help="also write JUnit XML")
    accept.set_defaults(handler=_cmd_accept)

    replace = commands.add_parser(
        "replace", help="a node on a new machine (local: a new container), converged, validated"
    )
    replace.add_argument("spec", type=Path, help="the cluster.yaml")
    replace.add_argument("node", help="the compute node whose machine is replaced")
    replace.add_argument(
        "--reason", default="machine replaced", help="recorded as the drain reason"
    )
    replace.add_argument(
        "--drain-timeout",
        type=float,
        default=3600.0,
        metavar="S",
        help="seconds to wait for the node's jobs before giving up",
    )
    replace.add_argument(
        "--kill-after",
        type=float,
        metavar="S",
        help="cancel the node's jobs after S seconds (never without it)",
    )
    replace.add_argument(
        "--json", action="store_true", help="the outcome as JSON; the lines as it goes on stderr"
    )
    replace.set_defaults(handler=_cmd_replace)

    remove = commands.add_parser(
        "remove", help="nodes the spec no longer names leave Slurm once their jobs ended"
    )
    remove.add_argument("spec", type=Path, help="the cluster.yaml, its pool count lowered")
    remove.add_argument("nodes", help="comma-separated compute nodes to remove")
    remove.add_argument("--reason", default="removed from the cluster", help="the drain reason")
    remove.add_argument(
        "--drain-timeout",
        type=float,
        default=3600.0,
        metavar="S",
        help="seconds to wait for the nodes' jobs before giving up",
    )
    remove.add_argument(
        "--kill-after",
        type=float,
        metavar="S",
        help="cancel the nodes' jobs after S seconds (never without it)",
    )
    remove.add_argument(
        "--json", action="store_true", help="the outcome as JSON; the lines as it goes on stderr"
    )
    remove.set_defaults(handler=_cmd_remove)


Handler = Callable[[argparse.Namespace, Console, Console], int]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="myriad",
        description="Plan, provision, bring up and validate GPU clusters from one spec.",
    )
    parser.add_argument("--version", action="version", version=f"myriad {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    plan = commands.add_parser(
        "plan", help="check the hardware choices and compute the cluster (fabric, power, cost)"
    )
    plan.add_argument("spec", type=Path, nargs="?", help="the cluster.yaml")
    plan.add_argument(
        "--explain", metavar="RULE", help="why a lint rule exists and how to fix its finding"
    )
    plan.add_argument("--json", action="store_true", help="print the plan and findings as JSON")
    plan.add_argument("--out", type=Path, metavar="DIR", help="also write DIR/plan.json")
    plan.add_argument(
        "--cabling",
        type=Path,
        metavar="FILE",
        help="write the cabling plan (one row per cable) as CSV; --json then lists the cables",
    )
    plan.add_argument("--svg", type=Path, metavar="FILE", help="draw the fabric as SVG")
    plan.add_argument(
        "--diff",
        type=Path,
        metavar="OLD.json",
        help="what changed against an earlier plan (plan --json or --out): nodes, switches, "
        "cables, optics, power, cost, findings",
    )
    plan.set_defaults(handler=_cmd_plan)

    render = commands.add_parser(
        "render", help="write the Ansible inventory (groups, group_vars, host_vars) for a spec"
    )
    render.add_argument("spec", type=Path, help="the cluster.yaml")
    render.add_argument("--out", type=Path, required=True, metavar="DIR", help="inventory folder")
    machines = render.add_mutually_exclusive_group()
    machines.add_argument(
        "--stack",
        metavar="ENV",
        help="take node addresses (and an FSx file system) from this Pulumi stack's outputs",
    )
    machines.add_argument(
        "--stack-outputs",
        type=Path,
        metavar="FILE",
        help="the same, from a file saved with `pulumi stack output --json`",
    )
    render.add_argument("--ssh-user", metavar="USER", help="ansible_user for every host")
    render.add_argument("--json", action="store_true", help="what was written, as JSON")
    render.set_defaults(handler=_cmd_render)

    up = commands.add_parser(
        "up", help="the local cluster: containers as nodes, bring-up, validation"
    )
    up.add_argument("spec", type=Path, help="a cluster.yaml whose provider is local")
    up.add_argument("--retry-failed", action="store_true", help="re-run only the failed nodes")
    up.add_argument("--no-validate", action="store_true", help="stop after the bring-up")
    _add_tuning_options(up)
    _add_wait_option(up)
    up.set_defaults(handler=_cmd_up)

    bringup = commands.add_parser("bringup", help="run the site playbook on any environment")
    bringup.add_argument("spec", type=Path, help="the cluster.yaml")
    source = bringup.add_mutually_exclusive_group()
    source.add_argument("--stack", metavar="ENV", help="node addresses from this Pulumi stack")
    source.add_argument("--stack-outputs", type=Path, metavar="FILE", help="...or from a file")
    bringup.add_argument("--limit", metavar="HOSTS", help="comma-separated hosts or groups")
    bringup.add_argument(
        "--tags", metavar="TAGS", help="comma-separated role tags (unknown refused)"
    )
    bringup.add_argument("--retry-failed", action="store_true", help="only the last failures")
    bringup.add_argument(
        "--check",
        action="store_true",
        help="Ansible's check mode with diffs: show what a run would change, change nothing",
    )
    _add_tuning_options(bringup)
    _add_wait_option(bringup)
    bringup.set_defaults(handler=_cmd_bringup)

    down = commands.add_parser("down", help="remove the local cluster's containers and network")
    down.add_argument("spec", type=Path, help="a cluster.yaml whose provider is local")
    down.add_argument("--yes", action="store_true", help="do not ask for the cluster name")
    down.set_defaults(handler=_cmd_down)

    status = commands.add_parser("status", help="nodes, their state and the last run's result")
    status.add_argument("spec", type=Path, help="the cluster.yaml")
    status.add_argument("--json", action="store_true", help="as JSON, with a format version")
    status.set_defaults(handler=_cmd_status)

    validate = commands.add_parser(
        "validate", help="check every node's deployed state against the spec"
    )
    validate.add_argument("spec", type=Path, help="the cluster.yaml")
    validate.add_argument(
        "--inventory", type=Path, metavar="DIR", help="an inventory from `myriad render`"
    )
    where = validate.add_mutually_exclusive_group()
    where.add_argument("--stack", metavar="ENV", help="node addresses from this Pulumi stack")
    where.add_argument("--stack-outputs", type=Path, metavar="FILE", help="...or from a file")
    validate.add_argument("--json", action="store_true", help="the report as JSON on stdout")
    validate.add_argument("--junit", type=Path, metavar="FILE", help="also write JUnit XML")
    validate.add_argument(
        "--perf", action="store_true", help="also run nccl-tests and ib_write_bw (real clusters)"
    )
    validate.add_argument("--limit", metavar="HOSTS", help="comma-separated hosts or groups")
    validate.add_argument(
        "--fabric",
        action="store_true",
        help="compare the discovered InfiniBand fabric (ibnetdiscover) with the cabling plan",
    )
    validate.add_argument(
        "--from",
        dest="fabric_from",
        type=Path,
        metavar="FILE",
        help="with --fabric: ibnetdiscover output saved to FILE, instead of running it",
    )
    validate.add_argument(
        "--speed-cap",
        metavar="SPEED",
        help="with --fabric: judge links planned faster than SPEED (e.g. HDR) at SPEED",
    )
    validate.add_argument(
        "--topology-conf",
        type=Path,
        metavar="FILE",
        help="with --fabric: write Slurm's topology.conf from the discovered fabric",
    )
    validate.add_argument(
        "--no-jobs",
        action="store_true",
        help="do not run the tiny Slurm job on each compute node (check slurm.job)",
    )
    validate.add_argument(
        "--verbose",
        action="store_true",
        help="list every check, not only those that failed or could not be read",
    )
    validate.set_defaults(handler=_cmd_validate)

    image = commands.add_parser(
        "image", help="node images per profile, built by the roles' image phase (image mode)"
    )
    image_commands = image.add_subparsers(dest="image_command", required=True)
    image_build = image_commands.add_parser(
        "build",
        help="build each profile's image where its inputs changed (local: a Docker image; "
        "bare metal: also its root file system archive; AWS: the Image Builder kit)",
    )
    image_build.add_argument("spec", type=Path, help="the cluster.yaml")
    image_build.add_argument(
        "--profile", action="append", metavar="P", help="only this profile (repeatable)"
    )
    image_build.add_argument("--force", action="store_true", help="rebuild even if current")
    image_build.add_argument(
        "--json", action="store_true", help="what was built as JSON; the phases on stderr"
    )
    image_build.add_argument(
        "--wait", type=float, default=0.0, metavar="S",
        help="wait up to S seconds for another run on this cluster to finish",
    )  # fmt: skip
    image_build.add_argument("--no-mitogen", action="store_true", help=argparse.SUPPRESS)
    image_build.add_argument("--ansible-defaults", action="store_true", help=argparse.SUPPRESS)
    image_build.set_defaults(handler=_cmd_image_build)

    health = commands.add_parser(
        "health", help="node health: drained nodes, by whom, failing checks, stale runs"
    )
    health.add_argument("spec", type=Path, nargs="?", help="the cluster.yaml")
    health.add_argument(
        "--explain",
        metavar="CHECK",
        help="the remediation action a finding asks for and why: a check (hca.state), "
        "gpu.xid or xid:79, gpu.recovery-action or gpu.recovery-action:Reset",
    )
    where = health.add_mutually_exclusive_group()
    where.add_argument("--stack", metavar="ENV", help="node addresses from this Pulumi stack")
    where.add_argument("--stack-outputs", type=Path, metavar="FILE", help="...or from a file")
    health.add_argument("--json", action="store_true", help="the report as JSON on stdout")
    health.set_defaults(handler=_cmd_health)

    provision = commands.add_parser("provision", help="bare-metal installs started by pulumi up")
    provision_verbs = provision.add_subparsers(dest="verb", required=True, metavar="VERB")
    wait = provision_verbs.add_parser(
        "wait", help="follow the installs (resumable), power on queued nodes, show progress"
    )
    wait.add_argument("spec", type=Path, help="the cluster.yaml")
    wait.add_argument("--stack", metavar="ENV", help="read myriad:pxeRoot from Pulumi.ENV.yaml")
    wait.add_argument("--pxe-root", type=Path, metavar="DIR", help="the PXE server's folder")
    wait.add_argument("--poll", type=float, default=15.0, metavar="S", help="seconds per round")
    wait.add_argument("--ssh-port", type=int, default=22, help="where installed nodes answer")
    wait.add_argument(
        "--json", action="store_true", help="the outcome per node as JSON (progress on stderr)"
    )
    wait.set_defaults(handler=_cmd_provision_wait)

    _add_ops_commands(commands)

    schema = commands.add_parser("schema", help="print the JSON Schema of cluster.yaml")
    schema.set_defaults(handler=_cmd_schema)

    completion = commands.add_parser(
        "completion", help="shell completion: source <(myriad completion bash)"
    )
    completion.add_argument("shell", choices=["bash"], help="bash (zsh: bashcompinit first)")
    completion.set_defaults(handler=_cmd_completion)

    report = commands.add_parser(
        "report", help="one offline HTML page: the plan, the fabric and the last validation"
    )
    report.add_argument("spec", type=Path, help="the cluster.yaml")
    report.add_argument(
        "--out", type=Path, metavar="DIR", required=True, help="writes DIR/index.html"
    )
    report.add_argument(
        "--validation",
        type=Path,
        metavar="FILE",
        help="a `myriad validate --json` document (default: the last one kept for the cluster)",
    )
    report.set_defaults(handler=_cmd_report)

    init = commands.add_parser(
        "init", help="write a first spec from a few choices (asked on a terminal); it plans clean"
    )
    init.add_argument("file", type=Path, help="the cluster.yaml to write (never overwritten)")
    init.add_argument("--name", help="the cluster's name (default: the file's folder)")
    init.add_argument("--gpu", help="a GPU model of the catalog (default H100-SXM5-80GB)")
    init.add_argument("--nodes", type=int, help="GPU nodes (default 4)")
    init.add_argument("--fabric", help="infiniband (default) or roce")
    init.add_argument("--os", help="ubuntu-24.04 (default), ubuntu-22.04 or debian-12")
    init.add_argument("--scheduler", help="slurm (default) or kubernetes")
    init.add_argument("--yes", action="store_true", help="ask nothing: defaults for the rest")
    init.set_defaults(handler=_cmd_init)

    catalog = commands.add_parser(
        "catalog", help="the hardware Myriad knows: GPUs, NICs, switches, servers, drivers"
    )
    catalog_verbs = catalog.add_subparsers(dest="catalog_command", required=True, metavar="VERB")
    catalog_list = catalog_verbs.add_parser("list", help="every entry of one kind, or of all")
    catalog_list.add_argument("kind", nargs="?", help="gpus, nics, switches, servers, ...")
    catalog_list.set_defaults(handler=_cmd_catalog_list)
    catalog_show = catalog_verbs.add_parser("show", help="every figure of one entry and its source")
    catalog_show.add_argument("name", help="an entry's name, e.g. H100-SXM5-80GB")
    catalog_show.set_defaults(handler=_cmd_catalog_show)
    for verb in (catalog_list, catalog_show):
        verb.add_argument(
            "--spec", type=Path, metavar="FILE", help="include the spec's own catalog: entries"
        )
        verb.add_argument("--json", action="store_true", help="as JSON, with a format version")
    return parser


def _add_tuning_options(command: argparse.ArgumentParser) -> None:
    tuning = command.add_mutually_exclusive_group()
    tuning.add_argument(
        "--ansible-defaults",
        action="store_true",
        help="run Ansible with its defaults (5 forks, no pipelining, no fact cache, no Mitogen)",
    )
    tuning.add_argument(
        "--no-mitogen",
        action="store_true",
        help="keep the tuned settings but use Ansible's own linear strategy",
    )


def _add_wait_option(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--wait",
        type=float,
        default=0.0,
        metavar="S",
        help="when another run holds the cluster, wait up to S seconds for it (default: refuse)",
    )


def _json_error(args: argparse.Namespace, exc: MyriadError) -> None:
    """Under --json, the error as a document on stdout too, for the program reading it."""
    if not getattr(args, "json", False):
        return
    error: dict[str, object] = {"kind": type(exc).__name__, "exit_code": exc.exit_code}
    if isinstance(exc, SpecError):
        error["kind"] = "spec"
        error["problems"] = [
            {
                "file": p.file,
                "line": p.line,
                "column": p.column,
                "path": format_path(p.path),
                "message": p.message,
                "hint": p.hint,
            }
            for p in exc.problems
        ]
    else:
        error["message"] = str(exc)
    sys.stdout.write(json.dumps({"format": JSON_FORMAT, "error": error}, indent=2) + "\n")


# Off a terminal rich would fold text and cut table cells at 80 columns ("A800-SX…"): a pipe
# or a file gets every value whole instead. COLUMNS, when set, still wins.
PIPED_WIDTH = 1000


def _piped_width(stream: TextIO) -> int | None:
    if "COLUMNS" in os.environ or stream.isatty():
        return None
    return PIPED_WIDTH


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    out, err = Console(width=_piped_width(sys.stdout)), Console(stderr=True)
    handler: Handler = args.handler
    try:
        return handler(args, out, err)
    except SpecError as exc:
        # Plain text: one problem per line, never re-wrapped, so editors can jump to it.
        sys.stderr.write(exc.render() + "\n")
        _json_error(args, exc)
        return EXIT_INVALID
    except MyriadError as exc:
        sys.stderr.write(f"error: {exc}\n")
        _json_error(args, exc)
        return exc.exit_code
    except KeyboardInterrupt:
        err.print("interrupted")
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
