"""Preflight, liveness and missing deliveries, and the hostile modes that emulate each situation.

Pure parts on synthetic data first (verdicts, blocking, operators on synthetic frames), then the
health probe against the real node (alive, and silenced by the silent-after operator in the fault
proxy), then the ack and nack areas run through each hostile mode: every run must end with named
findings and no case at its deadline (the wall time is printed, a figure, not an assertion).
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from pamqp import body as pbody
from pamqp import commands
from pamqp import header as pheader

from adapters.amqp091.pika_adapter import PikaAdapter
from conformance import inflight
from conformance.catalogue.requirements import requirement
from conformance.errors import DeliveriesMissing, NoReply
from conformance.kit.verdicts import Outcome
from conformance.nemesis.mutations import expectations
from conformance.nemesis.proxy_isolated import IsolatedFaultProxy
from conformance.runner import liveness, missing_deliveries, preflight
from tests.conftest import conformance_cmd
from tests.nemesis.test_mutations import IO, C, S, decoded, deliver, frames091, run

CASE_TIMEOUT = 30


# -- pure ---------------------------------------------------------------------------------------

def test_a_missing_delivery_is_a_fail_naming_what_did_not_arrive() -> None:
    exc = DeliveriesMissing("q1", 3, ["m1"], 5.0, ["m1", "m2", "m3"])
    v = missing_deliveries.missing_verdict(missing_deliveries.missing_obs(exc))
    assert v.outcome is Outcome.FAIL and v.spec == "fail" and v.key == "deliveries-missing"
    assert "3 deliveries" in v.expected and "within 5s" in v.expected
    assert "1 arrived within 5s (missing m2, m3): [m1]" in v.observed


def test_no_reply_names_the_operation_and_the_reply() -> None:
    exc = NoReply("queue.declare", "queue.declare-ok", 5.0)
    assert str(exc).startswith("queue.declare: no queue.declare-ok within 5s")
    assert liveness.operation_of(exc) == "queue.declare"


def test_a_broken_assumption_blocks_every_dependent_case_at_once() -> None:
    req = requirement("ACK-SINGLE-ONLY-TAG")
    ok = [preflight.Check(a, True, "fine") for a in preflight.NEEDED_BY]
    assert preflight.blocking(ok, req) is None
    unoffered = [*ok[:3], preflight.Check("publish confirmed", None, "not offered by the adapter"), *ok[4:]]
    assert preflight.blocking(unoffered, req) is None  # a facility the adapter lacks is not a broken assumption
    broken = [*ok[:3], preflight.Check("publish confirmed", False, "basic.publish: no basic.ack within 5s")]
    v = preflight.blocking(broken, req)
    assert v is not None and v.outcome is Outcome.BLOCKED
    assert v.observed == "blocked: publish confirmed: basic.publish: no basic.ack within 5s"
    assert preflight.broken(broken) is broken[-1]
    assert "BROKEN" in preflight.render(broken)


def test_hostile_modes_are_declared_outside_the_kill_matrix() -> None:
    declared = expectations()
    for name in ("silent-after", "deliveries-withheld"):
        assert declared[name].hostile and declared[name].breaks == () and (declared[name].must_fail or declared[name].must_name)
    assert declared["empty-body-ignored"].breaks == ("PUBLISH-EMPTY-BODY",)
    assert declared["body-frames-swapped"].breaks == ("PUBLISH-BODY-LARGER-THAN-FRAME-MAX",)


def _publish(mid: str, body: bytes) -> list[Any]:
    values: list[tuple[Any, int]] = [(commands.Basic.Publish(exchange="", routing_key="q"), 1),
                                     (pheader.ContentHeader(0, len(body), commands.Basic.Properties(message_id=mid)), 1)]
    if body:
        values.append((pbody.ContentBody(body), 1))
    return frames091(*values)


def test_empty_body_ignored_discards_only_empty_publishes_and_renumbers_confirms() -> None:
    stream = [(C, f) for f in frames091((commands.Confirm.Select(), 1)) + _publish("a", b"x") + _publish("e", b"") + _publish("b", b"y")]
    stream += [(S, f) for f in frames091((commands.Basic.Ack(1, False), 1), (commands.Basic.Ack(2, False), 1))]
    to_server, to_client, io, m = run("empty-body-ignored", stream)
    assert [v.properties.message_id for v in decoded(to_server) if isinstance(v, pheader.ContentHeader)] == ["a", "b"]
    assert [a.delivery_tag for a in decoded(to_client)] == [1, 3]  # the empty one (#2) is never confirmed
    assert m.rewritten == 1 and "empty body" in io.notes[0]


def test_deliveries_withheld_withholds_redeliveries_only() -> None:
    stream = [(S, f) for f in deliver(1) + deliver(2, True, mid="m2") + deliver(3, mid="m3")]
    _, to_client, io, _ = run("deliveries-withheld", stream)
    assert [v.delivery_tag for v in decoded(to_client) if isinstance(v, commands.Basic.Deliver)] == [1, 3]
    assert io.server == []  # the broker still counts it delivered and unacked


def test_body_frames_swapped_swaps_two_full_body_frames() -> None:
    one, two = b"a" * 16, b"b" * 16
    frames = frames091((commands.Basic.Deliver("ctag", 1, False, "", "q"), 1), (pheader.ContentHeader(0, 34, commands.Basic.Properties()), 1),
                       (pbody.ContentBody(one), 1), (pbody.ContentBody(two), 1), (pbody.ContentBody(b"cc"), 1))
    _, to_client, *_ = run("body-frames-swapped", [(S, f) for f in frames])
    assert [v.value for v in decoded(to_client) if isinstance(v, pbody.ContentBody)] == [two, one, b"cc"]
    _, untouched, *_ = run("body-frames-swapped", [(S, f) for f in deliver(2)])
    assert untouched == [f.raw for f in deliver(2)]  # a one-frame body is left alone


def test_silent_after_swallows_everything_both_ways_from_the_nth_client_frame() -> None:
    stream = [(C, f) for f in frames091((commands.Basic.Qos(prefetch_count=1), 1), (commands.Queue.Declare(queue="q"), 1))]
    stream += [(S, f) for f in frames091((commands.Queue.DeclareOk("q", 0, 0), 1))]
    to_server, to_client, io, _ = run("silent-after:2", stream)
    assert [type(v).__name__ for v in decoded(to_server)] == ["Qos"] and to_client == []
    assert "target silent from client frame #2" in io.notes[0]


# -- the health probe on the real node ------------------------------------------------------------

def test_health_probe_tells_an_answering_target_from_a_silent_one(rabbit) -> None:
    adapter = PikaAdapter()
    assert liveness.health_probe(adapter, rabbit.url, 5.0) is None
    # a target that answers after a timeout continues: no dead cause, the case keeps its own error
    judged = liveness.after_scenario_exception(NoReply("tx.commit", "tx.commit-ok", 1.0), adapter=adapter, url=rabbit.url,
                                               case_id="c1", requirement_text="r")
    assert judged == liveness.Judgement(None, None)
    proxy = IsolatedFaultProxy.for_url(rabbit.url, mutation="silent-after:1").start()
    try:
        start = time.monotonic()
        silent = liveness.health_probe(adapter, proxy.url(rabbit.url), 1.0)
        assert silent == "connection.open: no connection.open-ok within 1s (connection cut by the suite)"
        assert time.monotonic() - start < 5
        judged = liveness.after_scenario_exception(NoReply("queue.declare", "queue.declare-ok", 1.0), adapter=adapter,
                                                   url=proxy.url(rabbit.url), case_id="ack/x.py::T::test[classic]",
                                                   requirement_text="r", probe_timeout=1.0)
        assert judged.dead_cause is not None and judged.dead_cause.startswith(
            "target stopped answering queue.declare since ack/x.py::T::test[classic]")
        assert judged.verdict is not None and judged.verdict.outcome is Outcome.ERROR
    finally:
        proxy.close()


@pytest.mark.parametrize("mutation", [None, "delivery-duplicated", "acks-dropped", "durable-flipped"])
def test_preflight_holds_on_rabbitmq_and_through_mutations_it_is_not_about(rabbit, mutation: str | None) -> None:
    """The self-test runs every mutation with the preflight in front: a mutation about one rule must
    not block the cases that are to catch it."""
    proxy = IsolatedFaultProxy.for_url(rabbit.url, mutation=mutation).start() if mutation else None
    try:
        checks = preflight.run_preflight(PikaAdapter(), proxy.url(rabbit.url) if proxy else rabbit.url)
    finally:
        if proxy:
            proxy.close()
    assert [c.assumption for c in checks] == list(preflight.NEEDED_BY)
    assert all(c.ok for c in checks), preflight.render(checks)


# -- the ack and nack areas through each hostile mode --------------------------------------------

#: mode -> extra requirements selected beside the ack and nack areas (the one the mode is about)
HOSTILE_RUNS = {
    "empty-body-ignored": ["PUBLISH-EMPTY-BODY"],
    "deliveries-withheld": [],
    "silent-after": [],
    "silent-after:5": [],  # silent during the preflight: every case blocked at once
}


def _hostile_run(rabbit, tmp_path: Path, mode: str) -> tuple[float, list[dict[str, Any]], dict[str, Any], subprocess.CompletedProcess[str]]:
    out = tmp_path / mode.replace(":", "-")
    extra = [a for rid in HOSTILE_RUNS[mode] for a in ("-r", rid)]
    start = time.monotonic()
    proc = subprocess.run(conformance_cmd("run", "--target", rabbit.url, "--area", "ack", "--area", "nack", *extra, "--mutation", mode,
                                          "--case-timeout", str(CASE_TIMEOUT), "--out", str(out)),
                          capture_output=True, text=True, timeout=3 * CASE_TIMEOUT + 60)
    wall = time.monotonic() - start
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines() if line.strip()]
    return wall, records, json.loads((out / "run.json").read_text()), proc


@pytest.mark.timeout(3 * CASE_TIMEOUT + 90)
@pytest.mark.parametrize("mode", list(HOSTILE_RUNS))
def test_a_hostile_target_ends_the_run_quickly_with_named_findings(rabbit, tmp_path: Path, mode: str) -> None:
    wall, records, run_json, proc = _hostile_run(rabbit, tmp_path, mode)
    print(f"\nWALL {mode}: {wall:.1f}s for {len(records)} cases")
    tail = proc.stdout[-2000:] + proc.stderr[-2000:]
    # The wall time is a figure for the benchmark and the notes (printed above), not an assertion:
    # what must hold on any machine is that no case ran into its deadline (checked below).
    assert len(records) >= 52, tail
    assert not [r for r in records if "case deadline" in r["observed"] or (r.get("duration_s") or 0) >= CASE_TIMEOUT], tail
    assert not [r for r in records if ".py:" in r["observed"] and "Failed" in r["observed"]], tail
    exp = expectations().get(mode) or expectations()[mode.split(":")[0]]
    failed = {r["requirement"] for r in records if r["verdict"] == "fail"}
    assert set(exp.breaks) <= failed and set(exp.must_fail) <= failed, (exp, failed)
    for text in exp.must_name:
        if mode == "silent-after:5":
            continue  # silent before any case ran: the finding is the preflight's, checked below
        assert any(text in r["observed"] for r in records), (text, tail)
    if mode == "silent-after:5":
        assert {r["verdict"] for r in records} == {"blocked"}, tail
        assert all(r["observed"].startswith("blocked: connection and channel open: connection.open: no connection.open-ok") for r in records)
        assert [c["ok"] for c in run_json["preflight"]][:1] == [False]
        assert proc.returncode == 2
    elif mode == "silent-after":
        dead = [r for r in records if r["verdict"] == "error"]
        assert dead and all("target stopped answering" in r["observed"] for r in dead), tail
        assert sum(1 for r in dead if (r.get("duration_s") or 0) > 1) <= 1  # only the case that found it waited
    else:
        assert not [r for r in records if r["verdict"] in ("error", "blocked")], tail
        assert all(c["ok"] for c in run_json["preflight"])


def test_the_case_deadline_names_the_operation_it_interrupted() -> None:
    class Failed(BaseException):  # pytest-timeout raises pytest's Failed outcome inside the wait
        pass

    inflight.clear_interrupted()
    with pytest.raises(ConnectionError):
        with inflight.inflight("queue.declare", "queue.declare-ok"):
            raise ConnectionError("a client library's own error is not the deadline")
    assert inflight.deadline_text(30) is None
    with pytest.raises(Failed):
        with inflight.inflight("tx.commit", "tx.commit-ok"):
            raise Failed()
    text = inflight.deadline_text(30)
    assert text is not None and text.startswith("Timeout: case deadline 30s reached in tx.commit: no tx.commit-ok after ")
    assert inflight.deadline_text(30) is None  # read once
