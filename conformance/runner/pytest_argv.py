"""The pytest command line of a run: plain strings, built from the option table (conformance.runner.options).

``conformance run`` hands it to pytest in-process (conformance.cli.run); the self-test starts each of
its catalogue runs as a child ``python -m pytest`` with it (conformance.runner.selftest.runs).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from conformance.runner.options import FILTERS, PYTEST_OPTIONS, TABLE, check
from conformance.runner.options import argv as options_argv

#: The environment variable through which a target URL with a password reaches pytest (and the
#: self-test's child processes): never their argv, which every user of the machine can read.
TARGET_ENV = "CONFORMANCE_TARGET_URL"

#: The most worker processes a whole-catalogue run gets by default, whatever the core count: each
#: worker pays a pytest start-up (~1 s) and the cases that restart the broker hold it exclusively,
#: so past a few workers the catalogue's ~190 cases gain nothing (4 workers were slower than 3 on
#: 2 cores). A larger machine that wants more says ``--workers``.
MAX_DEFAULT_WORKERS = 4


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
