"""Transactions: a transaction's publishes are delivered all or none, and none unless committed.

Of a committed transaction (commit ok) either every id of the commit is delivered or none is
(none is a loss, the queue checker's); a part is an anomaly. Of a commit whose outcome is unknown
(unknown, or invoked with no outcome recorded) all or none, the same way. Of a rolled-back
transaction (rollback ok), a failed commit, or a transaction never committed nor rolled back (its
channel closed with it open: the broker discards it) no id may be delivered. Partial delivery is
decidable only once the drain completed; a delivery of what must never be delivered is an anomaly
whenever it shows.
"""

from __future__ import annotations

from typing import Any

from conformance.soak.checkers.base import DEFAULT, NO_DRAIN, CheckOptions, CheckResult, Findings, drain_completed

NAME = "tx"
KINDS = ("partial-commit", "delivered-though-rolled-back", "delivered-though-commit-failed", "delivered-though-never-committed")


def check(ops: list[dict[str, Any]], options: CheckOptions | None = None) -> CheckResult:
    options = options or DEFAULT
    written: dict[str, list[tuple[str, int]]] = {}    # txn -> [(id, publish invoke)] from tx-mode publishes
    commit_invoked: dict[str, int] = {}
    ended: dict[str, tuple[str, str, int, list[str]]] = {}  # txn -> (f, type, index, ids) of its commit/rollback outcome
    delivered: dict[str, int] = {}                    # id -> its first delivery
    for op in ops:
        f, t, v, i = op["f"], op["type"], op["value"], op["index"]
        if f == "deliver":
            delivered.setdefault(v["id"], i)
        elif f == "publish":
            if t == "invoke" and v.get("mode") == "tx" and v.get("txn"):
                written.setdefault(v["txn"], []).append((v["id"], i))
        elif f in ("commit", "rollback"):
            if t == "invoke":
                if f == "commit":
                    commit_invoked[v["txn"]] = i
            elif not (f == "rollback" and t != "ok"):
                ended[v["txn"]] = (f, t, i, list(v.get("ids") or ()))
    drained = drain_completed(ops)
    found = Findings(options.max_anomalies)
    counts = dict.fromkeys(KINDS, 0)
    counts.update(transactions=0, committed_all=0, committed_none=0, unknown_all=0, unknown_none=0,
                  rolled_back=0, commit_failed=0, never_committed=0)
    awaiting_drain = 0
    for txn in {**written, **commit_invoked, **ended}:
        counts["transactions"] += 1
        f, t, ei, ids = ended.get(txn, ("commit", "unknown", commit_invoked.get(txn, -1), []))
        if not ids:
            ids = [mid for mid, _ in written.get(txn, ())]
        got = [mid for mid in ids if mid in delivered]
        if f == "commit" and t in ("ok", "unknown") and (txn in ended or txn in commit_invoked):
            word = "committed" if t == "ok" else "unknown"
            if len(got) == len(ids):
                counts[f"{word}_all"] += 1
            elif not got:
                counts[f"{word}_none"] += 1
            elif drained is None:
                awaiting_drain += 1
            else:
                missing = [mid for mid in ids if mid not in delivered]
                outcome = f"its commit ok at op {ei}" if t == "ok" else f"its commit's outcome unknown at op {ei}"
                found.add("partial-commit", f"Expected: all or none of {txn}'s {len(ids)} messages delivered, "
                          f"{outcome}; Actual: {len(got)} delivered ({', '.join(got[:5])}), {len(missing)} never "
                          f"({', '.join(missing[:5])}) by the end of the drain (op {drained})",
                          [ei, *(delivered[m] for m in got[:5]), drained])
            continue
        if f == "rollback":
            kind, why, key = "delivered-though-rolled-back", f"it was rolled back (op {ei})", "rolled_back"
        elif txn in ended:
            kind, why, key = "delivered-though-commit-failed", f"its commit failed (op {ei})", "commit_failed"
        else:
            first = min(i for _, i in written[txn])
            kind, why, key = "delivered-though-never-committed", "it was never committed", "never_committed"
            ei = first
        counts[key] += 1
        if got:
            found.add(kind, f"Expected: none of {txn}'s messages delivered, {why}; Actual: {len(got)} delivered "
                      f"({', '.join(got[:5])})", [ei, *(delivered[m] for m in got[:5])])
    undecided = NO_DRAIN if awaiting_drain else ""
    return found.result(NAME, counts, undecided=undecided)
