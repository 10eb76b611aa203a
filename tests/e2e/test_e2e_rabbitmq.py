"""End to end against a private RabbitMQ node: the catalogue, the outputs, profiles, a dying target.

These run the real `conformance` command against a real broker over real sockets.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from adapters.rabbitmq.launcher import RabbitMQLocalNode
from conformance.cases import all_cases
from conformance.catalogue.profiles import select_profile
from conformance.catalogue.requirements import catalogue
from conformance.cli import EXIT_FAIL, EXIT_OK, EXIT_USAGE, build_parser, exit_code, pytest_args
from conformance.runner.results import read_results, read_run
from tests.conftest import ROOT, conformance_cmd
from tests.support.cells import catalogue_cells
from tests.support.kill_loss import acked_back_after_kill, lost_to_kill
from tests.support.known_bugs import known_bug_fail


def run_cli(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(conformance_cmd(*args), cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def test_catalogue_passes_on_rabbitmq_classic_and_quorum(rabbit: RabbitMQLocalNode, tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = run_cli("run", "--target", rabbit.url, "--out", str(out), "--workers", "2")
    run = read_run(out)
    assert (run["product"], run["profile"], run["status"]) == ("RabbitMQ", "rabbitmq-3.10", "finished")
    recs = list(read_results(out))
    # the profile's known bugs (open upstream) stay fails: the exit code is theirs, nothing else fails
    assert proc.returncode == exit_code(recs), proc.stdout[-3000:] + proc.stderr[-3000:]
    assert {r["run_id"] for r in recs} == {run["run_id"]}
    # "unsupported" only where it is due: the profile says so for that queue type, or the case needs
    # broker faults and an external URL cannot be restarted by the suite.
    profile = select_profile("RabbitMQ", "3.10.8", "amqp-0-9-1")
    # The failover area needs a launched cluster: on one node it says so, not "cannot be restarted".
    failover = {rid for rid, r in catalogue().items() if r.area == "failover"}
    disruptive = {c.requirement for c in all_cases() if c.disrupts_broker} - failover
    unsupported = [r for r in recs if r["verdict"] == "unsupported"]
    for r in unsupported:
        documented = profile.unsupported_reason(r["requirement"], r["queue_type"])
        assert (documented is not None and r["reason"] == documented.reason) or (
            r["unsupported_kind"] == "refused" and "406 PRECONDITION_FAILED" in r["observed"]) or (
            r["requirement"] in disruptive and "cannot be restarted" in r["reason"]) or (
            r["requirement"] in failover and "not a cluster of 3 or more nodes the suite launched" in r["reason"]) or (
            "amqp-0-9-1" not in catalogue()[r["requirement"]].protocols and "does not apply to amqp-0-9-1" in r["reason"]), r
    assert {r["requirement"] for r in unsupported if "cannot be restarted" in r["reason"]} == disruptive
    # Each says which of its three meanings holds; the profile's refusals ran and were seen on the wire.
    assert all(r["unsupported_kind"] in ("cannot-express", "refused", "no-fault") for r in unsupported)
    assert all(r["unsupported_kind"] == "no-fault" for r in unsupported if "cannot be restarted" in r["reason"])
    limit = [r for r in unsupported if r["requirement"] in ("LIMIT-MAX-DELIVERIES", "LIMIT-DEAD-LETTER", "LIMIT-COUNT-HEADER")]
    # classic queues (and their configurations) and priority quorum queues refuse x-delivery-limit
    assert limit and all((r["queue_type"].partition("+")[0] == "classic" or r["queue_type"] == "quorum+priority")
                         and r["unsupported_kind"] == "refused" and "406" in r["observed"] for r in limit), limit
    bad = [(r["case_id"], r["verdict"], r["observed"]) for r in recs
           if r["verdict"] not in ("pass", "deviation", "unsupported") and not known_bug_fail(r)]
    assert not bad, bad
    assert all(r["citation"] for r in recs if r["verdict"] == "deviation")
    known = [r for r in recs if known_bug_fail(r)]
    # #14485 (prefetch 0 held at 2000 on quorum queues) shows on every run
    assert any(r["requirement"] == "PREFETCH-ZERO-UNLIMITED" and "14485" in r["known_bug"] for r in known), known
    # every requirement ran on both queue types (nothing silently skipped)
    ran = {(r["requirement"], r["queue_type"]) for r in recs}
    expected = {(c.requirement, qt) for c in all_cases() for qt in (c.queue_types or ("classic", "quorum"))}
    assert {rid for rid, _ in expected} == set(catalogue())
    assert ran >= expected
    for key in ("target", "product", "version", "adapter", "profile", "suite_version", "protocol", "duration_s"):
        assert all(key in r for r in recs), key
    # JUnit: one testcase per record, no failures
    suite = ET.parse(out / "junit.xml").getroot().find("testsuite")
    assert suite is not None and int(suite.get("tests", 0)) == len(recs) and int(suite.get("failures", 0)) == len(known)
    failures = [tc.find("failure") for tc in suite.iter("testcase") if tc.find("failure") is not None]
    assert all("Known bug: https://github.com/rabbitmq/rabbitmq-server/issues/" in (f.get("message", "") + (f.text or "")) for f in failures)
    # Allure: requirement, area and severity labels on every result
    results = [json.loads(p.read_text()) for p in (out / "allure-results").glob("*-result.json")]
    assert len(results) == len(recs)
    labels = {(lab["name"], lab["value"]) for res in results for lab in res["labels"]}
    assert ("requirement", "ACK-UNKNOWN-TAG-406") in labels and ("severity", "critical") in labels and ("area", "ack") in labels
    # ... suites target/area/requirement, a verdict label, the target as a parameter, environment.properties
    names = {n for n, _ in labels}
    assert {"parentSuite", "suite", "subSuite", "verdict"} <= names and ("suite", "ack") in labels
    assert all(any(p["name"] == "target" for p in res["parameters"]) for res in results)
    env = (out / "allure-results" / "environment.properties").read_text()
    assert "product=RabbitMQ" in env and "protocol=amqp-0-9-1" in env and "profile=" in env
    # the node's password never reaches any output
    for p in out.rglob("*"):
        if p.is_file():
            assert rabbit.password not in p.read_text(errors="replace"), p


def test_profile_can_mark_unsupported_and_never_excuses_what_it_leaves_out(rabbit: RabbitMQLocalNode, tmp_path: Path) -> None:
    profile = tmp_path / "custom.yaml"
    # RabbitMQ 3.10's profile without its quorum rows for the recover and nack positions
    text = (
        "id: custom\ntitle: custom\nextends: rabbitmq-3.10\nmatch: {versions: '>=3.10,<3.12'}\nentries:\n"
        "  requeue.position.recover: {by_queue_type: {quorum: null}}\n"
        "  requeue.position.nack: {by_queue_type: {quorum: null}}\n"
        "unsupported:\n  - {requirement: ACK-DOUBLE-ACK-406, queue_types: [quorum], kind: cannot-express, reason: test says so, source: tests}\n"
    )
    profile.write_text(text)
    out = tmp_path / "run"
    proc = run_cli("run", "--target", rabbit.url, "--out", str(out), "--profile", str(profile),
                   "-r", "ACK-DOUBLE-ACK-406", "-r", "ACK-REQUEUE-POSITION", "--queue-type", "classic", "--queue-type", "quorum")
    assert proc.returncode == EXIT_OK, proc.stdout[-3000:]
    got = {(r["requirement"], r["queue_type"], r["variant"]): r for r in read_results(out)}
    assert got[("ACK-DOUBLE-ACK-406", "quorum", None)]["verdict"] == "unsupported"
    assert got[("ACK-DOUBLE-ACK-406", "quorum", None)]["reason"] == "test says so"
    assert got[("ACK-DOUBLE-ACK-406", "classic", None)]["verdict"] == "pass"
    # without the entries that document quorum queues' returns at the tail, the reference (original
    # position) judges alone: RabbitMQ 3.10's tail fails; the entry kept (consumer loss, returns
    # queue first) explains its difference as a deviation
    assert got[("ACK-REQUEUE-POSITION", "quorum", "recover")]["verdict"] == "fail"
    assert got[("ACK-REQUEUE-POSITION", "quorum", "nack")]["verdict"] == "fail"
    assert got[("ACK-REQUEUE-POSITION", "quorum", "consumer-loss")]["verdict"] == "deviation"
    assert got[("ACK-REQUEUE-POSITION", "classic", "nack")]["verdict"] == "pass"
    assert len(got) == 8


def test_a_broker_killed_mid_run_turns_the_rest_into_errors(tmp_path: Path) -> None:
    node = RabbitMQLocalNode()
    node.start()
    try:
        out = tmp_path / "run"
        # serial: "the 4th case" is a position in one process's order (run's default is 2 workers)
        args = build_parser().parse_args(["run", "--target", node.url, "--out", str(out), "--workers", "1"])
        argv = pytest_args(args, out) + ["-p", "tests.support.killer"]
        env = {**os.environ, "KILL_BEFORE_CASE": "4", "KILL_PGID": str(node.proc.pid), "PYTHONPATH": str(ROOT)}
        proc = subprocess.run([sys.executable, "-m", "pytest", *argv], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
        recs = list(read_results(out))
        assert len(recs) == len(catalogue_cells()), proc.stdout[-2000:]
        verdicts = [r["verdict"] for r in recs]
        assert verdicts[:3] == ["pass"] * 3
        # the case running when it went silent fails with that finding; a URL cannot be restarted, so
        # the judging ends there and every later case is an error naming the case that found it
        assert verdicts[3] == "fail" and recs[3]["observed"].startswith("broker stopped answering "), recs[3]["observed"]
        assert set(verdicts[4:]) == {"error"}
        assert all("target is down" in r["observed"] and recs[3]["case_id"] in r["observed"] for r in recs[4:]), recs[4]["observed"]
        assert recs[3]["case_id"] in read_run(out)["target_dead"] and read_run(out)["restarts"] == []
        assert exit_code(recs) == EXIT_FAIL  # the finding is a MUST that failed, before the errors after it
        # the cause is told once; every later case is one line, not a traceback of the runner
        assert "Traceback" not in proc.stdout and "run_case" not in proc.stdout
        remaining = proc.stdout.count("error: target is down since an earlier case")
        assert remaining >= len(recs) - 5, proc.stdout[-3000:]
        assert len(proc.stdout.splitlines()) < 4 * len(recs) + 200, len(proc.stdout.splitlines())
    finally:
        node.kill()
        node.stop()


def test_exit_code_policy() -> None:
    rec = {"level": "MUST", "verdict": "pass"}
    assert exit_code([rec]) == EXIT_OK
    assert exit_code([rec, {"level": "MUST", "verdict": "fail"}]) == EXIT_FAIL
    assert exit_code([rec, {"level": "SHOULD", "verdict": "fail"}]) == EXIT_OK
    assert exit_code([rec, {"level": "MUST", "verdict": "error"}]) == EXIT_USAGE
    assert exit_code([]) == EXIT_USAGE


@pytest.mark.parametrize(
    "args, message",
    [
        (["run", "--target", "nosuch"], "unknown target 'nosuch'"),
        (["run", "--target", "amqp://u:hunter2@127.0.0.1:1/%2F"], "unreachable"),
        (["run", "-r", "ACK-NOPE"], "unknown requirement"),
        (["run", "--area", "nope"], "unknown area"),
        (["list", "--area", "nope"], "unknown area"),
    ],
)
def test_bad_input_is_one_clear_line_and_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    proc = run_cli(*args, "--out", str(tmp_path / "o")) if args[0] == "run" else run_cli(*args)
    assert proc.returncode == EXIT_USAGE, proc.stdout + proc.stderr
    err_lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(err_lines) == 1 and message in err_lines[0], proc.stderr
    assert "hunter2" not in proc.stdout + proc.stderr


def test_list_prints_the_catalogue_filtered() -> None:
    proc = run_cli("list", "--level", "SHOULD", "--json")
    assert proc.returncode == 0
    rows = json.loads(proc.stdout)
    assert rows and {r["level"] for r in rows} == {"SHOULD"} and all(r["cases"] for r in rows)


def test_every_case_has_a_deadline(rabbit: RabbitMQLocalNode, tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = run_cli("run", "--target", rabbit.url, "--out", str(out), "--case-timeout", "0.001", "-r", "ACK-REQUEUE-POSITION",
                   "--queue-type", "classic", "--queue-type", "quorum")
    assert proc.returncode == EXIT_USAGE, proc.stdout[-2000:]
    recs = list(read_results(out))
    # Strict: no case can finish inside 1 ms (a connection alone takes longer), so each must be ended
    # by its deadline, even when the alarm lands in a finalizer and is lost (conformance.runner.deadline).
    assert len(recs) == 6 and {r["verdict"] for r in recs} == {"error"}, [(r["verdict"], r.get("duration_s")) for r in recs]
    # a 1 ms deadline interrupts each case somewhere: mostly reported as the deadline itself; when the
    # alarm lands inside the client library, that library's own error may be what the case reports
    assert any("Timeout" in r["observed"] for r in recs), [r["observed"] for r in recs]
    assert read_run(out)["status"] == "finished"


def test_launcher_restart_keeps_durable_state_and_kill_is_detected() -> None:
    from adapters.amqp091.pika_adapter import PikaAdapter
    from conformance.api import QueueSpec

    node = RabbitMQLocalNode()
    node.start()
    try:
        s = PikaAdapter().connect(node.url).session()
        s.declare_queue(QueueSpec("durable-probe", durable=True))
        s.enable_confirms()
        s.publish("durable-probe", b"x", message_id="p1", persistent=True)
        node.restart()
        assert node.check_alive() is None
        assert PikaAdapter().connect(node.url).session().queue_stats("durable-probe").ready == 1
        node.kill()
        assert "not running" in (node.check_alive() or "")
        node.start()
        assert PikaAdapter().connect(node.url).session().queue_stats("durable-probe").ready == 1
    finally:
        node.stop()
    assert node.dir is None


def test_a_failing_case_carries_its_wire_trace_into_junit_and_allure(rabbit: RabbitMQLocalNode, tmp_path: Path) -> None:
    """A target that ignores tx.select breaks TX-PUBLISH-DISCARDED-ON-LOSS; the failing case's
    decoded trace (publishes, no tx.select, the FIN fault on tx.commit) reaches every output."""
    out = tmp_path / "run"
    args = build_parser().parse_args(["run", "--target", rabbit.url, "--out", str(out), "-r", "TX-PUBLISH-DISCARDED-ON-LOSS"])
    argv = pytest_args(args, out) + ["-p", "tests.support.tx_ignored"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "pytest", *argv], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    recs = {(r["queue_type"], r["variant"]): r for r in read_results(out)}
    fin = recs[("classic", "fin")]
    assert fin["verdict"] == "fail" and "delivered" in fin["observed"], proc.stdout[-3000:]
    # the requirement rests on tx/atomic, a SHOULD, so its failure is reported but does not fail the run
    assert fin["level"] == "SHOULD" and all(r["verdict"] == "fail" for r in recs.values())
    assert exit_code(list(recs.values())) == EXIT_OK
    trace = "\n".join(fin["wire_trace"])
    assert "basic.publish" in trace and "tx.select" not in trace
    assert "FAULT fin on 1st tx.commit from the client" in trace
    # JUnit: the failing testcase's <system-out> holds the same decoded trace
    cases = ET.parse(out / "junit.xml").getroot().iter("testcase")
    failing = [c for c in cases if c.find("failure") is not None and "fin" in c.get("name", "") and "classic" in c.get("name", "")]
    assert len(failing) == 1
    system_out = failing[0].findtext("system-out") or ""
    assert "Wire trace" in system_out and "FAULT fin on 1st tx.commit" in system_out and "content-header" in system_out
    # Allure: a "wire trace" attachment on that result, whose file is the trace
    results = [json.loads(p.read_text()) for p in (out / "allure-results").glob("*-result.json")]
    failed = [r for r in results if r["status"] == "failed" and "fin" in r["name"] and "classic" in r["name"]]
    assert len(failed) == 1
    attachment = next(a for a in failed[0]["attachments"] if a["name"] == "wire trace")
    assert "FAULT fin on 1st tx.commit" in (out / "allure-results" / attachment["source"]).read_text()
    for p in out.rglob("*"):
        if p.is_file():
            assert rabbit.password not in p.read_text(errors="replace"), p


def test_persistence_area_restarts_and_kills_a_launched_node(tmp_path: Path) -> None:
    """Broker-level faults inside cases: each persistence case restarts or kills the private node the
    run launched and finishes on its own; only the documented quorum kill deviation may differ."""
    out = tmp_path / "run"
    proc = run_cli("run", "--area", "persist", "--out", str(out), timeout=400)
    recs = {(r["requirement"], r["queue_type"], r["variant"]): r for r in read_results(out)}
    persist = {(c.requirement, qt, v) for c, qt, v in catalogue_cells() if catalogue()[c.requirement].area == "persist"}
    assert set(recs) == persist, proc.stdout[-3000:] + proc.stderr[-2000:]  # every restart/kill cell + the exclusive-queue lock
    flaky_loss = []
    for key, r in recs.items():
        if r["verdict"] == "pass":
            continue
        if key[1].partition("+")[0] == "quorum" and "kill" in (key[2] or "kill") and known_bug_fail(r, "10070"):
            continue  # rabbitmq-server#10070 (open), intermittent: a pass or the known bug's fail, never another fail
        if key[0] == "PERSIST-DELIVERY-COUNT-SURVIVES" and key[1] == "classic":
            assert r["verdict"] == "unsupported" and "x-delivery-limit" in r["reason"], (key, r)  # classic queues have no delivery limit
        elif key == ("PERSIST-NON-DURABLE-QUEUE-GONE", "quorum", None):
            assert r["verdict"] == "unsupported" and "always durable" in r["reason"]
        elif lost_to_kill(r):  # RabbitMQ 3.10.8 itself (tests.support.kill_loss); nothing else may fail with it
            flaky_loss.append(key)
        else:
            assert acked_back_after_kill(r), (key, r["verdict"], r["observed"])  # the profile's documented redelivery after kill -9
    assert proc.returncode == exit_code(list(recs.values())), proc.stdout[-3000:] + proc.stderr[-2000:]
    assert all("case deadline" not in r["observed"] for r in recs.values())
