"""``conformance report``: the compliance report from any number of runs (PySpark)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from conformance.cli.exit_codes import EXIT_OK


def add_parser(sub: Any) -> None:
    rp = sub.add_parser("report", help="build the compliance report (HTML, Markdown, JSON, Parquet, CSV) from any number of runs (PySpark)")
    rp.add_argument("runs", nargs="+", help="run folders, globs (runs/*) or results files; any path Spark reads; "
                    "a folder holding soak.json is a soak run (conformance soak --out): its history is judged, into the soak section")
    rp.add_argument("--out", type=Path, required=True, help="output folder")
    rp.add_argument("--baseline", action="append", help="run folder(s) of the baseline to compare with (repeatable)")
    rp.add_argument("--spark-master", help="Spark master URL or Spark Connect sc://host:port (default local[*])")
    rp.add_argument("--verbose", "-v", action="store_true", help="let the JVM and Spark print to the console (default: into a log file)")
    rp.set_defaults(func=command)


def command(args: argparse.Namespace) -> int:
    """The report, and on the console what must not be missed: runs that did not finish, flaky cells."""
    from conformance.runner.progress import Console as ProgressConsole
    from conformance.runner.progress import StepProgress
    from reports.analysis import undrawn_columns
    from reports.render import flaky_cells, restart_lines, unfinished_lines
    from reports.report import build

    verbose = bool(getattr(args, "verbose", False))
    with StepProgress("report", ProgressConsole.for_stdout(verbose=verbose)) as progress:
        result = build(args.runs, args.out, baseline=args.baseline, master=args.spark_master, verbose=verbose, progress=progress)
    s = result["summary"]
    # as the matrix shows them: targets (product, version, protocol) over their queue types; a
    # requirement without a queue type is no configuration of its own
    targets = {(c["product"], c["version"], c["protocol"]) for c in result["cells"]}
    undrawn = undrawn_columns(result["cells"])  # a broker's column it cannot have is not drawn, nor counted
    configs = {c["column"] for c in result["cells"] if c.get("queue_type") not in (None, "-") and c["column"] not in undrawn}
    if s["sources"] or not result.get("soak"):  # a report of soak runs alone has no case records to count
        print(f"report: {s['records']} case records, {len(targets)} target(s) over {len(configs)} queue-type configuration(s), "
              f"{len({c['requirement'] for c in result['cells']})} requirements, "
              f"{s['quarantined']} quarantined line(s), {s['mutated']} self-test record(s) left out")
    soak = result.get("soak")
    if soak:
        t = soak["totals"]
        print(f"report: {t['runs']} soak run(s), {t['ops']} operations judged: {t['failed']} failing, {t['broken']} not judged, "
              f"{t['anomalies']} anomalies")
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
