"""History mutations: what a broker that broke a promise would have recorded, made from a healthy
history. Each is a pure, seeded function ``ops -> ops`` (the input is not changed; the output is
renumbered 0, 1, 2, ...) that the checkers must find: the soak runner's self-check and the report
pipeline reuse them.

- :func:`lose_confirmed`: lose 1 in ``rate`` confirmed messages (the queue checker's ``lost``);
- :func:`duplicate_after_failover`: after a fault heals, deliver again messages whose ack the
  broker had (the queue checker's ``duplicate-after-ack``);
- :func:`break_atomicity`: deliver only part of a committed transaction (the tx checker's
  ``partial-commit``).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from conformance.soak.history import renumber

Ops = list[dict[str, Any]]


def _without(ops: Ops, ids: set[str]) -> Ops:
    """The history with every delivery, ack and nack of ``ids`` taken out (as if never delivered)."""
    return renumber(op for op in ops if not (op["f"] in ("deliver", "ack", "nack") and op["value"].get("id") in ids))


def lose_confirmed(ops: Ops, seed: int = 0, rate: float = 0.001) -> Ops:
    """Lose ``rate`` of the confirmed publishes that were delivered (at least one): none of their
    deliveries happened."""
    delivered = {op["value"]["id"] for op in ops if op["f"] == "deliver"}
    confirmed = sorted(op["value"]["id"] for op in ops
                       if op["f"] == "publish" and op["type"] == "ok" and op["value"].get("mode") == "confirm"
                       and op["value"]["id"] in delivered)
    if not confirmed:
        raise ValueError("no delivered confirmed publish to lose")
    lost = random.Random(seed).sample(confirmed, max(1, round(len(confirmed) * rate)))
    return _without(ops, set(lost))


def duplicate_after_failover(ops: Ops, seed: int = 0, count: int = 3) -> Ops:
    """After a heal (one of those that follow ``count`` settled acks, the seed picks), deliver
    ``count`` of those messages again (redelivered=true, the delivery count one up: every flag
    right, only the duplicate wrong). A settled ack is an ack ok that a later ack or nack ok of the
    same consumer followed with no fault in between: the broker had it."""
    rng = random.Random(seed)
    unsettled: dict[str, str] = {}                  # consumer -> the id of its last ack ok
    settled: list[str] = []
    heals: list[tuple[int, int]] = []               # (index after a heal, how many acks were settled then)
    for op in ops:
        f, v = op["f"], op["value"]
        if f in ("ack", "nack") and op["type"] == "ok":
            consumer = v.get("consumer") or op["process"]
            if consumer in unsettled:
                settled.append(unsettled.pop(consumer))
            if f == "ack":
                unsettled[consumer] = v["id"]
        elif f == "fault":
            unsettled.clear()
        elif f == "heal" and len(settled) >= count:
            heals.append((op["index"] + 1, len(settled)))
    if not heals:
        raise ValueError(f"no heal after {count} settled acks")
    at, n = rng.choice(heals)
    last_delivery: dict[str, dict[str, Any]] = {}
    consumers: set[str] = set()
    for op in ops[:at]:
        if op["f"] == "deliver":
            last_delivery[op["value"]["id"]] = op["value"]
            if op["value"].get("ack_mode") == "manual":
                consumers.add(op["value"]["consumer"])
    inserted = []
    for mid in rng.sample(settled[:n], count):
        prev = last_delivery[mid]
        count_before = prev.get("delivery_count")
        consumer = rng.choice(sorted(consumers))
        inserted.append({"index": -1, "time_ns": ops[at - 1]["time_ns"], "process": consumer, "type": "ok", "f": "deliver",
                         "value": {**prev, "consumer": consumer, "redelivered": True,
                                   "delivery_count": None if count_before is None else count_before + 1}})
    return renumber([*ops[:at], *inserted, *ops[at:]])


def break_atomicity(ops: Ops, seed: int = 0) -> Ops:
    """Of one committed transaction of two or more messages, all delivered, take the deliveries of
    some but not all out."""
    delivered = {op["value"]["id"] for op in ops if op["f"] == "deliver"}
    batches = [op["value"]["ids"] for op in ops
               if op["f"] == "commit" and op["type"] == "ok" and len(op["value"].get("ids") or ()) >= 2
               and all(mid in delivered for mid in op["value"]["ids"])]
    if not batches:
        raise ValueError("no fully delivered committed transaction of two or more messages")
    rng = random.Random(seed)
    ids = rng.choice(batches)
    return _without(ops, set(rng.sample(ids, rng.randint(1, len(ids) - 1))))


#: name -> mutation, and the checker and anomaly kind that must find it.
MUTATIONS: dict[str, tuple[Callable[..., Ops], str, str]] = {
    "lose-confirmed": (lose_confirmed, "queue", "lost"),
    "duplicate-after-failover": (duplicate_after_failover, "queue", "duplicate-after-ack"),
    "break-atomicity": (break_atomicity, "tx", "partial-commit"),
}
