"""The compliance figures, folded from the per-case table that one Spark pass made of the records.

reports.groupings reads every record once, in Spark, into one row per (target column, requirement,
case): however many records went in, that table is cases x targets, small enough to collect. The
figures here fold those rows in plain Python. Why not more Spark aggregations: each is a job of its
own (scheduling, planning, a shuffle), and at a million records the cells, flakiness and case pages
took 4-5 s as Spark jobs over a table that Python folds in milliseconds; the report and the gate
collect the table once instead. tests/reports/test_reports.py checks the figures against a plain reading of
the records themselves.
"""

from __future__ import annotations

from typing import Any

from conformance.runner.judged import JUDGED
from reports.groupings import CELL_KEYS, spark_order
from reports.schema import VERDICTS

#: Verdicts that decide something about the broker; a pass rate counts only these (an ``error`` is
#: the suite or the infrastructure breaking: it neither passes nor fails the broker).
DECIDED = ("pass", "fail")
#: A rank past VERDICTS (a verdict this version does not know) shows as "none".
NAMES = (*VERDICTS, "none")


def case_rows(cases: list[dict[str, Any]], *, latest: bool = True) -> list[dict[str, Any]]:
    """The per-case table (reports.groupings.fold_cases), without each case's latest record when
    ``latest`` is False (the gate does not show it)."""
    return cases if latest else [{k: v for k, v in c.items() if k != "latest"} for c in cases]


def cells(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """target column x requirement: the worst verdict (spec and vendor apart), pass rate, and for the
    report's link the worst case's expected/observed/trace (of its latest attempt with that verdict).

    ``flaky`` is set when one case of the cell both passed and failed over its repetitions (attempts
    of ``--repeat`` or several runs): ``verdict`` stays the worst (scores count it as failing), and
    ``state`` says ``flaky`` so that no output shows such a cell as plainly failing or passing; its
    ``passes``/``decided`` give the rate. Two variants of which one always fails are not flaky."""
    acc: dict[tuple[Any, ...], dict[str, Any]] = {}
    for c in cases:
        a = acc.get(tuple(c[k] for k in CELL_KEYS))
        if a is None:
            a = acc[tuple(c[k] for k in CELL_KEYS)] = {**{k: c[k] for k in CELL_KEYS}, "_v": c["_v"], "_s": c["_s"], "_d": c["_d"],
                                                       "records": 0, "cases": 0, "_runs": set(), "passes": 0, "decided": 0, "flaky": False,
                                                       "_worst": c["worst"]}
        a["_v"], a["_s"], a["_d"] = min(a["_v"], c["_v"]), min(a["_s"], c["_s"]), min(a["_d"], c["_d"])
        a["records"] += c["records"]
        a["cases"] += c["case_id"] is not None
        a["_runs"].update(c["runs"] or ())
        a["passes"] += c["n_pass"]
        a["decided"] += c["n_pass"] + c["n_fail"]
        a["flaky"] = a["flaky"] or (c["n_pass"] > 0 and c["n_fail"] > 0 and c["case_id"] is not None)
        if spark_order(c["worst"]) < spark_order(a["_worst"]):
            a["_worst"] = c["worst"]
    out = []
    for a in acc.values():
        worst = a.pop("_worst") or {}
        verdict = NAMES[min(a.pop("_v"), len(VERDICTS))]
        out.append({**{k: a[k] for k in CELL_KEYS}, "verdict": verdict, "state": "flaky" if a["flaky"] else verdict, "flaky": a["flaky"],
                    "spec_verdict": NAMES[min(a.pop("_s"), len(VERDICTS))], "vendor_verdict": NAMES[min(a.pop("_d"), len(VERDICTS))],
                    "records": a["records"], "cases": a["cases"], "runs": len(a.pop("_runs")), "passes": a["passes"], "decided": a["decided"],
                    "pass_rate": a["passes"] / a["decided"] if a["decided"] else None,
                    **{k: worst.get(k) for k in ("case_id", "expected", "observed", "wire_trace", "reason", "citation", "unsupported_kind")}})
    return out


#: The queue type of a cell whose requirement holds for the whole target (reports.ingest).
NO_QUEUE_TYPE = "-"


def undrawn_columns(cells: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The columns a report does not draw, each with its cell count and one of its cells' reasons.

    A column (a broker's queue type or configuration) is drawn only where some run has a result in
    it: a cell whose verdict is anything but ``unsupported``. Why: every run records each case it
    could not run, so a broker without quorum queues (LavinMQ, qpidd, ActiveMQ) got a quorum column
    of "unsupported: profile has no queue type 'quorum'" and "—", as wide as a real one, in every
    table. Decided from the cells, never from a product's name. The column of a target's requirements
    that hold for any queue type is hidden on the same rule only when none of the target's queue-type
    columns is drawn (otherwise its cells span them, and say what was not run)."""
    by_col: dict[str, list[dict[str, Any]]] = {}
    for c in cells:
        by_col.setdefault(c["column"], []).append(c)
    empty = {col for col, cs in by_col.items() if all(c["verdict"] == "unsupported" for c in cs)}

    def target(col: str) -> tuple[Any, ...]:
        c = by_col[col][0]
        return (c["product"], c["version"], c["protocol"])

    drawn_typed = {target(col) for col in by_col if col not in empty and by_col[col][0]["queue_type"] not in (None, NO_QUEUE_TYPE)}
    out = {}
    for col in sorted(empty):
        first = by_col[col][0]
        if first["queue_type"] in (None, NO_QUEUE_TYPE) and target(col) in drawn_typed:
            continue
        reasons = [c.get("reason") or c.get("observed") for c in by_col[col]]
        out[col] = {"column": col, "cells": len(by_col[col]), "reason": next((r for r in reasons if r), None)}
    return out


def scores(cells: list[dict[str, Any]], by: str) -> list[dict[str, Any]]:
    """Per target column and area (or level): how many requirements pass, of those the target was
    judged on: pass, fail, deviation (conformance.runner.judged). Error and blocked cells judged nothing,
    and unsupported/undocumented ones are out of scope: each is counted apart, never in the score.
    A flaky cell counts as failing (it did fail) and is also counted under ``flaky``."""
    acc: dict[tuple[str, str], dict[str, Any]] = {}
    for c in cells:
        key = (c["column"], c[by])
        a = acc.setdefault(key, {"column": c["column"], by: c[by], **dict.fromkeys(VERDICTS, 0), "flaky": 0})
        a[c["verdict"]] = a.get(c["verdict"], 0) + 1
        a["flaky"] += 1 if c.get("flaky") else 0
    out = []
    for a in acc.values():
        judged = sum(a[v] for v in JUDGED)
        a["judged"] = judged
        a["score"] = round(a["pass"] / judged, 4) if judged else None
        out.append(a)
    return sorted(out, key=lambda a: (a["column"], a[by]))


def flakiness(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per target column and case: how often it passed over its repetitions (pass and fail only);
    flaky when it both passed and failed (only cases decided more than once)."""
    out = []
    for c in cases:
        repetitions = c["n_pass"] + c["n_fail"]
        if repetitions > 1:
            out.append({"column": c["column"], "requirement": c["requirement"], "level": c["level"], "case_id": c["case_id"],
                        "repetitions": repetitions, "passes": c["n_pass"], "pass_rate": c["n_pass"] / repetitions,
                        "flaky": 0 < c["n_pass"] < repetitions})
    return sorted(out, key=lambda r: (not r["flaky"], r["pass_rate"], r["column"], str(r["case_id"])))


def compare(baseline: list[dict[str, Any]], current: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Cell by cell against a baseline, matched by product, protocol, queue type and requirement
    (not version: comparing releases is the point); a baseline cell absent now is ``vanished``.
    (The gate's complete classification is reports.gate.classify.)"""
    base = {(c["config"], c["requirement"]): c for c in baseline}
    out = []
    for c in current:
        b = base.get((c["config"], c["requirement"]))
        if b is None:
            change = "new"
        else:
            # a flaky cell is compared as flaky, never as its worst or best verdict
            was, now = ("flaky" if b.get("flaky") else b["verdict"]), ("flaky" if c.get("flaky") else c["verdict"])
            failing = ("fail", "error", "flaky")
            if was == "pass" and now in failing:
                change = "newly failing"
            elif was in failing and now == "pass":
                change = "fixed"
            elif was in failing and now in failing:
                change = "still failing"
            elif now == "unsupported" and was != "unsupported":
                change = "newly unsupported"
            elif was != now:
                change = f"{was} -> {now}"
            else:
                continue
        out.append({"config": c["config"], "column": c["column"], "baseline_column": b["column"] if b else None,
                    "requirement": c["requirement"], "level": c["level"], "area": c["area"],
                    "baseline": (("flaky" if b.get("flaky") else b["verdict"]) if b else None),
                    "current": "flaky" if c.get("flaky") else c["verdict"], "change": change,
                    "observed": c.get("observed"), "expected": c.get("expected")})
    now_keys = {(c["config"], c["requirement"]) for c in current}
    for b in baseline:  # on the baseline, absent now: never silently dropped from the comparison
        if (b["config"], b["requirement"]) not in now_keys:
            out.append({"config": b["config"], "column": None, "baseline_column": b["column"], "requirement": b["requirement"],
                        "level": b["level"], "area": b["area"], "baseline": "flaky" if b.get("flaky") else b["verdict"],
                        "current": None, "change": "vanished", "observed": None, "expected": b.get("expected")})
    order = {"newly failing": 0, "vanished": 1, "still failing": 2, "newly unsupported": 3, "fixed": 4}
    return sorted(out, key=lambda d: (order.get(d["change"], 4), d["level"] != "MUST", d["requirement"]))
