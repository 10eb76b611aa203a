"""``conformance explain RUN CASE``: everything a results folder holds about one case or requirement."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def add_parser(sub: Any) -> None:
    ex = sub.add_parser("explain", help="print everything a results folder holds about one case or requirement, and the command that reruns it")
    ex.add_argument("run", type=Path, help="results folder of conformance run (results.jsonl, run.json)")
    ex.add_argument("case", help="case id (or its tail, e.g. TestNackDiscard::test[classic-single]), requirement id, or REQ-ID[classic]")
    ex.set_defaults(func=command)


def command(args: argparse.Namespace) -> int:
    """Rich panels on a terminal, plain text in a pipe or a CI log."""
    from conformance.catalogue.explain import explain

    return explain(args.run, args.case, rich=sys.stdout.isatty())
