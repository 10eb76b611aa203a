"""Order: on a workload whose broker promises per-producer order (``options.ordered``: one queue),
each consumer sees each producer's messages, first deliveries only, in increasing seq order.

A first delivery is the first deliver op of an id with redelivered=false (a redelivered message
comes back out of order by design: requeued at its place or at the head). For each consumer (the
drain is one) and producer, a first delivery whose seq is lower than that of an earlier first
delivery is an anomaly citing both ops. With ``ordered`` off the workload promises no order and
the verdict is unknown: not judged.
"""

from __future__ import annotations

from typing import Any

from conformance.soak.checkers.base import DEFAULT, CheckOptions, CheckResult, Findings, consumer_of

NAME = "order"
KINDS = ("out-of-order",)


def check(ops: list[dict[str, Any]], options: CheckOptions | None = None) -> CheckResult:
    options = options or DEFAULT
    found = Findings(options.max_anomalies)
    counts = dict.fromkeys(KINDS, 0)
    counts.update(first_deliveries=0, skipped_redelivered=0, unplaced=0)
    if not options.ordered:
        return found.result(NAME, counts, undecided="not judged: options.ordered is off (the workload promises no order)")
    placed: dict[str, tuple[str, int]] = {}       # id -> (producer, seq), from its publish invoke
    seen: set[str] = set()
    last: dict[tuple[str, str], tuple[int, int, str]] = {}   # (consumer, producer) -> (highest seq, its op, id)
    for op in ops:
        f, v = op["f"], op["value"]
        if f == "publish":
            if op["type"] == "invoke":
                placed[v["id"]] = (v.get("producer") or op["process"], v["seq"])
            continue
        if f != "deliver":
            continue
        mid = v["id"]
        if mid in seen:
            continue
        seen.add(mid)
        if v.get("redelivered"):
            counts["skipped_redelivered"] += 1
            continue
        where = placed.get(mid)
        if where is None:
            counts["unplaced"] += 1      # never published: the queue checker's "unexpected"
            continue
        counts["first_deliveries"] += 1
        producer, seq = where
        key = (consumer_of(op), producer)
        prev = last.get(key)
        if prev is not None and seq < prev[0]:
            found.add("out-of-order", f"Expected: {key[0]} sees {producer}'s messages in publish order; Actual: {mid} "
                      f"(seq {seq}, op {op['index']}) after {prev[2]} (seq {prev[0]}, op {prev[1]})", [prev[1], op["index"]])
        elif prev is None or seq > prev[0]:
            last[key] = (seq, op["index"], mid)
    undecided = "" if counts["first_deliveries"] else "no first delivery of a published id: nothing to judge"
    return found.result(NAME, counts, undecided=undecided)
