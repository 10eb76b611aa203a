"""The redelivery checker on AMQP 1.0 histories (deliveries carry first_acquirer and their link; a
nack names its outcome), and what a profile documents about a soak (conformance.soak.documented):
each rule kept passes, each broken fails citing its ops."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from conformance.soak.checkers import CheckOptions, redelivery, run_all
from conformance.soak.documented import annotate, fault_windows, refusal
from conformance.soak.history import make_op

COUNTED = CheckOptions(redelivery_signal="delivery-count")


class H:
    def __init__(self) -> None:
        self.ops: list[dict[str, Any]] = []

    def op(self, process: str, type: str, f: str, **value: Any) -> int:
        self.ops.append(make_op(len(self.ops), process, type, f, value))
        return len(self.ops) - 1

    def publish(self, mid: str) -> None:
        producer, seq = mid.rsplit("-", 1)
        v = {"id": mid, "producer": producer, "seq": int(seq), "mode": "confirm"}
        self.op(producer, "invoke", "publish", **v)
        self.op(producer, "ok", "publish", **v)

    def deliver(self, mid: str, link: str, count: int = 0, first_acquirer: bool = True) -> int:
        consumer = link.split("#")[0]
        return self.op(consumer, "ok", "deliver", id=mid, consumer=consumer, link=link, redelivered=(not first_acquirer) or count > 0,
                       delivery_count=count, ack_mode="manual", first_acquirer=first_acquirer)

    def settle(self, mid: str, link: str, f: str = "ack", outcome: str | None = None, result: str | None = "ok") -> int:
        consumer = link.split("#")[0]
        v: dict[str, Any] = {"id": mid, "consumer": consumer}
        if f == "nack":
            v.update(requeue=True, outcome=outcome or "released")
        i = self.op(consumer, "invoke", f, **v)
        if result:
            self.op(consumer, result, f, **v)
        return i

    def fault(self, kind: str) -> tuple[int, int]:
        v = {"kind": kind, "target": "t", "detail": ""}
        a = self.op("nemesis", "invoke", "fault", **v)
        self.op("nemesis", "ok", "fault", **v)
        self.op("nemesis", "invoke", "heal", **v)
        return a, self.op("nemesis", "ok", "heal", **v)


def kinds(r: Any) -> list[str]:
    return [a.kind for a in r.anomalies]


def test_a_release_back_to_the_same_link_needs_no_mark() -> None:
    """Messaging 3.4.4: released leaves the message unchanged (delivery-count as it was) and no other
    link acquired it, so first-acquirer may stay true: not the 0-9-1 missing flag."""
    h = H()
    h.publish("p1-1")
    h.deliver("p1-1", "c1#1")
    h.settle("p1-1", "c1#1", "nack", "released")
    h.deliver("p1-1", "c1#1", count=0, first_acquirer=True)
    r = redelivery.check(h.ops)
    assert r.verdict == "pass", r.anomalies
    assert r.counts["repeats_same_link"] == 1 and r.counts["amqp10_deliveries"] == 2


def test_first_acquirer_true_on_another_link_fails() -> None:
    """Messaging 3.2.1: first-acquirer true means no other link acquired the message."""
    h = H()
    h.publish("p1-1")
    a = h.deliver("p1-1", "c1#1")
    h.settle("p1-1", "c1#1", "nack", "released")
    b = h.deliver("p1-1", "c2#1", count=0, first_acquirer=True)
    r = redelivery.check(h.ops)
    assert kinds(r) == ["first-acquirer-on-repeat"] and r.anomalies[0].ops == [a, b]
    assert "3.2.1" in r.anomalies[0].text and "Expected" in r.anomalies[0].text and "Actual" in r.anomalies[0].text
    # the same repeat marked first-acquirer=false passes; so does the 0-9-1 rule not apply to it
    h2 = H()
    h2.publish("p1-1")
    h2.deliver("p1-1", "c1#1")
    h2.settle("p1-1", "c1#1", "nack", "released")
    h2.deliver("p1-1", "c2#1", count=0, first_acquirer=False)
    assert redelivery.check(h2.ops).verdict == "pass"


def test_a_new_link_of_the_same_consumer_is_another_link() -> None:
    h = H()
    h.publish("p1-1")
    h.deliver("p1-1", "c1#1")
    h.settle("p1-1", "c1#1", "nack", "released")
    h.deliver("p1-1", "c1#2", first_acquirer=True)
    assert kinds(redelivery.check(h.ops)) == ["first-acquirer-on-repeat"]


def test_modified_delivery_failed_must_count() -> None:
    """Messaging 3.4.5: modified with delivery-failed MUST increment delivery-count."""
    h = H()
    h.publish("p1-1")
    a = h.deliver("p1-1", "c1#1")
    s = h.settle("p1-1", "c1#1", "nack", "modified")
    b = h.deliver("p1-1", "c1#1", count=0, first_acquirer=True)
    r = redelivery.check(h.ops)
    assert kinds(r) == ["delivery-count-not-grown"] and r.anomalies[0].ops == [a, s, b]
    assert "3.4.5" in r.anomalies[0].text
    ok = H()
    ok.publish("p1-1")
    ok.deliver("p1-1", "c1#1")
    ok.settle("p1-1", "c1#1", "nack", "modified")
    ok.deliver("p1-1", "c1#1", count=1, first_acquirer=True)
    r = redelivery.check(ok.ops)
    assert r.verdict == "pass" and r.counts["repeats_after_modified"] == 1


def test_a_modified_nack_the_broker_may_not_have_had_is_not_judged() -> None:
    """The nack's outcome unknown (the connection went): the link's end may have returned it unchanged."""
    h = H()
    h.publish("p1-1")
    h.deliver("p1-1", "c1#1")
    h.settle("p1-1", "c1#1", "nack", "modified", result="unknown")
    h.deliver("p1-1", "c2#1", count=0, first_acquirer=False)
    assert redelivery.check(h.ops).verdict == "pass"


def test_a_count_grown_after_a_release_is_counted_not_flagged() -> None:
    h = H()
    h.publish("p1-1")
    h.deliver("p1-1", "c1#1")
    h.settle("p1-1", "c1#1", "nack", "released")
    h.deliver("p1-1", "c2#1", count=1, first_acquirer=False)
    r = redelivery.check(h.ops)
    assert r.verdict == "pass" and r.counts["count_grown_after_release"] == 1


def test_the_profile_signal_delivery_count_requires_a_counted_return_after_a_lost_link() -> None:
    """redelivery.signal delivery-count: the broker counts a return it had no outcome for."""
    h = H()
    h.publish("p1-1")
    a = h.deliver("p1-1", "c1#1")
    s = h.settle("p1-1", "c1#1", "ack", result="unknown")      # the connection went with the ack in flight
    b = h.deliver("p1-1", "c2#1", count=0, first_acquirer=False)
    assert redelivery.check(h.ops).verdict == "pass"          # the spec alone: first-acquirer=false is the mark
    r = redelivery.check(h.ops, COUNTED)
    assert kinds(r) == ["delivery-count-not-counted"] and r.anomalies[0].ops == [a, s, b]
    # a release that may have reached the broker leaves the count alone (3.4.4): not judged
    h2 = H()
    h2.publish("p1-1")
    h2.deliver("p1-1", "c1#1")
    h2.settle("p1-1", "c1#1", "nack", "released", result="unknown")
    h2.deliver("p1-1", "c2#1", count=0, first_acquirer=False)
    assert redelivery.check(h2.ops, COUNTED).verdict == "pass"


def test_0_9_1_deliveries_keep_the_flag_rule() -> None:
    h = H()
    h.publish("p1-1")
    for _ in range(2):
        h.op("c1", "ok", "deliver", id="p1-1", consumer="c1", link="c1#1", redelivered=False, delivery_count=None, ack_mode="manual")
    assert kinds(redelivery.check(h.ops)) == ["redelivered-flag-missing"]


def test_options_from_dict_reads_the_signal() -> None:
    assert CheckOptions.from_dict({"redelivery_signal": "delivery-count"}).redelivery_signal == "delivery-count"


# --- what the profile documents -----------------------------------------------------------------

def _entry(requirement: str, observed: str, as_: str) -> Any:
    return SimpleNamespace(requirement=requirement, observed=observed, reason=f"r {as_}", source=f"https://example.org/{as_}",
                           when_target=("no-store",) if as_ == "deviation" else None)


class Profile:
    """A stand-in with the two lookups a Profile offers (conformance.catalogue.profiles.Profile)."""

    id = "stub"

    def __init__(self, deviations: list[Any] = (), known_bugs: list[Any] = ()) -> None:  # type: ignore[assignment]
        self.deviations, self.known_bugs = list(deviations), list(known_bugs)

    def deviation(self, requirement: str, queue_type: str | None, observed: str | None) -> Any:
        return next((d for d in self.deviations if d.requirement == requirement and d.observed == observed), None)

    def known_bug(self, requirement: str, queue_type: str | None, observed: str | None) -> Any:
        return next((d for d in self.known_bugs if d.requirement == requirement and d.observed == observed), None)


def _flag_lost_across(kind: str | None) -> H:
    h = H()
    h.publish("p1-1")
    h.op("c1", "ok", "deliver", id="p1-1", consumer="c1", link="c1#1", redelivered=False, delivery_count=None, ack_mode="manual")
    if kind:
        h.fault(kind)
    h.op("c1", "ok", "deliver", id="p1-1", consumer="c1", link="c1#2", redelivered=False, delivery_count=None, ack_mode="manual")
    return h


def test_an_anomaly_across_a_restart_takes_the_profiles_entry() -> None:
    h = _flag_lost_across("restart")
    assert fault_windows(h.ops) == [(3, 6, "restart")]
    results = run_all(h.ops)
    assert results["redelivery"].verdict == "fail"
    bug = Profile(known_bugs=[_entry("PERSIST-REQUEUED-REDELIVERED", "redelivered-cleared-by-restart", "known-bug")])
    doc = annotate(results, h.ops, bug, "classic")["redelivery"]
    assert doc["verdict"] == "fail" and doc["undocumented"] == 0     # an open bug is a fail, named
    assert doc["entries"][0]["as"] == "known-bug" and doc["entries"][0]["across"] == {"restart": 1}
    assert results["redelivery"].anomalies[0].documented["requirement"] == "PERSIST-REQUEUED-REDELIVERED"
    results = run_all(h.ops)
    dev = Profile(deviations=[_entry("PERSIST-REQUEUED-REDELIVERED", "redelivered-cleared-by-restart", "deviation")])
    doc = annotate(results, h.ops, dev, "classic")["redelivery"]
    assert doc["verdict"] == "deviation" and doc["entries"][0]["anomalies"] == 1
    assert results["redelivery"].counts["redelivered-flag-missing"] == 1  # the counts are kept


def test_an_anomaly_outside_any_broker_fault_stays_undocumented() -> None:
    for kind in (None, "pause"):
        h = _flag_lost_across(kind)
        results = run_all(h.ops)
        dev = Profile(deviations=[_entry("PERSIST-REQUEUED-REDELIVERED", "redelivered-cleared-by-restart", "deviation")])
        doc = annotate(results, h.ops, dev, "classic")["redelivery"]
        assert doc == {"verdict": "fail", "undocumented": 1, "entries": []}


def test_a_fault_that_takes_the_soaks_queue_is_refused_citing_the_entry() -> None:
    gone = Profile(deviations=[_entry("PERSIST-DECLARED-QUEUE-SURVIVES-KILL", "queue-gone-after-restart", "deviation"),
                               _entry("PERSIST-CONFIRMED-SURVIVES", "queue-gone-after-restart", "deviation")])
    why = refusal(["pause", "kill"], gone, "classic", "qpidd-process", {"kill": "qpidd-process has no store"})
    assert why is not None and "\n" not in why
    assert "--nemesis kill" in why and "PERSIST-DECLARED-QUEUE-SURVIVES-KILL" in why and "no-store" in why and "https://example.org/deviation" in why
    assert "PERSIST-CONFIRMED-SURVIVES" in (refusal(["restart"], gone, "classic", "q") or "")
    assert refusal(["pause", "cut"], gone, "classic", "q") is None
    assert refusal(["kill", "restart"], Profile(), "classic", "q") is None
