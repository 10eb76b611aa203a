"""The suite's command-line options, and their checks before anything is launched."""

from __future__ import annotations


import pytest

from conformance.catalogue.requirements import LEVELS, check_selection
from conformance.errors import UsageError
from conformance.nemesis.mutations import alters, make as make_mutation
from conformance.catalogue.profiles import check_profile_option


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("conformance")
    g.addoption("--target", help="broker URL (amqp://user:pass@host:port/vhost) or a launcher name (e.g. rabbitmq-local)")
    g.addoption("--target-env", help="name of an environment variable holding the target URL (keeps a password out of the process list)")
    g.addoption("--adapter", help="adapter plugin to use (default: the one that speaks the URL's scheme)")
    g.addoption("--profile", help="profile id or YAML file (default: chosen from the server's product and version)")
    g.addoption("--results-dir", default=None, help="folder for run.json and results.jsonl")
    g.addoption("--case-timeout", type=float, default=60.0, help="deadline of each case in seconds (default 60)")
    g.addoption("--keep-history", action="store_true", help="keep the operation history and wire trace of passing cases too")
    g.addoption("--requirement", action="append", help="run only the cases of this requirement id (repeatable)")
    g.addoption("--area", action="append", help="run only the cases of this area (repeatable)")
    g.addoption("--exclude-area", action="append", help="leave out the cases of this area (repeatable)")
    g.addoption("--level", action="append", help="run only requirements of this level: MUST, SHOULD, MAY, EXTENSION (repeatable)")
    g.addoption("--queue-type", action="append", help="run only the cases of this queue type (repeatable; as the profile names them)")
    g.addoption("--repeat", type=int, default=1, help="run every selected case N times, each repetition its own record (attempt 1..N)")
    g.addoption("--mutation", help="run through a proxy that applies this protocol mutation (conformance.nemesis.mutations), making the target faulty on purpose")
    g.addoption("--disruptive", choices=("include", "exclude", "only"), default="include",
                help="cases that restart or kill the broker: run them too (default), leave them out, or run only them")
    g.addoption("--pack", action="append", help="also load this requirement pack (conformance.catalogue.packs); no:NAME leaves out one the adapter's package ships (repeatable)")
    g.addoption("--attach-target", help="JSON handle of a target launched by another process (conformance selftest); it is neither started nor stopped")


def check_options(config: pytest.Config) -> None:
    """Every option is validated before anything is launched: bad input costs no node boot."""
    try:
        check_selection(config.getoption("--requirement") or [], (config.getoption("--area") or []) + (config.getoption("--exclude-area") or []))
        levels = [lv.upper() for lv in config.getoption("--level") or []]
        bad = [lv for lv in levels if lv not in LEVELS]
        if bad:
            raise UsageError(f"unknown level {bad[0]!r}: one of {', '.join(LEVELS)}")
        if config.getoption("--repeat") < 1:
            raise UsageError("--repeat must be at least 1")
        if config.getoption("--case-timeout") <= 0:
            raise UsageError("--case-timeout must be a positive number of seconds")
        check_profile_option(config.getoption("--profile"))
        mutation = config.getoption("--mutation")
        if mutation and alters(mutation):
            make_mutation(mutation)  # an unknown name is a usage error here, not a dead proxy process
    except UsageError as exc:
        raise pytest.UsageError(str(exc)) from None

