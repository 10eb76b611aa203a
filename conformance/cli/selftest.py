"""``conformance selftest``: prove the catalogue can fail, its options and its console summary.

The engine (plan the runs, run the catalogue clean and through each mutation, judge, write the kill
matrix) is conformance.runner.selftest; this module only parses and reports.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from conformance.errors import UsageError
from conformance.nemesis.mutations import available, expectations
from conformance.runner.selftest.runs import Options, selftest

if TYPE_CHECKING:
    from conformance.runner.options import Option


def _command_options() -> tuple[Option, ...]:
    """What the self-test shares with ``conformance run`` (conformance.runner.options), with its own
    defaults where they differ, then its own options."""
    from conformance.runner.options import OPTIONS, Option

    return (
        *(OPTIONS[name] for name in ("target", "adapter", "profile")),
        OPTIONS["out"].but(help="output folder (default: runs/selftest-<timestamp>)"),
        OPTIONS["area"],
        OPTIONS["pack"],
        OPTIONS["mutation"].but(flags=("--mutation", "-m"), repeatable=True, help="only this mutation (repeatable; default: every mutation of the protocol)"),
        OPTIONS["workers"].but(default=2, help="worker processes of the clean runs (default 2; mutation runs use one each and go --parallel at once)"),
        Option("parallel", ("--parallel", "-p"), "mutation runs at once (default 2)", type=int, default=2, at_least=1, pytest=False),
        OPTIONS["case_timeout"].but(default=30.0, help="deadline per case in seconds (default 30)"),
        Option("scope", ("--scope",), "declared (default): each mutation runs the cases it is declared to break, then the cases still "
               "unproven that it reaches; reach: every case it reaches (a full collateral audit, several times longer)",
               choices=("declared", "reach"), default="declared", pytest=False),
        Option("skip_restarts", ("--skip-restarts",), "leave out the cases that restart or kill the broker (one restart and one kill per run, "
               "shared by its cases)", switch=True, pytest=False),
        Option("list", ("--list",), "list the mutations and what each is declared to break, then exit", switch=True, pytest=False),
    )


def add_parser(sub: Any) -> None:
    from conformance.runner.options import declare

    st = sub.add_parser("selftest", help="prove the catalogue can fail: run it clean and through each protocol mutation, write the kill matrix")
    declare(st.add_argument, _command_options())
    st.set_defaults(func=command)


def command(args: argparse.Namespace) -> int:
    from urllib.parse import urlsplit

    from rich.console import Console

    from conformance.api import adapter_for
    from conformance.catalogue import packs
    from conformance.cli.exit_codes import EXIT_FAIL, EXIT_OK
    from conformance.errors import ConformanceError
    from conformance.runner.options import check
    from conformance.runner.progress import Console as ProgressConsole
    from conformance.runner.progress import StepProgress
    from conformance.targets import make_target, redact

    console = Console(highlight=False)
    if args.list:
        declared = expectations()
        for m in available():
            exp = declared.get(m.name)
            console.print(f"[bold]{m.name}[/bold] ({m.protocol}): {m.description}", markup=True)
            console.print(f"    breaks: {', '.join(exp.breaks) if exp else '(not declared)'}", markup=False)
        return EXIT_OK
    options = _command_options()
    check(vars(args), options=options)  # a pack's area is a valid --area
    out = args.out or Path("runs") / time.strftime("selftest-%Y%m%dT%H%M%SZ", time.gmtime())
    try:
        target = make_target(args.target)
        target.start()
    except ConformanceError as exc:
        raise UsageError(str(exc).replace(args.target, redact(args.target))) from None
    try:
        adapter_cls = adapter_for(urlsplit(target.url).scheme, args.adapter, target.protocol)
        protocol = adapter_cls().protocol
        check(vars(args), packs.adapter_entry_name(adapter_cls), options)  # its package's packs, before expectations are read
        opts = Options(packs=args.pack or [], target_url=target.url, handle=target.handle(), protocol=protocol, out=out, adapter=args.adapter,
                       profile=args.profile, areas=args.area or [], mutations=args.mutation or [], workers=args.workers,
                       parallel=args.parallel, case_timeout=args.case_timeout, skip_restarts=args.skip_restarts, scope=args.scope,
                       # a launched target the suite restarts gets a twin for the restart runs
                       second_target=(lambda: make_target(args.target)) if target.can_restart and target.handle() else None)
        with StepProgress("selftest: mutation runs", ProgressConsole.for_stdout(verbose=False)) as progress:
            matrix = selftest(opts, say=progress.say, progress=progress)
    finally:
        target.stop()
    c = matrix["counts"]
    console.print(f"kill matrix: {c['cases']} cases ({c['provable']} provable), {c['mutations']} mutations, {c['kills']} kills, "
                  f"{c['blind_spots']} blind spots, {c['unexercised']} unexercised, {c['unproven']} unproven ({c['unproven_must']} MUST), "
                  f"{c['false_alarms']} false alarms, {c.get('known_failures', 0)} known failures, {matrix['wall_s']:.0f}s", markup=False)
    for problem in matrix["problems"]:
        console.print(f"PROBLEM: {problem}", markup=False)
    for known in matrix.get("known_failures") or []:
        console.print(f"  known failure (broker bug open upstream, not a false alarm): {known['case']}: {known['known_bug']}", markup=False)
    levels = {c["case"]: (c["level"], c["clean"]) for c in matrix["cases"]}
    for case in matrix["unproven"]:
        level, clean = levels[case]
        console.print(f"  unproven: {case} [{level}]" + (" (documented deviation on the clean run)" if clean == "deviation" else ""), markup=False)
    console.print(f"kill matrix: {out}/killmatrix.json  {out}/killmatrix.md", markup=False)
    return EXIT_OK if matrix["ok"] else EXIT_FAIL
