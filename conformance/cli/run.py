"""``conformance run``: the catalogue against a target, its results folder and its summary.

Its options come from the one option table (conformance.runner.options). The pytest command line it
builds (:func:`pytest_args`) is also what the self-test's child runs start (conformance.cli.selftest).
"""

from __future__ import annotations

import argparse
import os
import time
from collections import Counter
from pathlib import Path
from typing import Any

from conformance.cli.exit_codes import EXIT_FAIL, EXIT_OK, EXIT_USAGE
from conformance.runner.options import CLI_OPTIONS, FILTERS, PYTEST_OPTIONS, TABLE, check, declare
from conformance.runner.options import argv as options_argv

#: Where ``conformance run`` puts pytest's own console output: in the results folder. Its reporter
#: stays registered (pytest-timeout and xdist write through it); RunProgress points it here.
PYTEST_LOG = "pytest.log"

#: The environment variable through which a target URL with a password reaches pytest (and the
#: self-test's child processes): never their argv, which every user of the machine can read.
TARGET_ENV = "CONFORMANCE_TARGET_URL"

#: The most worker processes a whole-catalogue run gets by default, whatever the core count: each
#: worker pays a pytest start-up (~1 s) and the cases that restart the broker hold it exclusively,
#: so past a few workers the catalogue's ~190 cases gain nothing (4 workers were slower than 3 on
#: 2 cores). A larger machine that wants more says ``--workers``.
MAX_DEFAULT_WORKERS = 4


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


def default_workers(args: argparse.Namespace) -> int:
    """--workers, or when it is left out: one more worker than cores (at most MAX_DEFAULT_WORKERS)
    for a whole-catalogue run on a machine with 2 or more cores, else 1.

    Why one more than the cores: a case's client mostly waits for the broker's answers (a cProfile
    of the ordinary cases in one worker: 36% of the time in epoll), so a third process on 2 cores
    fills those waits. Measured with bench/catalogue.py on 2 cores (RabbitMQ 3.10.8, 190 cases,
    2026-11-25, load 2.0-2.8, same verdicts every run): the whole catalogue in 22.4 / 24.2 s with 2
    workers, 21.5 / 22.0 s with 3, 24.1 / 24.5 s with 4; the 171 ordinary cases alone at 28.8 /
    29.0 cases/s with 2, 32.0 / 36.3 with 3, 33.2 / 34.1 with 4 (one worker: 28.6-31.5 s and
    16-17 cases/s). A run of one area or a few requirements is over before a second worker would
    have started, so it stays in one process. Results are the same either way
    (tests/runner/test_parallel_equals_serial.py); cases that restart the broker hold it exclusively."""
    if getattr(args, "workers", None) is not None:
        return int(args.workers)
    whole = not any(getattr(args, name, None) for name in FILTERS)
    cores = os.cpu_count() or 1
    return min(cores + 1, MAX_DEFAULT_WORKERS) if whole and cores >= 2 else 1


def pytest_args(args: argparse.Namespace, out: Path, env: dict[str, str] | None = None) -> list[str]:
    """The pytest argv of a run, its options checked first. A target URL with a password goes into
    ``env`` (the child's environment) when given, else into this process's environment (a run
    pytest makes in-process)."""
    from conformance.cases import CASES_DIR

    values = {o.name: getattr(args, o.name, None) for o in TABLE}
    check(values)
    workers = default_workers(args)
    argv = [
        "-p", "conformance.pytest_plugin",
        "-p", "no:cacheprovider",
        "-c", str(CASES_DIR / "pytest.ini"),
        "--rootdir", str(CASES_DIR),
        str(CASES_DIR),
        *target_argv(args.target, env),
        "--results-dir", str(out),
        "--junitxml", str(out / "junit.xml"),
        "--alluredir", str(out / "allure-results"),
        "-rfEX",
        "-v" if getattr(args, "verbose", False) else "-q",
        "--tb=short",  # no argument lists of the runner's frames: failures speak through their verdict
        # Start-up is most of a small run (each self-test run is one): no assertion rewriting of the
        # ~130 modules (verdicts never rest on assert introspection), and no plugins a run never uses.
        # (unraisableexception: its five gc passes at the end cost a second on a loaded machine)
        "--assert=plain", "-p", "no:hypothesispytest", "-p", "no:benchmark", "-p", "no:unraisableexception",
    ]
    argv += options_argv(values, [o for o in PYTEST_OPTIONS if o.name not in ("target", "results_dir")])
    if workers > 1:
        # the cases of a shared broker fault on one worker; xdist hands the largest group out first
        # unless told not to, and the disruptive group then holds every other worker at the broker lock
        argv += ["-n", str(workers), "--dist", "loadgroup", "--no-loadscope-reorder"]
    else:
        argv += ["-p", "no:xdist", "-p", "no:xdist.looponfail"]  # one process: xdist would only add its import
    return argv


def target_argv(target: str, env: dict[str, str] | None = None) -> list[str]:
    """``--target`` for pytest; a URL with a password travels in ``env`` (default: os.environ).

    The self-test starts its runs from threads, against two nodes at once (its restart lane): each
    child gets the URL in its own environment, since one process-wide variable would be raced."""
    from urllib.parse import urlsplit

    from conformance.secrets import register_url

    try:
        secret = "://" in target and urlsplit(target).password is not None
    except ValueError:
        secret = False
    if not secret:
        return ["--target", target]
    register_url(target)
    (os.environ if env is None else env)[TARGET_ENV] = target
    return ["--target", "env", "--target-env", TARGET_ENV]


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
