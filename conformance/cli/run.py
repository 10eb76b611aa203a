"""``conformance run``: the catalogue against a target, its results folder and its summary.

Its options come from the one option table (conformance.runner.options); the pytest command line it
hands pytest is conformance.runner.pytest_argv's, which the self-test's child runs start too.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from pathlib import Path
from typing import Any

from conformance.cli.exit_codes import EXIT_FAIL, EXIT_OK, EXIT_USAGE
from conformance.runner.options import CLI_OPTIONS, declare
from conformance.runner.pytest_argv import pytest_args

#: Where ``conformance run`` puts pytest's own console output: in the results folder. Its reporter
#: stays registered (pytest-timeout and xdist write through it); RunProgress points it here.
PYTEST_LOG = "pytest.log"


def add_parser(sub: Any) -> None:
    run = sub.add_parser("run", help="run the catalogue against a target and write results")
    declare(run.add_argument, CLI_OPTIONS)
    run.set_defaults(func=command)


def command(args: argparse.Namespace) -> int:
    import pytest

    from conformance.pytest_plugin.progress import ProgressPlugin
    from conformance.runner import run_folder
    from conformance.runner.progress import Console
    from conformance.runner.results import read_results, read_run

    out = args.out or Path("runs") / time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    argv = pytest_args(args, out)
    debug = bool(getattr(args, "debug", False))
    moved = run_folder.prepare(out)  # after the options are checked: a typo moves nothing
    if moved:
        print(moved)
    console = Console.for_stdout(verbose=bool(args.verbose) or debug)  # --debug: pytest prints too; a bar would be torn
    code = pytest.main(argv, plugins=[ProgressPlugin(console, out, debug=debug, log=None if debug else out / PYTEST_LOG)])
    if code in (pytest.ExitCode.USAGE_ERROR, pytest.ExitCode.INTERNAL_ERROR, pytest.ExitCode.INTERRUPTED):
        return EXIT_USAGE
    run = read_run(out)
    records = [r for r in read_results(out) if r.get("run_id") == run.get("run_id")]
    return summarize(run, records, out)


def exit_code(records: list[dict[str, Any]]) -> int:
    if any(r["level"] == "MUST" and r["verdict"] == "fail" for r in records):
        return EXIT_FAIL
    if not records or any(r["verdict"] in ("error", "blocked") for r in records):
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
    from conformance.runner.posed import summary

    if summary(run.get("not_posed") or {}):
        console.print(summary(run.get("not_posed") or {}), markup=False, highlight=False, soft_wrap=True)
    problems = [r for r in records if r["verdict"] in ("fail", "error", "blocked", "deviation")]
    if problems:  # their Expected / Actual blocks were printed as each was decided (conformance.runner.progress)
        known = sum(1 for r in problems if r.get("known_bug"))
        console.print(f"{len(problems)} case(s) to read (deviations: documented vendor behaviour"
                      + (f"; {known} fail(s) of known broker bugs, open upstream" if known else "")
                      + f"); everything about one: conformance explain {out} CASE", markup=False, highlight=False)
    for r in problems:
        console.print(f"  {r['verdict'].upper():<10} {r['requirement']} [{r['level']}] {r.get('queue_type') or ''} {r.get('variant') or ''}  "
                      f"{r.get('case_id', '')}" + ("  (known bug, open upstream)" if r.get("known_bug") else ""),
                      markup=False, highlight=False, soft_wrap=True)
    for r in run.get("restarts") or []:  # conformance.runner.hangs: a case hung the broker, the run restarted it
        console.print(f"restarted the target after {r['after_case']} hung it: {r['cause']}", markup=False, highlight=False, soft_wrap=True)
    if run.get("target_dead"):
        console.print(f"[red]target went down during the run: {run['target_dead']}[/red]")
    log = f"  pytest: {out}/{PYTEST_LOG}" if (out / PYTEST_LOG).is_file() else ""
    console.print(f"results: {out}/results.jsonl  junit: {out}/junit.xml  allure: {out}/allure-results{log}", markup=False)
    return exit_code(records)
