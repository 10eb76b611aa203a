"""``conformance gate``: the CI gate over a baseline and a current run."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def add_parser(sub: Any) -> None:
    gt = sub.add_parser("gate", help="CI gate: classify every cell of baseline and current (each side under its own profile: "
                        "the differences are listed with the cells they touched); exit 0 passed, 1 failed, 2 inconclusive or bad input")
    gt.add_argument("--baseline", action="append", required=True, help="baseline run folder(s) (repeatable)")
    gt.add_argument("--current", action="append", required=True, help="current run folder(s) (repeatable)")
    gt.add_argument("--known", type=Path, help="known-deviation manifest (YAML: requirement, target, reason, link, expires): "
                    "the blocking cells accepted, a failure the current profile excuses too")
    gt.add_argument("--include-should", action="store_true", help="gate SHOULD cells too (default: MUST only)")
    gt.add_argument("--fail-on-new-flaky", action="store_true", help="a cell flaky now (and not failing on the baseline) blocks at any level, not only the gated ones")
    gt.add_argument("--out", type=Path, help="write gate.md (pull-request comment) and gate.json (the complete table) into this folder")
    gt.add_argument("--all", action="store_true", help="show every cell in the console and gate.md, unchanged ones too")
    gt.add_argument("--spark-master", help="Spark master URL or Spark Connect sc://host:port (default local[*])")
    gt.set_defaults(func=command)


def command(args: argparse.Namespace) -> int:
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
