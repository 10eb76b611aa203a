"""Redelivery: a message delivered before is marked as such when delivered again.

A delivery with redelivered=false of an id an earlier deliver op already delivered is an anomaly
(the flag says "may have been delivered before": false promises it was not). Where deliveries carry
a delivery count (x-delivery-count, AMQP 1.0's header delivery-count), a count lower than an
earlier count of the same id is an anomaly; with ``options.requeue_counts`` an equal one is too
(the count must grow on every redelivery). A first delivery flagged redelivered is allowed (the
broker may have delivered it to a consumer whose connection was lost before it arrived): counted.
"""

from __future__ import annotations

from typing import Any

from conformance.soak.checkers.base import DEFAULT, CheckOptions, CheckResult, Findings

NAME = "redelivery"
KINDS = ("redelivered-flag-missing", "delivery-count-decreased", "delivery-count-not-grown")


def check(ops: list[dict[str, Any]], options: CheckOptions | None = None) -> CheckResult:
    options = options or DEFAULT
    first: dict[str, int] = {}                   # id -> its first delivery
    highest: dict[str, tuple[int, int]] = {}     # id -> (highest delivery count so far, its delivery)
    found = Findings(options.max_anomalies)
    counts = dict.fromkeys(KINDS, 0)
    counts.update(deliveries=0, repeat_deliveries=0, flagged_redelivered=0, flagged_first_deliveries=0, with_delivery_count=0)
    for op in ops:
        if op["f"] != "deliver":
            continue
        v, i = op["value"], op["index"]
        mid = v["id"]
        flagged = bool(v.get("redelivered"))
        counts["deliveries"] += 1
        counts["flagged_redelivered"] += flagged
        if mid in first:
            counts["repeat_deliveries"] += 1
            if not flagged:
                found.add("redelivered-flag-missing", f"Expected: {mid}, delivered before (op {first[mid]}), delivered again "
                          f"with redelivered=true; Actual: redelivered=false (op {i})", [first[mid], i])
        else:
            first[mid] = i
            counts["flagged_first_deliveries"] += flagged
        count = v.get("delivery_count")
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
