"""``conformance``: run the catalogue against a target, list the catalogue.

Exit codes: 0 every MUST held; 1 a MUST failed; 2 usage or infrastructure error (bad input,
unreachable target, a case that could not reach a verdict).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any, Sequence

from conformance import __version__, default_target
from conformance.catalogue.requirements import LEVELS, check_selection, select
from conformance.errors import UsageError
from conformance.runner.results import read_results, read_run
from conformance.cli.run_args import TARGET_ENV, activate_packs, default_workers, pytest_args, target_argv  # noqa: F401 - the CLI's names

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        _target_from_env(args)
        default_target.resolve(args)
        return int(args.func(args))
    except UsageError as exc:
        print(f"conformance: error: {exc}", file=sys.stderr)
        return EXIT_USAGE


def _target_from_env(args: argparse.Namespace) -> None:
    """``--target env:NAME`` reads the URL from the environment variable NAME: a password in the
    URL then never appears in the process list (``ps``) or a shell history."""
    target = getattr(args, "target", None)
    if isinstance(target, str) and target.startswith("env:"):
        name = target[4:]
        value = os.environ.get(name)
        if not name or not value:
            raise UsageError(f"--target {target}: environment variable {name or '(none)'} is not set")
        from conformance.secrets import register_url

        register_url(value)
        args.target = value


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="conformance", description="Broker conformance suite and protocol checker")
    p.add_argument("--version", action="version", version=f"conformance {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run the catalogue against a target and write results")
    target_options(run, out="results folder (default: runs/<timestamp>)")
    run.add_argument("--requirement", "-r", action="append", help="only this requirement id (repeatable)")
    run.add_argument("--exclude-area", action="append", help="leave out this area (repeatable)")
    run.add_argument("--level", action="append", type=str.upper, choices=list(LEVELS), help="only requirements of this level (repeatable)")
    run.add_argument("--queue-type", action="append", help="only cases of this queue type, as the profile names them (repeatable)")
    run.add_argument("--repeat", type=int, default=1, help="run every selected case N times: each repetition its own record, a pass rate per case")
    run.add_argument("--workers", "-n", type=int, default=None,
                     help="parallel worker processes (default: cores + 1, at most 4, for the whole catalogue on 2+ cores, measured fastest by bench/catalogue.py; else 1)")
    run.add_argument("--case-timeout", type=float, default=60.0, help="deadline per case in seconds (default 60)")
    run.add_argument("--keep-history", action="store_true", help="keep the operation history of passing cases too")
    run.add_argument("--verbose", "-v", action="store_true", help="one plain line per decided case instead of the live progress bar")
    run.add_argument("--debug", action="store_true", help="pytest's own console too: its reports and the runner's tracebacks (kept in results.jsonl either way)")
    run.add_argument("--mutation", help="make the target faulty on purpose: run through a proxy applying this protocol mutation (see conformance selftest --list)")
    run.set_defaults(func=cmd_run)

    st = sub.add_parser("selftest", help="prove the catalogue can fail: run it clean and through each protocol mutation, write the kill matrix")
    target_options(st, out="output folder (default: runs/selftest-<timestamp>)")
    st.add_argument("--mutation", "-m", action="append", help="only this mutation (repeatable; default: every mutation of the protocol)")
    st.add_argument("--workers", "-n", type=int, default=2, help="worker processes of the clean runs (default 2; mutation runs use one each and go --parallel at once)")
    st.add_argument("--parallel", "-p", type=int, default=2, help="mutation runs at once (default 2)")
    st.add_argument("--case-timeout", type=float, default=30.0, help="deadline per case in seconds (default 30)")
    st.add_argument("--scope", choices=("declared", "reach"), default="declared",
                    help="declared (default): each mutation runs the cases it is declared to break, then the cases still unproven "
                         "that it reaches; reach: every case it reaches (a full collateral audit, several times longer)")
    st.add_argument("--skip-restarts", action="store_true", help="leave out the cases that restart or kill the broker (one restart and one kill per run, shared by its cases)")
    st.add_argument("--list", action="store_true", help="list the mutations and what each is declared to break, then exit")
    st.set_defaults(func=cmd_selftest)

    rp = sub.add_parser("report", help="build the compliance report (HTML, Markdown, JSON, Parquet, CSV) from any number of runs (PySpark)")
    rp.add_argument("runs", nargs="+", help="run folders, globs (runs/*) or results files; any path Spark reads")
    rp.add_argument("--out", type=Path, required=True, help="output folder")
    rp.add_argument("--baseline", action="append", help="run folder(s) of the baseline to compare with (repeatable)")
    rp.add_argument("--spark-master", help="Spark master URL or Spark Connect sc://host:port (default local[*])")
    rp.add_argument("--verbose", "-v", action="store_true", help="let the JVM and Spark print to the console (default: into a log file)")
    rp.set_defaults(func=cmd_report)

    gt = sub.add_parser("gate", help="CI gate: classify every cell of baseline and current; exit 0 passed, 1 failed, 2 inconclusive or bad input")
    gt.add_argument("--baseline", action="append", required=True, help="baseline run folder(s) (repeatable)")
    gt.add_argument("--current", action="append", required=True, help="current run folder(s) (repeatable)")
    gt.add_argument("--known", type=Path, help="known-deviation manifest (YAML: requirement, target, reason, link, expires)")
    gt.add_argument("--include-should", action="store_true", help="gate SHOULD cells too (default: MUST only)")
    gt.add_argument("--fail-on-new-flaky", action="store_true", help="a cell flaky now (and not failing on the baseline) blocks at any level, not only the gated ones")
    gt.add_argument("--out", type=Path, help="write gate.md (pull-request comment) and gate.json (the complete table) into this folder")
    gt.add_argument("--all", action="store_true", help="show every cell in the console and gate.md, unchanged ones too")
    gt.add_argument("--spark-master", help="Spark master URL or Spark Connect sc://host:port (default local[*])")
    gt.set_defaults(func=cmd_gate)

    ls = sub.add_parser("list", help="print the requirement catalogue")
    ls.add_argument("--area", help="only this area")
    ls.add_argument("--rules", action="store_true", help="the spec rules' coverage map: covering requirements, or why none (issue 17)")
    ls.add_argument("--level", choices=[lv.lower() for lv in LEVELS] + list(LEVELS), help="only this level")
    ls.add_argument("--json", action="store_true", help="machine-readable output")
    ls.add_argument("--pack", action="append", help="also list this requirement pack's requirements (repeatable)")
    ls.add_argument("--adapter", help="list the requirement packs this adapter's package ships too")
    ls.add_argument("--profile-keys", action="store_true", help="print the profile keys the cases read, their values and meaning")  # profile-keys
    ls.set_defaults(func=cmd_list)
    # --- issue 19: the adapter kit's contract check ------------------------------------------------
    ac = sub.add_parser("adapter-check", help="exercise every neutral-API operation of an adapter against a real broker; report contract breaks")
    ac.add_argument("--adapter", required=True, help="adapter plugin name")
    ac.add_argument("--target", required=True, help="broker URL or launcher name")
    ac.set_defaults(func=cmd_adapter_check)
    na = sub.add_parser("new-adapter", help="write a package skeleton for an adapter of your own (pyproject, adapter stub, profile stub, test)")
    na.add_argument("name", help="adapter and protocol name, e.g. inhouse")
    na.add_argument("--dir", type=Path, default=Path("packages"), help="where to write it (default: packages/)")
    na.set_defaults(func=lambda a: _new_adapter(a))
    # --- end issue 19 ------------------------------------------------------------------------------
    # --- issue 22: explain one case or requirement of a results folder ---------------------------------
    ex = sub.add_parser("explain", help="print everything a results folder holds about one case or requirement, and the command that reruns it")
    ex.add_argument("run", type=Path, help="results folder of conformance run (results.jsonl, run.json)")
    ex.add_argument("case", help="case id (or its tail, e.g. TestNackDiscard::test[classic-single]), requirement id, or REQ-ID[classic]")
    ex.set_defaults(func=cmd_explain)
    # --- end issue 22 -------------------------------------------------------------------------------
    return p


def cmd_explain(args: argparse.Namespace) -> int:
    """Issue 22: rich panels on a terminal, plain text in a pipe or a CI log."""
    from conformance.catalogue.explain import explain

    return explain(args.run, args.case, rich=sys.stdout.isatty())


def _new_adapter(args: argparse.Namespace) -> int:
    from conformance.cli.new_adapter import write_skeleton

    root = write_skeleton(args.name, args.dir)
    print(f"wrote {root}: pip install -e {root}, implement adapter.py, then conformance adapter-check --adapter {args.name} --target URL")
    return EXIT_OK


def cmd_adapter_check(args: argparse.Namespace) -> int:
    """Issue 19: conformance.cli.adapter_check against a target (launched and stopped here if named)."""
    from urllib.parse import urlsplit

    from conformance.cli.adapter_check import check
    from conformance.api import adapter_for
    from conformance.targets import make_target

    from conformance.errors import TargetError

    target = make_target(args.target)
    try:
        target.start()
    except TargetError as exc:  # an unreachable broker is one line (exit 2), not a traceback
        raise UsageError(str(exc)) from None
    try:
        adapter = adapter_for(urlsplit(str(target.url)).scheme, args.adapter)()
        results = check(adapter, target.url)
    finally:
        target.stop()
    for r in results:
        print(r.line())
    broken = [r for r in results if r.outcome == "broken"]
    print(f"adapter-check {args.adapter}: {len(results) - len(broken)} of {len(results)} operations keep the contract"
          + (f", {len(broken)} broken" if broken else ""))
    return EXIT_FAIL if broken else EXIT_OK


def target_options(p: argparse.ArgumentParser, *, out: str) -> None:
    """What every command that runs the catalogue against a target takes."""
    p.add_argument("--target", help="broker URL (amqp://user:pass@host/vhost), env:NAME (the URL from environment variable NAME, kept out of ps) or launcher name (default: the --adapter's own default target; without --adapter: rabbitmq-local, a private node)")
    p.add_argument("--adapter", help="adapter plugin (default: the one speaking the URL's scheme; its protocol also picks the mutations)")
    p.add_argument("--profile", help="profile id or YAML file (default: chosen from the server's product and version)")
    p.add_argument("--out", type=Path, help=out)
    p.add_argument("--area", action="append", help="only this area (repeatable)")
    p.add_argument("--pack", action="append", help="also load this requirement pack; no:NAME leaves out one the adapter's package ships (repeatable; see README 'Requirement packs')")


def cmd_list(args: argparse.Namespace) -> int:
    from conformance.cases import all_cases

    if args.profile_keys:  # profile-keys: the documented schema (conformance/catalogue/data/profile_keys.yaml)
        from conformance.catalogue.profile_keys import render_keys

        print(render_keys())
        return EXIT_OK
    activate_packs(args)  # issue 19 §2
    # --- issue 17: --rules, the coverage map of the spec rules ---------------------------------------
    if getattr(args, "rules", False):
        return _list_rules(args)
    # --- end issue 17 ------------------------------------------------------------------------------
    check_selection(areas=[args.area] if args.area else [])
    reqs = select(area=args.area, level=args.level)
    cases: dict[str, list[str]] = {}
    for c in all_cases():
        cases.setdefault(c.requirement, []).append(c.__name__)
    if args.json:
        out = [
            {"id": r.id, "level": r.level, "area": r.area, "text": r.text, "cases": cases.get(r.id, []),
             "sources": [s.__dict__ for s in r.sources]}
            for r in reqs
        ]
        print(json.dumps(out, indent=2))
        return EXIT_OK
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{len(reqs)} requirements", show_lines=False, expand=True)
    for col in ("id", "level", "area", "requirement", "cases"):
        table.add_column(col, overflow="fold")
    for r in reqs:
        table.add_row(r.id, r.level, r.area, r.text, str(len(cases.get(r.id, []))))
    Console().print(table)
    return EXIT_OK


def _list_rules(args: argparse.Namespace) -> int:
    """Issue 17: every spec rule, covered by which requirements or why not; closing figures."""
    from conformance.catalogue.coverage import as_data, closing_line, coverage, figures

    rows = [c for c in coverage() if not args.area or c.rule.area == args.area]
    figs = figures(rows)
    if args.json:
        print(json.dumps(as_data(rows), indent=2))
        return EXIT_OK
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{len(rows)} spec rules", expand=True)
    for col in ("protocol", "rule", "keyword", "area", "covered by", "quote"):
        table.add_column(col, overflow="fold")
    for c in rows:
        table.add_row(c.rule.protocol, c.rule.id, c.rule.keyword, c.rule.area, ", ".join(c.requirements) or f"- ({c.reason})", c.rule.quote)
    console = Console()
    console.print(table)
    console.print(closing_line(figs))
    return EXIT_OK


def cmd_report(args: argparse.Namespace) -> int:
    """The report, and on the console what must not be missed: runs that did not finish, flaky cells."""
    from reports.render import flaky_cells, restart_lines, unfinished_lines
    from reports.report import build

    from conformance.runner.progress import Console as ProgressConsole, StepProgress

    verbose = bool(getattr(args, "verbose", False))
    with StepProgress("report", ProgressConsole.for_stdout(verbose=verbose)) as progress:
        result = build(args.runs, args.out, baseline=args.baseline, master=args.spark_master, verbose=verbose, progress=progress)
    s = result["summary"]
    # as the matrix shows them: targets (product, version, protocol) over their queue types; a
    # requirement without a queue type is no configuration of its own (issue 22)
    targets = {(c["product"], c["version"], c["protocol"]) for c in result["cells"]}
    configs = {c["column"] for c in result["cells"] if c.get("queue_type") not in (None, "-")}
    print(f"report: {s['records']} case records, {len(targets)} target(s) over {len(configs)} queue-type configuration(s), "
          f"{len({c['requirement'] for c in result['cells']})} requirements, "
          f"{s['quarantined']} quarantined line(s), {s['mutated']} self-test record(s) left out")
    for name in ("report.html", "summary.md", "matrix.json", "matrix.parquet", "matrix.csv"):
        print(f"  {args.out / name}")
    print(f"  {args.out / 'cases'}/ (one page per matrix cell, linked from the matrix)")
    for line in unfinished_lines(result):
        print(f"UNFINISHED RUN: {line}")
    for line in restart_lines(result):
        print(f"TARGET STOPPED ANSWERING: {line}")
    flaky = flaky_cells(result["cells"])
    if flaky:
        print(f"{len(flaky)} flaky cell(s): " + ", ".join(f"{c['requirement']} on {c['column']} {c['label']}" for c in flaky[:5])
              + (" ..." if len(flaky) > 5 else ""))
    newly = [d for d in result.get("diff") or [] if d["change"] == "newly failing"]
    if newly:
        print(f"{len(newly)} requirement(s) newly failing against the baseline")
    return EXIT_OK


def cmd_gate(args: argparse.Namespace) -> int:
    """Exit 0 passed, 1 failed (a blocking cell or an expired manifest entry), 2 inconclusive
    (unfinished or incomparable runs, undecided gated cells) or bad input."""
    from reports import gate_output
    from reports.gate import run_gate

    g = run_gate(args.baseline, args.current, manifest=args.known, include_should=args.include_should,
                 fail_on_new_flaky=args.fail_on_new_flaky, master=args.spark_master)
    gate_output.print_console(g, everything=args.all)
    if args.out:
        md, js = gate_output.write(g, args.out)
        print(f"gate: {md}  {js}")
    return int(g["exit_code"])


def cmd_selftest(args: argparse.Namespace) -> int:
    from rich.console import Console

    from conformance.api import adapter_for
    from conformance.errors import ConformanceError
    from conformance.nemesis.mutations import available, expectations
    from conformance.cli.selftest import Options, selftest
    from conformance.targets import make_target, redact

    console = Console(highlight=False)
    if args.list:
        declared = expectations()
        for m in available():
            exp = declared.get(m.name)
            console.print(f"[bold]{m.name}[/bold] ({m.protocol}): {m.description}", markup=True)
            console.print(f"    breaks: {', '.join(exp.breaks) if exp else '(not declared)'}", markup=False)
        return EXIT_OK
    activate_packs(args)  # issue 19 §2: a pack's area is a valid --area
    check_selection([], args.area or [])
    if args.workers < 1 or args.parallel < 1:
        raise UsageError("--workers and --parallel must be at least 1")
    out = args.out or Path("runs") / time.strftime("selftest-%Y%m%dT%H%M%SZ", time.gmtime())
    try:
        target = make_target(args.target)
        target.start()
    except ConformanceError as exc:
        raise UsageError(str(exc).replace(args.target, redact(args.target))) from None
    try:
        from urllib.parse import urlsplit

        adapter_cls = adapter_for(urlsplit(target.url).scheme, args.adapter)
        protocol = adapter_cls().protocol
        from conformance.catalogue import packs

        activate_packs(args, packs.adapter_entry_name(adapter_cls))  # issue 19 §2: before expectations are read
        opts = Options(packs=args.pack or [], target_url=target.url, handle=target.handle(), protocol=protocol, out=out, adapter=args.adapter,
                       profile=args.profile, areas=args.area or [], mutations=args.mutation or [], workers=args.workers,
                       parallel=args.parallel, case_timeout=args.case_timeout, skip_restarts=args.skip_restarts, scope=args.scope,
                       # issue 20: a launched target the suite restarts gets a twin for the restart runs
                       second_target=(lambda: make_target(args.target)) if target.can_restart and target.handle() else None)
        from conformance.runner.progress import Console as ProgressConsole, StepProgress

        with StepProgress("selftest: mutation runs", ProgressConsole.for_stdout(verbose=False)) as progress:
            matrix = selftest(opts, say=progress.say, progress=progress)
    finally:
        target.stop()
    c = matrix["counts"]
    console.print(f"kill matrix: {c['cases']} cases ({c['provable']} provable), {c['mutations']} mutations, {c['kills']} kills, "
                  f"{c['blind_spots']} blind spots, {c['unexercised']} unexercised, {c['unproven']} unproven ({c['unproven_must']} MUST), "
                  f"{c['false_alarms']} false alarms, {matrix['wall_s']:.0f}s", markup=False)
    for problem in matrix["problems"]:
        console.print(f"PROBLEM: {problem}", markup=False)
    levels = {c["case"]: (c["level"], c["clean"]) for c in matrix["cases"]}
    for case in matrix["unproven"]:
        level, clean = levels[case]
        console.print(f"  unproven: {case} [{level}]" + (" (documented deviation on the clean run)" if clean == "deviation" else ""), markup=False)
    console.print(f"kill matrix: {out}/killmatrix.json  {out}/killmatrix.md", markup=False)
    return EXIT_OK if matrix["ok"] else EXIT_FAIL


def cmd_run(args: argparse.Namespace) -> int:
    import pytest

    from conformance.runner.progress import Console, RunProgress

    out = args.out or Path("runs") / time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    argv = pytest_args(args, out)
    debug = bool(getattr(args, "debug", False))
    from conformance.runner import run_folder

    moved = run_folder.prepare(out)  # after the options are checked: a typo moves nothing
    if moved:
        print(moved)
    console = Console.for_stdout(verbose=bool(args.verbose) or debug)  # --debug: pytest prints too; a bar would be torn
    code = pytest.main(argv, plugins=[RunProgress(console, out, debug=debug, log=None if debug else out / PYTEST_LOG)])
    if code in (pytest.ExitCode.USAGE_ERROR, pytest.ExitCode.INTERNAL_ERROR, pytest.ExitCode.INTERRUPTED):
        return EXIT_USAGE
    run = read_run(out)
    records = [r for r in read_results(out) if r.get("run_id") == run.get("run_id")]
    return summarize(run, records, out)


#: Where ``conformance run`` puts pytest's own console output (issue 22): in the results folder. Its
#: reporter stays registered (pytest-timeout and xdist write through it); RunProgress points it here.
PYTEST_LOG = "pytest.log"


def exit_code(records: list[dict[str, Any]]) -> int:
    if any(r["level"] == "MUST" and r["verdict"] == "fail" for r in records):
        return EXIT_FAIL
    if not records or any(r["verdict"] in ("error", "blocked") for r in records):  # blocked: issue 16
        return EXIT_USAGE
    return EXIT_OK


def pass_rates(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per case run more than once (``--repeat``): its verdicts, pass rate and whether it is flaky.

    A case that both passed and failed (or errored) is flaky with its rate: never its best or worst."""
    by_case: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        by_case.setdefault(r.get("case_id", ""), []).append(r)
    rows = []
    for cid, recs in by_case.items():
        if len(recs) < 2:
            continue
        verdicts = Counter(r["verdict"] for r in recs)
        decided = sum(n for v, n in verdicts.items() if v in ("pass", "fail", "error", "deviation"))
        rate = verdicts.get("pass", 0) / decided if decided else 0.0
        rows.append({"case_id": cid, "requirement": recs[0]["requirement"], "level": recs[0]["level"], "attempts": len(recs),
                     "verdicts": dict(verdicts), "pass_rate": rate, "flaky": verdicts.get("pass", 0) > 0 and len(verdicts) > 1})
    return rows


def _print_pass_rates(console: Any, records: list[dict[str, Any]]) -> None:
    rows = pass_rates(records)
    if not rows:
        return
    flaky = [r for r in rows if r["flaky"]]
    console.print(f"repeated: {len(rows)} case(s), {len(flaky)} flaky", markup=False, highlight=False)
    for r in rows:
        if r["flaky"] or r["pass_rate"] < 1.0:
            seen = ", ".join(f"{v} {n}" for v, n in sorted(r["verdicts"].items()))
            label = "FLAKY" if r["flaky"] else "STEADY"
            console.print(f"  {label} {r['case_id']} [{r['level']}]: pass rate {100 * r['pass_rate']:.0f}% over {r['attempts']} attempts ({seen})",
                          markup=False, highlight=False)


def summarize(run: dict[str, Any], records: list[dict[str, Any]], out: Path) -> int:
    from rich.console import Console
    from rich.table import Table

    console = Console(stderr=False)
    verdicts = ("pass", "fail", "deviation", "unsupported", "undocumented", "error", "blocked")
    from conformance.nemesis.mutations import alters

    mutated = (run.get("mutation") or {}).get("spec") if isinstance(run.get("mutation"), dict) else None
    title = f"{run.get('product', '?')} {run.get('version', '?')} via {run.get('adapter', '?')}, profile {run.get('profile', '?')}"
    if alters(mutated):
        title += f"; MUTATED by {mutated}: a deliberately faulty broker, not a result about it"
    table = Table(title=title)
    table.add_column("area")
    table.add_column("level")
    for v in verdicts:
        table.add_column(v, justify="right")
    by: Counter[tuple[str, str, str]] = Counter((r["area"], r["level"], r["verdict"]) for r in records)
    for area, level in sorted({(a, lv) for a, lv, _ in by}):
        table.add_row(area, level, *[str(by.get((area, level, v), 0) or "") for v in verdicts])
    console.print(table)
    from conformance.runner.judged import headline

    console.print(f"score: {headline(Counter(r['verdict'] for r in records))}", markup=False, highlight=False, soft_wrap=True)
    _print_pass_rates(console, records)
    from conformance.unsupported import tally

    if tally(records):  # which of its three meanings each unsupported case has
        console.print(tally(records), markup=False, highlight=False)
    problems = [r for r in records if r["verdict"] in ("fail", "error", "blocked", "deviation")]
    if problems:  # their Expected / Actual blocks were printed as each was decided (conformance.runner.progress)
        console.print(f"{len(problems)} case(s) to read (deviations: documented vendor behaviour); "
                      f"everything about one: conformance explain {out} CASE", markup=False, highlight=False)
    for r in problems:
        console.print(f"  {r['verdict'].upper():<10} {r['requirement']} [{r['level']}] {r.get('queue_type') or ''} {r.get('variant') or ''}  "
                      f"{r.get('case_id', '')}", markup=False, highlight=False, soft_wrap=True)
    for r in run.get("restarts") or []:  # conformance.runner.hangs: a case hung the broker, the run restarted it
        console.print(f"restarted the target after {r['after_case']} hung it: {r['cause']}", markup=False, highlight=False, soft_wrap=True)
    if run.get("target_dead"):
        console.print(f"[red]target went down during the run: {run['target_dead']}[/red]")
    log = f"  pytest: {out}/{PYTEST_LOG}" if (out / PYTEST_LOG).is_file() else ""
    console.print(f"results: {out}/results.jsonl  junit: {out}/junit.xml  allure: {out}/allure-results{log}", markup=False)
    return exit_code(records)
