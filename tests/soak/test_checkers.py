"""The soak checkers on histories: small hand-written ones for each rule (a history that keeps it
passes, one that breaks it fails with the anomaly that cites the right ops), a healthy model
broker's generated histories (every checker passes, whatever the seed), and the three mutations
of a healthy history, each found by the checker it is for."""

from __future__ import annotations

import gc
import itertools
import json
import threading
from pathlib import Path
from typing import Any

import pytest

from conformance.soak.checkers import CHECKERS, CheckOptions, order, queue, redelivery, run_all, tx
from conformance.soak.history import HistoryWriter, Op, make_op, problems, read_history, write_history
from conformance.soak.mutations import MUTATIONS, break_atomicity, duplicate_after_failover, lose_confirmed
from conformance.soak.synthetic import healthy_history

ORDERED = CheckOptions(ordered=True, requeue_counts=True)


class H:
    """A hand-written history, one call per operation; each call returns the index it recorded."""

    def __init__(self) -> None:
        self.ops: list[dict[str, Any]] = []

    def op(self, process: str, type: str, f: str, **value: Any) -> int:
        self.ops.append(make_op(len(self.ops), process, type, f, value))
        return len(self.ops) - 1

    def publish(self, mid: str, outcome: str | None = "ok", mode: str = "confirm", txn: str | None = None) -> int:
        producer, seq = mid.rsplit("-", 1)
        value = {"id": mid, "producer": producer, "seq": int(seq), "mode": mode, **({"txn": txn} if txn else {})}
        self.op(producer, "invoke", "publish", **value)
        return self.op(producer, outcome, "publish", **value) if outcome else len(self.ops) - 1

    def deliver(self, mid: str, consumer: str = "c1", redelivered: bool = False, count: int | None = None,
                process: str | None = None) -> int:
        return self.op(process or consumer, "ok", "deliver", id=mid, consumer=consumer, redelivered=redelivered,
                       delivery_count=count, ack_mode="auto" if consumer == "drain" else "manual")

    def settle(self, mid: str, consumer: str = "c1", outcome: str = "ok", f: str = "ack") -> int:
        self.op(consumer, "invoke", f, id=mid, consumer=consumer)
        return self.op(consumer, outcome, f, id=mid, consumer=consumer)

    def end_txn(self, producer: str, txn: str, ids: list[str], outcome: str | None = "ok", f: str = "commit") -> int:
        self.op(producer, "invoke", f, txn=txn, ids=ids)
        return self.op(producer, outcome, f, txn=txn, ids=ids) if outcome else len(self.ops) - 1

    def drain(self) -> int:
        self.op("drain", "invoke", "drain", consumer="drain")
        return self.op("drain", "ok", "drain", consumer="drain")


def kinds(result) -> list[str]:
    return [a.kind for a in result.anomalies]


# --- queue ----------------------------------------------------------------------------------------

def test_queue_passes_confirmed_and_committed_delivered_once_and_plain_lost() -> None:
    h = H()
    h.publish("p1-1")
    h.publish("p2-1", mode="tx", txn="p2-t0")
    h.end_txn("p2", "p2-t0", ["p2-1"])
    h.publish("p3-1", mode="plain")            # plain: its loss is counted, never an anomaly
    h.deliver("p1-1")
    h.settle("p1-1")
    h.drain()
    h.deliver("p2-1", "drain")
    h.drain()
    r = queue.check(h.ops)
    assert r.verdict == "pass", r.anomalies
    assert r.counts["confirmed_delivered"] == 1 and r.counts["committed_delivered"] == 1
    assert r.counts["plain_not_delivered"] == 1 and r.counts["anomalies"] == 0


def test_queue_fails_a_confirmed_and_a_committed_publish_never_delivered() -> None:
    h = H()
    ok = h.publish("p1-1")
    commit = (h.publish("p2-1", mode="tx", txn="p2-t0"), h.end_txn("p2", "p2-t0", ["p2-1"]))[1]
    drained = h.drain()
    r = queue.check(h.ops)
    assert r.verdict == "fail" and kinds(r) == ["lost", "lost"]
    assert r.anomalies[0].ops == [ok - 1, ok, drained]
    assert commit in r.anomalies[1].ops and "Expected: p1-1, confirmed" in r.anomalies[0].text
    assert "Actual: never delivered" in r.anomalies[0].text


def test_queue_without_a_completed_drain_cannot_judge_loss() -> None:
    h = H()
    h.publish("p1-1")
    h.op("drain", "invoke", "drain", consumer="drain")    # invoked, never completed
    r = queue.check(h.ops)
    assert r.verdict == "unknown" and "no drain op completed" in r.note
    assert r.counts["confirmed_not_delivered"] == 1 and not r.anomalies


def test_queue_without_a_drain_still_fails_what_shows_anyway() -> None:
    h = H()
    h.deliver("x-1")
    r = queue.check(h.ops)
    assert r.verdict == "fail" and kinds(r) == ["unexpected"] and r.anomalies[0].ops == [0]


def test_queue_unknown_publishes_and_commits_go_either_way() -> None:
    h = H()
    h.publish("p1-1", outcome="unknown")
    h.publish("p1-2", outcome="unknown")
    h.publish("p1-3", outcome=None)                    # invoked, no outcome recorded: unknown too
    h.publish("p2-1", mode="tx", txn="p2-t0")
    h.end_txn("p2", "p2-t0", ["p2-1"], outcome="unknown")
    h.deliver("p1-1")
    h.drain()
    r = queue.check(h.ops)
    assert r.verdict == "pass", r.anomalies
    assert (r.counts["unknown_delivered"], r.counts["unknown_not_delivered"]) == (1, 2)
    assert r.counts["commit_unknown_not_delivered"] == 1


def test_queue_fails_a_refused_publish_delivered() -> None:
    h = H()
    nack = h.publish("p1-1", outcome="fail")
    d = h.deliver("p1-1")
    h.drain()
    r = queue.check(h.ops)
    assert r.verdict == "fail" and kinds(r) == ["delivered-though-refused"] and r.anomalies[0].ops == [nack, d]


def test_queue_counts_a_duplicate_after_an_ack_lost_with_its_connection() -> None:
    """c1 acked, then its connection was cut before any later op: the broker may never have had
    the ack, so the redelivery to c2 is counted, not flagged."""
    h = H()
    h.publish("p1-1")
    h.deliver("p1-1")
    h.settle("p1-1")
    h.op("nemesis", "ok", "fault", kind="cut", target="c1", detail="")
    h.op("c1", "invoke", "consume", consumer="c1", prefetch=1, ack_mode="manual")
    h.op("c1", "ok", "consume", consumer="c1", prefetch=1, ack_mode="manual")
    h.op("c1", "ok", "cancel", consumer="c1", prefetch=1, ack_mode="manual")   # the new subscription's, proves nothing old
    h.deliver("p1-1", "c2", redelivered=True)
    h.drain()
    r = queue.check(h.ops)
    assert r.verdict == "pass", r.anomalies
    assert r.counts["duplicates"] == 1 and r.counts["duplicates_after_ack"] == 1


def test_queue_fails_a_duplicate_after_an_ack_a_later_op_of_its_consumer_proved() -> None:
    h = H()
    h.publish("p1-1")
    h.publish("p1-2")
    first = h.deliver("p1-1")
    h.deliver("p1-2")
    ack = h.settle("p1-1")
    proof = h.settle("p1-2")
    dup = h.deliver("p1-1", "c2", redelivered=True)
    h.drain()
    r = queue.check(h.ops)
    assert r.verdict == "fail" and kinds(r) == ["duplicate-after-ack"]
    assert r.anomalies[0].ops == [first, ack, proof, dup]
    assert "later op of the same consumer succeeded" in r.anomalies[0].text


def test_queue_on_a_cluster_an_ack_around_a_node_fault_is_not_proven_by_its_channel() -> None:
    """The consumer's channel had the ack, the quorum queue's leader on another node did not (the
    link was cut just after it was sent): with ack_in_flight_s the duplicate is counted, not an
    anomaly; an ack long before the fault, and every ack without the option, still proves it."""
    h = H()
    for n in range(1, 5):
        h.publish(f"p1-{n}")
    early = h.deliver("p1-1")
    early_ack = h.settle("p1-1")
    h.deliver("p1-2")
    h.settle("p1-2")  # proves p1-1's ack
    h.deliver("p1-3")
    h.settle("p1-3")  # sent just before the cut
    h.op("nemesis", "invoke", "fault", kind="partition", target="cluster", detail="scheduled")
    h.op("nemesis", "ok", "fault", kind="partition", target="cluster", detail="isolated n1")
    h.deliver("p1-4")
    h.settle("p1-4")  # proves p1-3's; itself sent during the partition
    h.settle("p1-4", f="cancel")
    h.op("nemesis", "invoke", "heal", kind="partition", target="cluster", detail="scheduled")
    h.op("nemesis", "ok", "heal", kind="partition", target="cluster", detail="whole")
    for mid in ("p1-1", "p1-3", "p1-4"):
        h.deliver(mid, "c2", redelivered=True)
    h.drain()
    for op in h.ops:  # a clock: 10 ms a step; the first ack 5 s before the fault
        op["time_ns"] = op["index"] * 10_000_000 + (0 if op["index"] <= early_ack + 2 else 5_000_000_000)
    plain = queue.check(h.ops)
    assert kinds(plain) == ["duplicate-after-ack"] * 3
    r = queue.check(h.ops, CheckOptions(ack_in_flight_s=1.0))
    assert kinds(r) == ["duplicate-after-ack"] and r.anomalies[0].ops[0] == early, r.anomalies
    assert r.counts["duplicates_after_ack_in_fault"] == 2 and r.counts["duplicates_after_ack"] == 3
    assert "duplicates_after_ack_in_fault" not in plain.counts


def test_queue_an_ack_whose_follower_failed_proves_nothing() -> None:
    h = H()
    h.publish("p1-1")
    h.publish("p1-2")
    h.deliver("p1-1")
    h.deliver("p1-2")
    h.settle("p1-1")
    h.settle("p1-2", outcome="unknown")               # the connection went with it
    h.settle("p1-2", outcome="ok")                    # (a retry on the new channel)
    h.deliver("p1-1", "c2", redelivered=True)
    h.drain()
    assert queue.check(h.ops).verdict == "pass"


# --- redelivery -----------------------------------------------------------------------------------

def test_redelivery_passes_flagged_redeliveries_with_growing_counts() -> None:
    h = H()
    h.publish("p1-1")
    h.deliver("p1-1", redelivered=True, count=1)      # a first delivery seen may be flagged
    h.settle("p1-1", f="nack")
    h.deliver("p1-1", "c2", redelivered=True, count=2)
    r = redelivery.check(h.ops, ORDERED)
    assert r.verdict == "pass" and r.counts["flagged_first_deliveries"] == 1 and r.counts["repeat_deliveries"] == 1


def test_redelivery_fails_a_repeat_delivery_not_flagged() -> None:
    h = H()
    h.publish("p1-1")
    first = h.deliver("p1-1")
    again = h.deliver("p1-1", "c2")
    r = redelivery.check(h.ops)
    assert r.verdict == "fail" and kinds(r) == ["redelivered-flag-missing"] and r.anomalies[0].ops == [first, again]


def test_redelivery_fails_a_delivery_count_going_down_and_with_requeue_counts_one_standing_still() -> None:
    h = H()
    h.publish("p1-1")
    h.publish("p1-2")
    high = h.deliver("p1-1", count=2)
    low = h.deliver("p1-1", redelivered=True, count=1)
    h.deliver("p1-2", count=0)
    still = h.deliver("p1-2", redelivered=True, count=0)
    assert kinds(redelivery.check(h.ops)) == ["delivery-count-decreased"]
    r = redelivery.check(h.ops, ORDERED)
    assert kinds(r) == ["delivery-count-decreased", "delivery-count-not-grown"]
    assert r.anomalies[0].ops == [high, low] and r.anomalies[1].ops == [still - 1, still]


def test_redelivery_counts_absent_are_not_judged_and_no_delivery_is_unknown() -> None:
    h = H()
    h.publish("p1-1")
    h.deliver("p1-1")
    h.deliver("p1-1", redelivered=True)
    assert redelivery.check(h.ops, ORDERED).verdict == "pass"
    assert redelivery.check(H().ops).verdict == "unknown"


# --- order ----------------------------------------------------------------------------------------

def test_order_passes_each_consumer_seeing_each_producer_in_seq_order() -> None:
    h = H()
    for mid in ("p1-1", "p1-2", "p1-3", "p2-1", "p2-2"):
        h.publish(mid)
    h.deliver("p1-1", "c1")
    h.deliver("p2-2", "c2")
    h.deliver("p1-3", "c1")
    h.deliver("p1-2", "c2")       # c2's first of p1: order is per consumer
    h.deliver("p2-1", "c1")       # c1's first of p2
    h.deliver("p1-1", "c2", redelivered=True)   # a redelivery: not a first delivery
    r = order.check(h.ops, ORDERED)
    assert r.verdict == "pass" and r.counts["first_deliveries"] == 5


def test_order_fails_a_first_delivery_of_a_lower_seq_and_cites_both() -> None:
    h = H()
    for mid in ("p1-1", "p1-2"):
        h.publish(mid)
    later = h.deliver("p1-2")
    earlier = h.deliver("p1-1")
    r = order.check(h.ops, ORDERED)
    assert r.verdict == "fail" and kinds(r) == ["out-of-order"] and r.anomalies[0].ops == [later, earlier]
    assert "p1-1 (seq 1" in r.anomalies[0].text and "after p1-2 (seq 2" in r.anomalies[0].text


def test_order_skips_a_redelivered_first_delivery_and_is_not_judged_unless_ordered() -> None:
    h = H()
    for mid in ("p1-1", "p1-2"):
        h.publish(mid)
    h.deliver("p1-2")
    h.deliver("p1-1", redelivered=True)
    r = order.check(h.ops, ORDERED)
    assert r.verdict == "pass" and r.counts["skipped_redelivered"] == 1
    h.deliver("p1-1", "c1")       # unflagged but not a first delivery: the redelivery checker's
    assert order.check(h.ops, ORDERED).verdict == "pass"
    h2 = H()
    h2.publish("p1-1")
    h2.publish("p1-2")
    h2.deliver("p1-2")
    h2.deliver("p1-1")
    r = order.check(h2.ops, CheckOptions())
    assert r.verdict == "unknown" and "ordered is off" in r.note and not r.anomalies


# --- tx -------------------------------------------------------------------------------------------

def _txn(h: H, txn: str, ids: list[str], outcome: str | None = "ok", f: str = "commit") -> int:
    for mid in ids:
        h.publish(mid, mode="tx", txn=txn)
    return h.end_txn(mid.split("-")[0], txn, ids, outcome, f) if outcome is not False else -1


def test_tx_passes_all_of_a_commit_none_of_a_rollback_and_an_unknown_commit_either_way() -> None:
    h = H()
    _txn(h, "p1-t0", ["p1-1", "p1-2"])
    _txn(h, "p1-t1", ["p1-3", "p1-4"], f="rollback")
    _txn(h, "p1-t2", ["p1-5", "p1-6"], outcome="unknown")
    _txn(h, "p1-t3", ["p1-7", "p1-8"], outcome="unknown")
    for mid in ("p1-1", "p1-2", "p1-5", "p1-6"):
        h.deliver(mid)
    h.drain()
    r = tx.check(h.ops)
    assert r.verdict == "pass", r.anomalies
    assert (r.counts["committed_all"], r.counts["rolled_back"], r.counts["unknown_all"], r.counts["unknown_none"]) == (1, 1, 1, 1)


def test_tx_fails_part_of_a_committed_and_part_of_an_unknown_commit_delivered() -> None:
    h = H()
    commit = _txn(h, "p1-t0", ["p1-1", "p1-2", "p1-3"])
    unknown = _txn(h, "p1-t1", ["p1-4", "p1-5"], outcome="unknown")
    d1 = h.deliver("p1-1")
    d2 = h.deliver("p1-3")
    h.deliver("p1-5")
    drained = h.drain()
    r = tx.check(h.ops)
    assert r.verdict == "fail" and kinds(r) == ["partial-commit", "partial-commit"]
    assert r.anomalies[0].ops == [commit, d1, d2, drained] and unknown in r.anomalies[1].ops
    assert "Actual: 2 delivered (p1-1, p1-3), 1 never (p1-2)" in r.anomalies[0].text


def test_tx_part_of_a_commit_without_a_completed_drain_is_unknown() -> None:
    h = H()
    _txn(h, "p1-t0", ["p1-1", "p1-2"])
    h.deliver("p1-1")
    r = tx.check(h.ops)
    assert r.verdict == "unknown" and "no drain op completed" in r.note


@pytest.mark.parametrize("outcome, f, kind", [
    ("ok", "rollback", "delivered-though-rolled-back"),
    ("fail", "commit", "delivered-though-commit-failed"),
    (False, "commit", "delivered-though-never-committed"),
])
def test_tx_fails_any_delivery_of_a_transaction_not_committed(outcome, f, kind) -> None:
    h = H()
    end = _txn(h, "p1-t0", ["p1-1", "p1-2"], outcome, f)
    d = h.deliver("p1-2")
    r = tx.check(h.ops)           # no drain needed: it shows whenever it happens
    assert r.verdict == "fail" and kinds(r) == [kind]
    assert d in r.anomalies[0].ops and (end in r.anomalies[0].ops or end == -1)


# --- results, cap, history files ------------------------------------------------------------------

def test_options_from_a_soak_json_and_run_all_leaves_the_collector_as_it_was() -> None:
    assert CheckOptions.from_dict({"ordered": True, "seconds": 60}) == CheckOptions(ordered=True)
    assert CheckOptions.from_dict(None) == CheckOptions()
    assert gc.isenabled()
    run_all(H().ops)
    assert gc.isenabled()
    gc.disable()
    try:
        run_all(H().ops)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_anomalies_are_capped_but_counted_in_full() -> None:
    h = H()
    for n in range(1, 6):
        h.publish(f"p1-{n}")
    h.drain()
    r = queue.check(h.ops, CheckOptions(max_anomalies=2))
    assert len(r.anomalies) == 2 and r.counts["lost"] == 5 and r.counts["anomalies"] == 5
    assert json.loads(json.dumps(r.to_dict()))["anomalies"][0]["kind"] == "lost"


def test_history_writer_is_one_order_across_threads_and_reads_back(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    with HistoryWriter(path) as w:
        def produce(name: str) -> None:
            for seq in range(200):
                value = {"id": f"{name}-{seq}", "producer": name, "seq": seq, "mode": "plain"}
                w.record(name, "invoke", "publish", value)
                w.record(name, "ok", "publish", value)
        threads = [threading.Thread(target=produce, args=(f"p{i}",)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert w.record("drain", "invoke", "drain", {"consumer": "drain"}) == 1600
    ops = read_history(path)
    assert len(ops) == 1601 and not problems(ops)
    assert all(a["time_ns"] <= b["time_ns"] for a, b in itertools.pairwise(ops))
    with pytest.raises(ValueError, match="closed"):
        w.record("drain", "ok", "drain", {})


def test_history_shape_is_checked_on_write_and_read(tmp_path: Path) -> None:
    with HistoryWriter(tmp_path / "h.jsonl") as w:
        with pytest.raises(ValueError, match="observation"):
            w.record("c1", "invoke", "deliver", {"id": "p1-1"})
        with pytest.raises(ValueError, match="f 'send'"):
            w.record("p1", "ok", "send", {})
        assert len(w) == 0
    with pytest.raises(ValueError, match="missing"):
        Op.from_dict({"index": 0, "time_ns": 0, "process": "p1", "type": "ok", "f": "publish"})
    assert problems([make_op(1, "p1", "ok", "heal")]) == ["op at line 1: index 1, expected 0"]
    torn = tmp_path / "torn.jsonl"
    torn.write_text('{"index": 0}\n{"index": 1, "ti\n')
    with pytest.raises(ValueError, match="torn.jsonl:2"):
        read_history(torn)
    ops = healthy_history(3, 500)
    write_history(tmp_path / "w.jsonl", ops)
    assert read_history(tmp_path / "w.jsonl") == ops


# --- generated histories --------------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(12))
def test_a_healthy_model_broker_history_passes_every_checker(seed: int) -> None:
    """Producers in every mode, consumers acking and nacking, cuts (acks lost with their
    connection, unknown confirms and commits), redeliveries after a cut, and the drain."""
    ops = healthy_history(seed, 6_000, fault_every=150 + 50 * seed, with_delivery_count=seed % 3 != 0)
    assert not problems(ops)
    results = run_all(ops, ORDERED)
    assert set(results) == set(CHECKERS)
    for name, r in results.items():
        assert r.verdict == "pass", (name, r.anomalies[:3], r.note)
    counts = results["queue"].counts
    # the history exercises what the checkers allow, not only the easy path
    assert counts["duplicates_after_ack"] > 0 and counts["duplicates"] > counts["duplicates_after_ack"]
    assert counts["unknown_delivered"] + counts["commit_unknown_delivered"] > 0
    assert counts["unknown_not_delivered"] + counts["commit_unknown_not_delivered"] > 0
    assert results["tx"].counts["rolled_back"] > 0 and results["redelivery"].counts["flagged_redelivered"] > 0


@pytest.fixture(scope="module")
def healthy() -> list[dict[str, Any]]:
    return healthy_history(11, 40_000)


def test_losing_one_in_a_thousand_confirmed_messages_is_found_each_one(healthy) -> None:
    confirmed = sum(1 for op in healthy if op["f"] == "publish" and op["type"] == "ok" and op["value"]["mode"] == "confirm")
    assert confirmed >= 2000
    mutated = lose_confirmed(healthy, seed=1, rate=0.001)
    assert not problems(mutated)
    results = run_all(mutated, ORDERED)
    lost = round(confirmed * 0.001)
    assert results["queue"].verdict == "fail" and results["queue"].counts["lost"] == lost >= 2
    assert set(kinds(results["queue"])) == {"lost"}
    assert all(results[n].verdict == "pass" for n in ("redelivery", "order", "tx"))


def test_a_duplicate_delivery_of_acked_messages_after_failover_is_found(healthy) -> None:
    mutated = duplicate_after_failover(healthy, seed=2, count=3)
    assert len(mutated) == len(healthy) + 3 and not problems(mutated)
    results = run_all(mutated, ORDERED)
    q = results["queue"]
    assert q.verdict == "fail" and kinds(q) == ["duplicate-after-ack"] * 3
    heal = max(i for i, op in enumerate(mutated[: q.anomalies[0].ops[-1]]) if op["f"] == "heal")
    assert all(a.ops[-1] > heal for a in q.anomalies)    # the duplicates come after a failover
    # the duplicates carry the right flag and count: only the queue checker can see them
    assert all(results[n].verdict == "pass" for n in ("redelivery", "order", "tx"))


def test_breaking_a_committed_transactions_atomicity_is_found(healthy) -> None:
    mutated = break_atomicity(healthy, seed=3)
    results = run_all(mutated, ORDERED)
    assert results["tx"].verdict == "fail" and kinds(results["tx"]) == ["partial-commit"]
    # the undelivered part is a loss of committed messages too
    assert results["queue"].verdict == "fail" and set(kinds(results["queue"])) == {"lost"}


@pytest.mark.parametrize("seed", range(5))
def test_every_mutation_is_found_by_its_checker_on_any_seed(seed: int) -> None:
    ops = healthy_history(100 + seed, 8_000)
    for name, (mutate, checker, kind) in MUTATIONS.items():
        result = CHECKERS[checker](mutate(ops, seed=seed), ORDERED)
        assert result.verdict == "fail" and kind in kinds(result), name


def test_mutations_are_pure_and_seeded(healthy) -> None:
    before = json.dumps(healthy)
    for mutate, _, _ in MUTATIONS.values():
        assert mutate(healthy, seed=7) == mutate(healthy, seed=7)
    assert json.dumps(healthy) == before
    assert lose_confirmed(healthy, seed=1, rate=0.01) != lose_confirmed(healthy, seed=2, rate=0.01)
