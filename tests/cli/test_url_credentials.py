"""A target given the way users give it: a URL with credentials, the default worker count.

The node is launched privately with a user whose password is its own name, as RabbitMQ's
``guest:guest`` is: the user name that every redacted URL still shows is then itself the secret,
so the redaction point changes every text that names the target (an ``unsupported`` reason does),
including a skipped report's ``(path, lineno, message)`` that JUnit reads back by type.
"""

from __future__ import annotations

import secrets
import subprocess
from pathlib import Path

import pytest

from adapters.rabbitmq.launcher import RabbitMQLocalNode
from conformance.runner.judged import summary
from conformance.runner.results import read_results, read_run
from tests.conftest import ROOT, conformance_cmd
from tests.support.cells import catalogue_cells


def test_a_url_with_credentials_runs_the_whole_catalogue_and_no_output_shows_the_password(tmp_path: Path) -> None:
    secret = f"ci{secrets.token_hex(6)}"
    node = RabbitMQLocalNode(plugins=())
    node.user = node.password = secret  # the node's first boot creates this user (rabbitmq.conf default_user/default_pass)
    node.start()
    try:
        out = tmp_path / "run"
        out.mkdir()  # CI gives a folder it made: --out into an existing, empty one
        url = f"amqp://{secret}:{secret}@127.0.0.1:{node.amqp_port}/"
        proc = subprocess.run(conformance_cmd("run", "--target", url, "--out", str(out)), cwd=ROOT, capture_output=True,
                              text=True, timeout=600)
    finally:
        node.stop()
    run = read_run(out)
    assert run.get("status") == "finished", (run.get("status"), proc.stdout[-2000:], proc.stderr[-2000:])
    records = list(read_results(out))
    assert {r["run_id"] for r in records} == {run["run_id"]}
    cases = catalogue_cells()
    assert len(records) == len(cases), (len(records), len(cases))
    assert run["judged"] == summary(run["counts"]) and run["judged"]["judged"] > 0
    assert secret not in proc.stdout and secret not in proc.stderr
    leaked = [str(p) for p in out.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]
    assert not leaked, leaked


def test_redaction_keeps_each_report_kind_of_longrepr_its_type(monkeypatch: pytest.MonkeyPatch) -> None:
    """Synthetic reports: a skip's tuple, a failure's repr objects, a plain string."""
    from _pytest._code.code import ReprFileLocation

    from conformance import secrets as registry
    from conformance.pytest_plugin.reporting import _scrub_report

    # the secret is this test's: the registry is restored after it (later tests in the process see none of it)
    monkeypatch.setattr(registry, "_secrets", set(registry.registered()))
    secret = f"ci{secrets.token_hex(6)}"
    registry.register(secret)
    skip = pytest.TestReport("n", ("f.py", 1, "n"), {}, "skipped", ("f.py", 3, f"Skipped: amqp://{secret}:***@h/ cannot"), "call", [])
    _scrub_report(skip)
    assert isinstance(skip.longrepr, tuple) and skip.longrepr[:2] == ("f.py", 3) and secret not in skip.longrepr[2]
    loc = ReprFileLocation("f.py", 4, f"TargetError: {secret}")
    failed = pytest.TestReport("n", ("f.py", 1, "n"), {}, "failed", loc, "call", [("Captured stdout call", secret)])
    _scrub_report(failed)
    assert failed.longrepr is loc and secret not in loc.message and secret not in failed.longreprtext
    assert secret not in failed.sections[0][1]
    text = pytest.TestReport("n", ("f.py", 1, "n"), {}, "failed", f"error: {secret}", "call", [])
    _scrub_report(text)
    assert text.longrepr == "error: ***"


def test_a_test_s_secret_is_forgotten_after_it() -> None:
    """The redaction test registered its secret for good: every later test in the process masked it."""
    from conformance import secrets as registry

    assert not [s for s in registry.registered() if s.startswith("ci") and len(s) == 14]
