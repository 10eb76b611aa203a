"""The compliance figures, computed as Spark aggregations over any number of case records.

Every function takes the per-case rows of the good records (reports.groupings: one pass over the
files made them) and returns small, collected Python data: the number of cells is targets x
requirements however many records went in, so the rendering side never touches Spark.
"""

from __future__ import annotations

from typing import Any

from reports.schema import VERDICTS

#: Verdicts that decide something about the broker; a pass rate counts only these (an ``error`` is
#: the suite or the infrastructure breaking: it neither passes nor fails the broker).
DECIDED = ("pass", "fail")


def _unrank(col: str) -> Any:
    from pyspark.sql import functions as F

    return F.element_at(F.array(*[F.lit(v) for v in VERDICTS], F.lit("none")), F.col(col) + 1)


def cells_df(cases: Any) -> Any:
    """target column x requirement, from the per-case rows (reports.groupings): the worst verdict
    (spec and vendor apart), pass rate, and for the report's link the worst case's expected/observed/
    trace (of its latest attempt with that verdict).

    ``flaky`` is set when one case of the cell both passed and failed over its repetitions (attempts
    of ``--repeat`` or several runs): ``verdict`` stays the worst (scores count it as failing), and
    ``state`` says ``flaky`` so that no output shows such a cell as plainly failing or passing; its
    ``passes``/``decided`` give the rate. Two variants of which one always fails are not flaky."""
    from pyspark.sql import functions as F

    from reports.groupings import CELL_KEYS

    both = (F.col("n_pass") > 0) & (F.col("n_fail") > 0) & F.col("case_id").isNotNull()
    return (cases.groupBy(*CELL_KEYS)
            .agg(F.min("_v").alias("_v"), F.min("_s").alias("_s"), F.min("_d").alias("_d"),
                 F.sum("records").alias("records"), F.count("case_id").alias("cases"),
                 F.size(F.array_distinct(F.flatten(F.collect_list("runs")))).alias("runs"),
                 F.sum("n_pass").alias("passes"), F.sum(F.col("n_pass") + F.col("n_fail")).alias("decided"),
                 F.max(both).alias("flaky"), F.min("worst").alias("worst"))
            .withColumn("verdict", _unrank("_v")).withColumn("spec_verdict", _unrank("_s")).withColumn("vendor_verdict", _unrank("_d"))
            .withColumn("pass_rate", F.when(F.col("decided") > 0, F.col("passes") / F.col("decided")))
            .withColumn("state", F.when(F.col("flaky"), F.lit("flaky")).otherwise(F.col("verdict")))
            .select(*CELL_KEYS, "verdict",
                    "state", "flaky", "spec_verdict", "vendor_verdict", "records", "cases", "runs", "passes", "decided", "pass_rate",
                    F.col("worst.case_id").alias("case_id"), F.col("worst.expected").alias("expected"),
                    F.col("worst.observed").alias("observed"), F.col("worst.wire_trace").alias("wire_trace"),
                    F.col("worst.reason").alias("reason"), F.col("worst.citation").alias("citation")))


def rows(df: Any) -> list[dict[str, Any]]:
    return [r.asDict() for r in df.collect()]


def scores(cells: list[dict[str, Any]], by: str) -> list[dict[str, Any]]:
    """Per target column and area (or level): how many requirements pass, of those the target was
    judged on (unsupported/undocumented cells are counted apart, never as failures or passes).
    A flaky cell counts as failing (it did fail) and is also counted under ``flaky``."""
    acc: dict[tuple[str, str], dict[str, Any]] = {}
    for c in cells:
        key = (c["column"], c[by])
        a = acc.setdefault(key, {"column": c["column"], by: c[by], **dict.fromkeys(VERDICTS, 0), "flaky": 0})
        a[c["verdict"]] = a.get(c["verdict"], 0) + 1
        a["flaky"] += 1 if c.get("flaky") else 0
    out = []
    for a in acc.values():
        judged = a["pass"] + a["fail"] + a["error"] + a["blocked"] + a["deviation"]
        a["judged"] = judged
        a["score"] = round(a["pass"] / judged, 4) if judged else None
        out.append(a)
    return sorted(out, key=lambda a: (a["column"], a[by]))


def flakiness(cases: Any) -> list[dict[str, Any]]:
    """Per target column and case: how often it passed over its repetitions (pass and fail only);
    flaky when it both passed and failed (only cases decided more than once)."""
    from pyspark.sql import functions as F

    df = (cases.withColumn("repetitions", F.col("n_pass") + F.col("n_fail")).filter(F.col("repetitions") > 1)
          .select("column", "requirement", "level", "case_id", "repetitions", F.col("n_pass").alias("passes"))
          .withColumn("pass_rate", F.col("passes") / F.col("repetitions"))
          .withColumn("flaky", (F.col("passes") > 0) & (F.col("passes") < F.col("repetitions"))))
    return sorted(rows(df), key=lambda r: (not r["flaky"], r["pass_rate"], r["column"], r["case_id"]))


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
