"""The `myriad` command: a thin layer that parses arguments, calls the library, prints.

Exit codes: 0 success, 1 the cluster has a problem (lint error, failed check), 2 the
input is unusable (invalid spec, bad arguments).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from myriad import __version__
from myriad.errors import MyriadError, SpecError
from myriad.fsutil import atomic_write_text

if TYPE_CHECKING:
    from myriad.bringup.verbs import Validator
    from myriad.runner import Tuning

EXIT_OK, EXIT_PROBLEM, EXIT_INVALID = 0, 1, 2


def _cmd_plan(args: argparse.Namespace, out: Console, err: Console) -> int:
    from myriad.plan.pipeline import plan_spec

    result = plan_spec(args.spec)
    document = result.to_dict()
    if args.out is not None:
        atomic_write_text(args.out / "plan.json", json.dumps(document, indent=2) + "\n")
    if args.json:
        sys.stdout.write(json.dumps(document, indent=2) + "\n")
    else:
        from myriad.views.plan import print_plan

        print_plan(out, result)
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
    out.print(
        f"inventory for {result.cluster}: {result.hosts:,} hosts in {result.groups} groups "
        f"written to {result.path}",
        markup=False,
    )
    return EXIT_OK


def _cmd_up(args: argparse.Namespace, out: Console, err: Console) -> int:
    from myriad.bringup import verbs
    from myriad.views.progress import Phases

    _health_documents(args)
    return verbs.up(
        args.spec,
        out,
        reporter=Phases(out),
        validate=None if args.no_validate else _validator(),
        retry_failed=args.retry_failed,
        tuning=_tuning(args),
    )


def _tuning(args: argparse.Namespace) -> Tuning:
    from myriad import runner

    if args.ansible_defaults:
        return runner.ANSIBLE_DEFAULTS
    return runner.TUNED_WITHOUT_MITOGEN if args.no_mitogen else runner.TUNED


def _validator() -> Validator:
    from myriad.validate.service import validate_after_bringup

    return validate_after_bringup


def _cmd_bringup(args: argparse.Namespace, out: Console, err: Console) -> int:
    from myriad.bringup import verbs
    from myriad.views.progress import Phases

    _health_documents(args)
    return verbs.bringup(
        args.spec,
        out,
        reporter=Phases(out),
        stack=args.stack,
        stack_outputs=args.stack_outputs,
        limit=_split(args.limit),
        tags=_split(args.tags),
        retry_failed=args.retry_failed,
        tuning=_tuning(args),
    )


def _cmd_down(args: argparse.Namespace, out: Console, err: Console) -> int:
    from myriad.bringup import verbs

    return verbs.down(args.spec, out, yes=args.yes)


def _cmd_status(args: argparse.Namespace, out: Console, err: Console) -> int:
    from myriad.bringup import verbs

    return verbs.status(args.spec, out)


def _split(value: str | None) -> list[str] | None:
    return [part for part in value.split(",") if part] if value else None


def _cmd_validate(args: argparse.Namespace, out: Console, err: Console) -> int:
    from myriad.validate.service import run_validate

    return run_validate(
        args.spec,
        inventory_dir=args.inventory,
        stack=args.stack,
        stack_outputs=args.stack_outputs,
        json_output=args.json,
        junit=args.junit,
        perf=args.perf,
        limit=_split(args.limit),
        console=out,
    )


def _health_documents(args: argparse.Namespace) -> None:
    """Node health's per-node documents, for the health role, before a bring-up."""
    from myriad.health.render import prepare

    prepare(
        args.spec,
        stack=getattr(args, "stack", None),
        stack_outputs=getattr(args, "stack_outputs", None),
    )


def _cmd_health(args: argparse.Namespace, out: Console, err: Console) -> int:
    from myriad.health.view import run_health

    return run_health(
        args.spec,
        json_output=args.json,
        stack=args.stack,
        stack_outputs=args.stack_outputs,
        console=out,
    )


def _cmd_schema(args: argparse.Namespace, out: Console, err: Console) -> int:
    from myriad.spec.models import Cluster

    schema = Cluster.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    sys.stdout.write(json.dumps(schema, indent=2) + "\n")
    return EXIT_OK


def _cmd_provision_wait(args: argparse.Namespace, out: Console, err: Console) -> int:
    from myriad.provision.wait import pxe_root_for, run

    return run(
        args.spec,
        pxe_root=pxe_root_for(args.stack, args.pxe_root),
        poll_s=args.poll,
        ssh_port=args.ssh_port,
        # Plain lines, flushed: progress is read through pipes and logs as it happens.
        print_line=lambda line: print(line, flush=True),
    )


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
    plan.add_argument("spec", type=Path, help="the cluster.yaml")
    plan.add_argument("--json", action="store_true", help="print the plan and findings as JSON")
    plan.add_argument("--out", type=Path, metavar="DIR", help="also write DIR/plan.json")
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
    render.set_defaults(handler=_cmd_render)

    up = commands.add_parser(
        "up", help="the local cluster: containers as nodes, bring-up, validation"
    )
    up.add_argument("spec", type=Path, help="a cluster.yaml whose provider is local")
    up.add_argument("--retry-failed", action="store_true", help="re-run only the failed nodes")
    up.add_argument("--no-validate", action="store_true", help="stop after the bring-up")
    _add_tuning_options(up)
    up.set_defaults(handler=_cmd_up)

    bringup = commands.add_parser("bringup", help="run the site playbook on any environment")
    bringup.add_argument("spec", type=Path, help="the cluster.yaml")
    source = bringup.add_mutually_exclusive_group()
    source.add_argument("--stack", metavar="ENV", help="node addresses from this Pulumi stack")
    source.add_argument("--stack-outputs", type=Path, metavar="FILE", help="...or from a file")
    bringup.add_argument("--limit", metavar="HOSTS", help="comma-separated hosts or groups")
    bringup.add_argument("--tags", metavar="TAGS", help="comma-separated role tags")
    bringup.add_argument("--retry-failed", action="store_true", help="only the last failures")
    _add_tuning_options(bringup)
    bringup.set_defaults(handler=_cmd_bringup)

    down = commands.add_parser("down", help="remove the local cluster's containers and network")
    down.add_argument("spec", type=Path, help="a cluster.yaml whose provider is local")
    down.add_argument("--yes", action="store_true", help="do not ask for the cluster name")
    down.set_defaults(handler=_cmd_down)

    status = commands.add_parser("status", help="nodes, their state and the last run's result")
    status.add_argument("spec", type=Path, help="the cluster.yaml")
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
    validate.set_defaults(handler=_cmd_validate)

    health = commands.add_parser(
        "health", help="node health: drained nodes, by whom, failing checks, stale runs"
    )
    health.add_argument("spec", type=Path, help="the cluster.yaml")
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
    wait.set_defaults(handler=_cmd_provision_wait)

    schema = commands.add_parser("schema", help="print the JSON Schema of cluster.yaml")
    schema.set_defaults(handler=_cmd_schema)
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


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    out = Console()
    err = Console(stderr=True)
    handler: Handler = args.handler
    try:
        return handler(args, out, err)
    except SpecError as exc:
        # Plain text: one problem per line, never re-wrapped, so editors can jump to it.
        sys.stderr.write(exc.render() + "\n")
        return EXIT_INVALID
    except MyriadError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return exc.exit_code
    except KeyboardInterrupt:
        err.print("interrupted")
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
