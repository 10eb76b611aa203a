"""Redelivery: a message delivered before is marked as such when delivered again, by the rules of
the protocol it was delivered over.

AMQP 0-9-1 (a deliver op without ``first_acquirer``): a delivery with redelivered=false of an id an
earlier deliver op already delivered is an anomaly (the flag says "may have been delivered before":
false promises it was not).

AMQP 1.0 (a deliver op with ``first_acquirer``, the header field only 1.0 has) has no such flag; its
header binds two fields unequally (messaging 3.2.1, conformance.kit.redelivery):

- first-acquirer: "If this value is true, then this message has not been acquired by any other
  link". A repeat delivery with first_acquirer=true of an id an earlier deliver op gave to another
  link (``link``: the subscription it came on) is an anomaly (``first-acquirer-on-repeat``, the 1.0
  form of a missing flag). A repeat on the very link that returned it is not: released leaves the
  message "unchanged at the node" (3.4.4) and no other link acquired it.
- delivery-count: "incremented upon an outcome being settled at the sender, according to rules
  defined for each outcome". After a nack the broker had (nack ok) with the modified outcome and
  delivery-failed (3.4.5: "any messages modified MUST have their delivery-count incremented") the
  next delivery of the id must count more than the one nacked: an equal or lower count is
  ``delivery-count-not-grown``. After a release (3.4.4: "MUST NOT be incremented") a grown count is
  counted, not flagged: a delivery the history never saw (prefetched by a client whose connection
  went) may have counted in between.
- the profile's ``redelivery.signal`` (``options.redelivery_signal``) delivery-count: the broker
  documents that it counts a return it did not get an outcome for (the holding link ended). A
  repeat whose earlier delivery's settlement was never known to reach the broker (its ack or nack
  unknown, or none recorded) must count more than that delivery: else ``delivery-count-not-counted``
  (the vendor's promise, not the spec's).

Either protocol, where deliveries carry a delivery count (x-delivery-count, AMQP 1.0's header
delivery-count): a count lower than an earlier count of the same id is an anomaly; with
``options.requeue_counts`` an equal one is too (the count must grow on every redelivery). A first
delivery flagged redelivered (or counted, or not first-acquirer) is allowed: the broker may have
delivered it to a consumer whose connection was lost before it arrived; counted.
"""

from __future__ import annotations

from collections import defaultdict, deque
from typing import Any

from conformance.soak.checkers.base import DEFAULT, CheckOptions, CheckResult, Findings, consumer_of

NAME = "redelivery"
KINDS = ("redelivered-flag-missing", "first-acquirer-on-repeat", "delivery-count-decreased", "delivery-count-not-grown",
         "delivery-count-not-counted")
#: The profile's redelivery.signal value that promises a counted return after a link ended.
COUNTED = "delivery-count"


def _settle_outcomes(ops: list[dict[str, Any]], fs: tuple[str, ...]) -> dict[int, str]:
    """Each invoke of ``fs`` (ack, nack)'s index -> the type of its completion (ok, fail, unknown),
    matched per consumer and id in order (a client records its settlements' outcomes in the order it
    sent them)."""
    waiting: dict[tuple[str, str, str], deque[int]] = defaultdict(deque)
    done: dict[int, str] = {}
    for op in ops:
        f = op["f"]
        if f not in fs:
            continue
        key = (f, consumer_of(op), op["value"]["id"])
        if op["type"] == "invoke":
            waiting[key].append(op["index"])
        elif waiting[key]:
            done[waiting[key].popleft()] = op["type"]
    return done


def check(ops: list[dict[str, Any]], options: CheckOptions | None = None) -> CheckResult:
    options = options or DEFAULT
    first: dict[str, int] = {}                   # id -> its first delivery
    first_link: dict[str, str] = {}              # id -> the link of its first delivery
    many_links: set[str] = set()                 # ids delivered on two links or more
    highest: dict[str, tuple[int, int]] = {}     # id -> (highest delivery count so far, its delivery)
    last: dict[str, tuple[int | None, int]] = {}  # id -> (delivery count, index) of its latest delivery
    settled: dict[str, tuple[str, str, int]] = {}  # id -> (f, outcome, invoke index) of its latest settlement
    # only a nack's outcome decides a 1.0 count rule, and an ack's only under the delivery-count signal
    settles = ("ack", "nack") if options.redelivery_signal == COUNTED else ("nack",)
    outcomes = _settle_outcomes(ops, settles)
    found = Findings(options.max_anomalies)
    counts = dict.fromkeys(KINDS, 0)
    counts.update(deliveries=0, repeat_deliveries=0, flagged_redelivered=0, flagged_first_deliveries=0, with_delivery_count=0,
                  amqp10_deliveries=0, repeats_same_link=0, repeats_after_modified=0, count_grown_after_release=0)
    for op in ops:
        f = op["f"]
        if f in ("ack", "nack"):
            if op["type"] == "invoke" and f in settles:
                v = op["value"]
                settled[v["id"]] = (f, v.get("outcome") or ("accepted" if f == "ack" else "released"), op["index"])
            continue
        if f != "deliver":
            continue
        v, i = op["value"], op["index"]
        mid = v["id"]
        amqp10 = "first_acquirer" in v
        link = v.get("link") or consumer_of(op)
        flagged = (v["first_acquirer"] is False or bool(v.get("delivery_count"))) if amqp10 else bool(v.get("redelivered"))
        counts["deliveries"] += 1
        counts["amqp10_deliveries"] += amqp10
        counts["flagged_redelivered"] += flagged
        count = v.get("delivery_count")
        if mid in first:
            counts["repeat_deliveries"] += 1
            other_link = mid in many_links or first_link[mid] != link
            counts["repeats_same_link"] += not other_link
            if not amqp10:
                if not flagged:
                    found.add("redelivered-flag-missing", f"Expected: {mid}, delivered before (op {first[mid]}), delivered again "
                              f"with redelivered=true; Actual: redelivered=false (op {i})", [first[mid], i])
            else:
                if other_link and v["first_acquirer"] is True:
                    found.add("first-acquirer-on-repeat", f"Expected: {mid}, acquired before by another link (op {first[mid]}), "
                              f"delivered on {link} with first-acquirer not true (AMQP 1.0 messaging 3.2.1: true means no other "
                              f"link acquired it); Actual: first-acquirer=true (op {i})", [first[mid], i])
                _judge_count(mid, i, count, last.get(mid), settled.get(mid), outcomes, options, found, counts)
            if link != first_link[mid]:
                many_links.add(mid)
        else:
            first[mid] = i
            first_link[mid] = link
            counts["flagged_first_deliveries"] += flagged
        if amqp10:
            last[mid] = (count, i)
            settled.pop(mid, None)
        if count is None:
            continue
        counts["with_delivery_count"] += 1
        prev = highest.get(mid)
        if prev is not None:
            if count < prev[0]:
                found.add("delivery-count-decreased", f"Expected: {mid}'s delivery count at least {prev[0]} (op {prev[1]}); "
                          f"Actual: {count} on a later delivery (op {i})", [prev[1], i])
            elif count == prev[0] and options.requeue_counts:
                found.add("delivery-count-not-grown", f"Expected: {mid}'s delivery count above {prev[0]} (op {prev[1]}) "
                          f"on its redelivery; Actual: {count} again (op {i})", [prev[1], i])
        if prev is None or count > prev[0]:
            highest[mid] = (count, i)
    undecided = "" if counts["deliveries"] else "no deliver op in the history: nothing to judge"
    return found.result(NAME, counts, undecided=undecided)


def _judge_count(mid: str, i: int, count: int | None, before: tuple[int | None, int] | None, settled: tuple[str, str, int] | None,
                 outcomes: dict[int, str], options: CheckOptions, found: Findings, counts: dict[str, int]) -> None:
    """An AMQP 1.0 repeat delivery's delivery-count against what became of the delivery before it."""
    if before is None or before[0] is None or count is None:
        return
    was, bi = before
    f, outcome, si = settled if settled is not None else ("", "", -1)
    known = outcomes.get(si) == "ok"   # the broker had the settlement: a later op of the client proved it
    if f == "nack" and known and outcome == "modified":
        counts["repeats_after_modified"] += 1
        if count == was and not options.requeue_counts:  # a lower count is delivery-count-decreased; requeue_counts flags an equal one
            found.add("delivery-count-not-grown", f"Expected: {mid}'s delivery-count above {was} (op {bi}), nacked with the "
                      f"modified outcome, delivery-failed (op {si}; AMQP 1.0 messaging 3.4.5: MUST be incremented); "
                      f"Actual: {count} (op {i})", [bi, si, i])
    elif f == "nack" and known and outcome == "released":
        counts["count_grown_after_release"] += count > was
    elif options.redelivery_signal == COUNTED and not known and not (f == "nack" and outcome == "released") and count <= was:
        # a release that may have reached the broker leaves the count as it was (3.4.4): not judged
        what = f"its {f} ({outcome}, op {si}) never known to reach the broker" if f else "never settled"
        found.add("delivery-count-not-counted", f"Expected: {mid}'s delivery-count above {was} (op {bi}, {what}): the "
                  f"profile's redelivery.signal delivery-count says the broker counts a return it got no outcome for; "
                  f"Actual: {count} (op {i})", [bi, *([si] if si >= 0 else []), i])
