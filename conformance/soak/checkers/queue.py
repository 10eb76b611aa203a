"""Queue: nothing the broker took responsibility for is lost, nothing is made up, nothing refused
is delivered; duplicates counted, and flagged only after an acknowledgement the broker surely had.

The broker took responsibility for a confirmed publish (publish ok in confirm mode) and for every
publish of a committed transaction (commit ok, its ``ids``): each must be delivered at least once
(any consumer, the drain included). A publish whose outcome is unknown (unknown, or no outcome
recorded at all) and the ids of a commit whose outcome is unknown may go either way: counted as
delivered or not. A plain publish (no confirm) may be lost: counted, never an anomaly. A refused
publish (publish fail: nacked) must not be delivered. A delivered id no publish was invoked for is
an anomaly (unexpected). Transactions that rolled back or failed are the tx checker's.

Duplicates: every delivery of an id beyond its first is counted (``duplicates``: at-least-once
allows them), and apart those after an ack ok of that id (``duplicates_after_ack``). An AMQP 0-9-1
ack is not confirmed: one sent just before the connection was lost may never have reached the
broker, which then redelivers rightly. So a duplicate is an anomaly only after an ack that a later
successful ack, nack or cancel of the same consumer followed before that consumer's subscription
ended (its next consume invoke, or any fail or unknown op of it): the channel carried both and the
broker answered or took the later one, so it had the ack first. On a cluster
(``ack_in_flight_s`` > 0) the channel and the queue's leader may be on two nodes: an ack sent while a
node fault was in progress (from the nemesis's fault invoke to its heal ok), or within
``ack_in_flight_s`` before it began, may have reached the consumer's node and not the leader, so a
duplicate after it is counted (``duplicates_after_ack_in_fault``), not an anomaly.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from conformance.soak.checkers.base import DEFAULT, NO_DRAIN, CheckOptions, CheckResult, Findings, consumer_of, drain_completed

NAME = "queue"
KINDS = ("lost", "unexpected", "delivered-though-refused", "duplicate-after-ack")
#: Publishes counted as delivered / not delivered, by what the broker promised about them.
TALLIES = ("confirmed", "committed", "plain", "unknown", "commit_unknown", "refused")


def check(ops: list[dict[str, Any]], options: CheckOptions | None = None) -> CheckResult:
    options = options or DEFAULT
    invoked: dict[str, tuple[int, str | None]] = {}   # id -> (publish invoke index, mode)
    outcome: dict[str, tuple[str, int]] = {}          # id -> (publish completion type, index)
    commits: dict[str, tuple[str, int, list[str]]] = {}  # txn -> (commit completion type, index, ids)
    delivered: dict[str, int] = {}                    # id -> its first delivery
    again: dict[str, list[int]] = {}                  # id -> its later deliveries (few: no list per id)
    first_ack: dict[str, int] = {}                    # id -> its first ack ok
    proven: dict[str, tuple[int, int]] = {}           # id -> (ack ok, the later op of its consumer that proves it)
    pending: dict[str, list[tuple[str, int]]] = defaultdict(list)  # consumer -> acks ok not yet proven
    ack_sent: dict[tuple[str, str], int] = {}         # (consumer, id) -> time of its ack invoke (ack_in_flight_s only)
    sent_at: dict[int, int] = {}                       # ack ok index -> time its ack was sent (ack_in_flight_s only)
    faults: list[list[int]] = []                       # [fault invoke time, heal ok time] (ack_in_flight_s only)
    watch = options.ack_in_flight_s > 0
    for op in ops:
        f, t, v, i = op["f"], op["type"], op["value"], op["index"]
        if watch and op["process"] == "nemesis" and v.get("kind") != "whole":
            if f == "fault" and t == "invoke":
                faults.append([op["time_ns"], -1])
            elif f == "heal" and t in ("ok", "fail") and faults and faults[-1][1] < 0:
                faults[-1][1] = op["time_ns"]
            continue
        if f == "deliver":
            mid = v["id"]
            if mid in delivered:
                again.setdefault(mid, []).append(i)
            else:
                delivered[mid] = i
        elif f == "publish":
            if t == "invoke":
                invoked[v["id"]] = (i, v.get("mode"))
            else:
                outcome[v["id"]] = (t, i)
        elif f in ("ack", "nack", "cancel", "consume"):
            consumer = consumer_of(op)
            if t == "ok":
                if f != "consume" and pending[consumer]:
                    for aid, ai in pending[consumer]:
                        proven.setdefault(aid, (ai, i))
                    pending[consumer].clear()
                if f == "ack":
                    first_ack.setdefault(v["id"], i)
                    pending[consumer].append((v["id"], i))
                    if watch:
                        sent_at[i] = ack_sent.pop((consumer, v["id"]), op["time_ns"])
            elif watch and t == "invoke" and f == "ack":
                ack_sent[(consumer, v["id"])] = op["time_ns"]
            elif t != "invoke" or f == "consume":
                pending[consumer].clear()
        elif f == "commit" and t != "invoke":
            commits[v["txn"]] = (t, i, list(v.get("ids") or ()))
    drained = drain_completed(ops)
    found = Findings(options.max_anomalies)
    counts = dict.fromkeys(KINDS, 0)
    counts.update(published=len(invoked), deliveries=len(delivered) + sum(map(len, again.values())), delivered_ids=len(delivered),
                  duplicates=0, duplicates_after_ack=0, **({"duplicates_after_ack_in_fault": 0} if watch else {}))
    slack = int(options.ack_in_flight_s * 1e9)

    def in_fault(sent: int) -> bool:
        """The ack was sent while a node fault was in progress, or just before one began."""
        return any(start - slack <= sent and (end < 0 or sent <= end) for start, end in faults)
    for name in TALLIES:
        counts[f"{name}_delivered"] = counts[f"{name}_not_delivered"] = 0

    committed: dict[str, int] = {}   # id -> commit ok index
    in_doubt: dict[str, int] = {}    # id -> commit unknown index
    for t, ci, ids in commits.values():
        target = committed if t == "ok" else in_doubt if t == "unknown" else None
        if target is not None:
            for mid in ids:
                target[mid] = ci

    keys = {name: (f"{name}_not_delivered", f"{name}_delivered") for name in TALLIES}

    def tally(name: str, was_delivered: bool) -> None:
        counts[keys[name][was_delivered]] += 1

    for mid, (ii, mode) in invoked.items():
        was = mid in delivered
        out_type, oi = outcome.get(mid, ("unknown", ii))
        if mode == "tx":
            if mid in committed:
                tally("committed", was)
                if not was and drained is not None:
                    found.add("lost", f"Expected: {mid}, published in a transaction whose commit was ok (op {committed[mid]}), "
                              f"delivered at least once by the end of the drain (op {drained}); Actual: never delivered",
                              [ii, committed[mid], drained])
            elif mid in in_doubt:
                tally("commit_unknown", was)
            continue
        if out_type == "unknown":
            tally("unknown", was)
        elif out_type == "fail":
            tally("refused", was)
            if was:
                found.add("delivered-though-refused", f"Expected: {mid} not delivered, its publish was refused (op {oi}); "
                          f"Actual: delivered (op {delivered[mid]})", [oi, delivered[mid]])
        elif mode == "confirm":
            tally("confirmed", was)
            if not was and drained is not None:
                found.add("lost", f"Expected: {mid}, confirmed (op {oi}), delivered at least once by the end of the drain "
                          f"(op {drained}); Actual: never delivered", [ii, oi, drained])
        else:
            tally("plain", was)

    for mid, first in delivered.items():
        if mid not in invoked:
            found.add("unexpected", f"Expected: only published ids delivered; Actual: {mid} delivered (op {first}) "
                      f"but no publish of it was invoked", [first, *again.get(mid, ())[:2]])
    for mid, later in again.items():
        counts["duplicates"] += len(later)
        ai = first_ack.get(mid)
        if ai is None:
            continue
        counts["duplicates_after_ack"] += sum(1 for d in later if d > ai)
        if mid in proven:
            pa, proof = proven[mid]
            if watch and in_fault(sent_at.get(pa, 0)):
                counts["duplicates_after_ack_in_fault"] += sum(1 for d in later if d > pa)
                continue
            for d in (d for d in later if d > pa):
                found.add("duplicate-after-ack", f"Expected: {mid} not delivered again after its ack (op {pa}), which the broker "
                          f"had: a later op of the same consumer succeeded (op {proof}); Actual: delivered again (op {d})",
                          [delivered[mid], pa, proof, d])
    return found.result(NAME, counts, undecided="" if drained is not None else NO_DRAIN)
