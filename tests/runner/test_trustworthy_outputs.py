"""What a release engineer must be able to trust in a run's outputs.

- No password in any output: failing, erroring and timed-out cases against an external URL with a
  known password and against a launched node, then the report: stdout, stderr and every file
  written are searched for the password.
- Runs that end badly end in one line and exit 2, and run.json says how they ended.
- ``--repeat`` gives each repetition its own record and a pass rate.

Real broker (the session's private node), real sockets, the real ``conformance`` command.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

from adapters.rabbitmq.launcher import RabbitMQLocalNode
from conformance.cli import EXIT_USAGE
from conformance.runner.results import read_results, read_run
from conformance.secrets import SecretUrl, redact, register, scrub
from tests.conftest import ROOT, conformance_cmd


def run_cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(conformance_cmd(*args), cwd=ROOT, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def run_cli_or_stacks(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """run_cli, but a child still running after ``timeout`` is made to print every thread's stack
    (faulthandler on SIGABRT) and the test fails with them: a hang says where it hangs. (CI once
    saw the tiny-deadline run hang, past pytest's 300 s, with nothing to show why.)"""
    import os
    import signal

    proc = subprocess.Popen(conformance_cmd(*args), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL, env={**os.environ, "PYTHONFAULTHANDLER": "1"})
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGABRT)
        out, err = proc.communicate(timeout=30)
        pytest.fail(f"the run did not end within {timeout:.0f}s; its threads' stacks:\n{err[-6000:]}\n--- stdout tail:\n{out[-1500:]}")
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def hits(password: str, folder: Path, *texts: str) -> list[str]:
    """Every place the password appears: in the given console texts and in any file under folder."""
    found = [f"console text #{i}" for i, t in enumerate(texts) if password in t]
    needle = password.encode()
    for path in folder.rglob("*"):
        if path.is_file() and needle in path.read_bytes():
            found.append(str(path))
    return found


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts TCP and never says a word (not a broker)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    yield srv.getsockname()[1]
    srv.close()


def test_secret_url_never_shows_its_password_as_an_object() -> None:
    url = SecretUrl("amqp://user:s3cr3t-Pw@host:5672/%2F")
    assert "s3cr3t-Pw" not in repr(url) and "s3cr3t-Pw" not in repr({"state": [url]})
    assert url.redacted == "amqp://user:***@host:5672/%2F" == redact(url)
    assert url.reveal() == "amqp://user:s3cr3t-Pw@host:5672/%2F"  # the client library still logs in
    assert scrub("connect(amqp://user:s3cr3t-Pw@h) failed; password s3cr3t-Pw") == "connect(amqp://user:***@h) failed; password ***"
    register("a%b")  # percent-encoded forms too
    assert scrub("amqp://u:a%25b@h") == "amqp://u:***@h"


def test_urls_derived_from_a_secret_url_stay_secret() -> None:
    """A case adding a connection option, or a proxy standing in for the broker, keeps the URL a
    SecretUrl: a plain str made with ``+`` would show the password in a traceback's repr."""
    from conformance.nemesis.proxy import FaultProxy

    url = SecretUrl("amqp://user:s3cr3t-Pw@host:5672/%2F")
    framed = url.with_query({"max-frame-size": 4096})
    assert isinstance(framed, SecretUrl) and "s3cr3t-Pw" not in repr(framed)
    assert framed.reveal() == "amqp://user:s3cr3t-Pw@host:5672/%2F?max-frame-size=4096"
    assert framed.with_query({"idle-timeout": 0}).reveal().endswith("?max-frame-size=4096&idle-timeout=0")
    proxied = FaultProxy(("host", 5672)).url(url)
    assert isinstance(proxied, SecretUrl) and "s3cr3t-Pw" not in repr(proxied) and "s3cr3t-Pw" in proxied.reveal()


def test_no_password_in_any_output_of_failing_erroring_and_timed_out_runs(rabbit: RabbitMQLocalNode, tmp_path: Path,
                                                                           silent_port: int) -> None:
    password = rabbit.password
    assert len(password) >= 8
    texts: list[str] = []
    # failing cases (a mutated broker) against the node as an external URL with a known password
    failing = run_cli("run", "--target", rabbit.url, "--area", "ack", "--queue-type", "classic", "--mutation", "redelivered-set",
                      "--out", str(tmp_path / "failing"))
    texts += [failing.stdout, failing.stderr]
    assert failing.returncode == 1, failing.stdout[-2000:]
    assert {r["verdict"] for r in read_results(tmp_path / "failing")} >= {"fail"}
    # timed-out cases: every case hits its deadline inside the client library
    timed_out = run_cli("run", "--target", rabbit.url, "-r", "ACK-REQUEUE-POSITION", "--case-timeout", "0.005", "--keep-history",
                        "--out", str(tmp_path / "timed-out"))
    texts += [timed_out.stdout, timed_out.stderr]
    assert {r["verdict"] for r in read_results(tmp_path / "timed-out")} == {"error"}
    # the launched node's own password: attach to it as the self-test's child runs do
    attached = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "conformance.pytest_plugin", "-p", "no:cacheprovider",
         "-c", str(ROOT / "conformance/cases/pytest.ini"), "--rootdir", str(ROOT / "conformance/cases"), str(ROOT / "conformance/cases"),
         "--target", "rabbitmq-local", "--attach-target", json.dumps(rabbit.handle()), "--results-dir", str(tmp_path / "launched"),
         "--junitxml", str(tmp_path / "launched/junit.xml"), "--alluredir", str(tmp_path / "launched/allure-results"),
         "--area", "nack", "--mutation", "requeue-cleared", "--case-timeout", "20", "-q", "--tb=long"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    texts += [attached.stdout, attached.stderr]
    assert {r["verdict"] for r in read_results(tmp_path / "launched")} >= {"fail"}, attached.stdout[-2000:]
    # a target that is not a broker, and one that is gone: one line each, still no password
    dead_port = socket.socket()
    dead_port.bind(("127.0.0.1", 0))
    closed = dead_port.getsockname()[1]
    dead_port.close()
    for port, name in ((silent_port, "silent"), (closed, "stopped")):
        proc = run_cli("run", "--target", f"amqp://conformance:{password}@127.0.0.1:{port}/", "--out", str(tmp_path / name))
        texts += [proc.stdout, proc.stderr]
        assert proc.returncode == EXIT_USAGE
        assert read_run(tmp_path / name)["status"].startswith("aborted: ")
    report = run_cli("report", str(tmp_path / "failing"), str(tmp_path / "timed-out"), str(tmp_path / "launched"),
                     "--out", str(tmp_path / "report"))
    texts += [report.stdout, report.stderr]
    assert report.returncode == 0, report.stderr[-2000:]
    assert (tmp_path / "launched/junit.xml").exists() and list((tmp_path / "failing/allure-results").glob("*-result.json"))
    assert hits(password, tmp_path, *texts) == []


def test_a_port_that_is_not_a_broker_is_one_line_and_an_aborted_run(silent_port: int, tmp_path: Path) -> None:
    proc = run_cli("run", "--target", f"amqp://u:pw-not-shown@127.0.0.1:{silent_port}/", "--out", str(tmp_path / "r"), timeout=120)
    assert proc.returncode == EXIT_USAGE
    lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.strip()]
    assert len(lines) == 1 and "did not answer as amqp-0-9-1" in lines[0] and "INTERNALERROR" not in lines[0], lines
    run = read_run(tmp_path / "r")
    assert run["status"].startswith("aborted: target amqp://u:***@") and run["catalogue_digest"]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--profile", "{bad}"], "queue_types' must be a mapping, not list"),
        (["--profile", "no-such-profile"], "unknown profile 'no-such-profile'"),
        (["--repeat", "0"], "--repeat must be at least 1"),
        (["--exclude-area", "nope"], "unknown area 'nope'"),
        (["--case-timeout", "0"], "--case-timeout must be a positive number"),
    ],
)
def test_bad_input_is_refused_before_any_node_boots(tmp_path: Path, args: list[str], message: str) -> None:
    bad = tmp_path / "bad-profile.yaml"
    bad.write_text("id: x\nmatch: {product: X, protocols: [amqp-0-9-1]}\nqueue_types: [classic]\n")
    args = [str(bad) if a == "{bad}" else a for a in args]
    proc = run_cli("run", "--target", "rabbitmq-local", "--out", str(tmp_path / "r"), *args, timeout=120)
    assert proc.returncode == EXIT_USAGE, proc.stdout[-2000:]
    lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.strip()]
    assert len(lines) == 1 and message in lines[0], lines
    assert "Traceback" not in proc.stderr
    assert "node_dir" not in json.dumps(read_run(tmp_path / "r"))  # nothing was launched


def test_a_tiny_case_deadline_ends_cases_not_the_run(rabbit: RabbitMQLocalNode, tmp_path: Path) -> None:
    """1 ms, less than any case's first connection: every case overruns (50 ms did not, once the
    ack cases took 26 ms on average), each gets its record, and the run still finishes."""
    out = tmp_path / "r"
    proc = run_cli_or_stacks("run", "--target", rabbit.url, "--area", "ack", "--queue-type", "classic", "--case-timeout", "0.001", "--out", str(out),
                             timeout=200)
    assert "INTERNALERROR" not in proc.stdout + proc.stderr, (proc.stdout + proc.stderr)[-3000:]
    assert proc.returncode == EXIT_USAGE
    recs = list(read_results(out))
    assert read_run(out)["status"] == "finished"
    # every collected case has its record: none lost to the end of the run
    from conformance.cli import build_parser, pytest_args

    args = build_parser().parse_args(["run", "--target", rabbit.url, "--area", "ack", "--queue-type", "classic"])
    collected = subprocess.run([sys.executable, "-m", "pytest", *pytest_args(args, tmp_path / "collect"), "--collect-only", "-q"],
                               cwd=ROOT, capture_output=True, text=True, timeout=120)
    # -q twice (the run's own and this one): pytest prints "file.py: N" per file
    n = sum(int(line.rsplit(":", 1)[1]) for line in collected.stdout.splitlines() if line.startswith(tuple("abcdefghijklmnopqrstuvwxyz")) and ".py: " in line)
    assert n > 10 and len(recs) == n, (n, len(recs))


def test_repeat_gives_each_attempt_its_record_and_a_pass_rate(rabbit: RabbitMQLocalNode, tmp_path: Path) -> None:
    out = tmp_path / "r"
    proc = run_cli("run", "--target", rabbit.url, "-r", "ACK-FIRST-NOT-REDELIVERED", "--queue-type", "quorum", "--repeat", "3",
                   "--out", str(out))
    assert proc.returncode == 0, proc.stdout[-2000:]
    recs = list(read_results(out))
    assert sorted(r["attempt"] for r in recs) == [1, 2, 3]
    assert len({r["case_id"] for r in recs}) == 1 and "attempt" not in recs[0]["case_id"]
    assert {r["queue_type"] for r in recs} == {"quorum"}
    assert read_run(out)["repeat"] == 3
    assert "repeated: 1 case(s), 0 flaky" in proc.stdout


def test_pass_rates_call_a_case_that_passed_and_failed_flaky() -> None:
    from conformance.cli import pass_rates

    recs = [{"case_id": "c", "requirement": "R", "level": "MUST", "verdict": v} for v in ("pass", "fail", "pass", "pass")]
    recs += [{"case_id": "d", "requirement": "R", "level": "MUST", "verdict": "fail"} for _ in range(2)]
    rows = {r["case_id"]: r for r in pass_rates(recs)}
    assert rows["c"]["flaky"] and rows["c"]["pass_rate"] == 0.75
    assert not rows["d"]["flaky"] and rows["d"]["pass_rate"] == 0.0
