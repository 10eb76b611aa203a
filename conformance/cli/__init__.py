"""``conformance``: run the catalogue against a target, list the catalogue.

Exit codes: 0 every MUST held; 1 a MUST failed; 2 usage or infrastructure error (bad input,
unreachable target, a case that could not reach a verdict).

One module per command, each with its ``add_parser`` and its ``command``: run, selftest, soak, report,
gate, list (listing), adapter-check, new-adapter, explain. This module only parses and dispatches.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from conformance import __version__, default_target
from conformance.cli import adapter_check, explain, gate, listing, new_adapter, report, run, selftest, soak
from conformance.cli.exit_codes import EXIT_FAIL, EXIT_OK, EXIT_USAGE
from conformance.cli.run import exit_code, pass_rates, summarize
from conformance.errors import UsageError
from conformance.runner.pytest_argv import TARGET_ENV, default_workers, pytest_args, target_argv

#: The commands in ``conformance --help`` order.
COMMANDS = (run, selftest, soak, report, gate, listing, adapter_check, new_adapter, explain)

__all__ = ["EXIT_FAIL", "EXIT_OK", "EXIT_USAGE", "TARGET_ENV", "build_parser", "default_workers", "exit_code", "main", "pass_rates",
           "pytest_args", "summarize", "target_argv"]


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
    for command in COMMANDS:
        command.add_parser(sub)
    return p
