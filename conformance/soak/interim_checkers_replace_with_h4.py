"""INTERIM, TO BE REPLACED: two small checkers with the shared checker API
(``run_all(ops, options) -> dict[str, CheckResult]``), used only while conformance.soak.checkers
(written on another branch) is not in this tree. Delete this file once it is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class CheckOptions:
    ordered: bool = False
    requeue_counts: bool = False


@dataclass
class Anomaly:
    kind: str
    text: str
    ops: list[int]


@dataclass
class CheckResult:
    name: str
    verdict: str
    counts: dict[str, int] = field(default_factory=dict)
    anomalies: list[Anomaly] = field(default_factory=list)


def _acknowledged(ops: list[dict[str, Any]]) -> tuple[dict[str, int], dict[str, int]]:
    """Publishes the broker took (id -> op index): confirmed, or written into a committed
    transaction; and publishes of rolled-back transactions."""
    took: dict[str, int] = {}
    txn_ok: dict[str, int] = {}
    rolled: dict[str, int] = {}
    for op in ops:
        v = op.get("value") or {}
        if op["f"] == "publish" and op["type"] == "ok" and v.get("mode") == "confirm":
            took[v["id"]] = op["index"]
        elif op["f"] == "commit" and op["type"] == "ok":
            for i in v.get("ids", []):
                txn_ok[i] = op["index"]
        elif op["f"] == "rollback" and op["type"] == "ok":
            for i in v.get("ids", []):
                rolled[i] = op["index"]
    took.update(txn_ok)
    return took, rolled


def lost(ops: list[dict[str, Any]], options: CheckOptions) -> CheckResult:
    took, _ = _acknowledged(ops)
    delivered = {op["value"]["id"] for op in ops if op["f"] == "deliver"}
    missing = [(i, ix) for i, ix in took.items() if i not in delivered]
    anomalies = [Anomaly("lost", f"Expected: {i} (confirmed or committed at op {ix}) delivered at least once; Actual: never delivered, "
                                 "the drain included", [ix]) for i, ix in missing]
    return CheckResult("lost", "fail" if anomalies else "pass", {"acknowledged": len(took), "lost": len(missing)}, anomalies)


def unexpected(ops: list[dict[str, Any]], options: CheckOptions) -> CheckResult:
    invoked = {op["value"]["id"] for op in ops if op["f"] == "publish" and op["type"] == "invoke"}
    _, rolled = _acknowledged(ops)
    anomalies = []
    for op in ops:
        if op["f"] != "deliver":
            continue
        i = op["value"]["id"]
        if i not in invoked:
            anomalies.append(Anomaly("unexpected", f"Expected: only published messages delivered; Actual: {i} delivered, never published",
                                     [op["index"]]))
        elif i in rolled:
            anomalies.append(Anomaly("rolled-back-delivered", f"Expected: {i} of a rolled-back transaction never delivered; "
                                                              f"Actual: delivered", [rolled[i], op["index"]]))
    deliveries = sum(1 for op in ops if op["f"] == "deliver")
    return CheckResult("unexpected", "fail" if anomalies else "pass", {"deliveries": deliveries, "unexpected": len(anomalies)}, anomalies)


def run_all(ops: list[dict[str, Any]], options: CheckOptions) -> dict[str, CheckResult]:
    return {c.__name__: c(ops, options) for c in (lost, unexpected)}
