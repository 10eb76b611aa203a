"""The three groupings every report figure comes from, computed in ONE pass over the results files.

Why one pass: parsing the JSON lines is nearly all of the pipeline's cost (about 5 s per million
records warm on 2 cores, more cold), and the figures need three different groupings of the records:

* per **case** (target column x requirement x case): the matrix cells, flakiness and the case
  pages are all sums, minima and maxima over a cell's cases, so they follow from this small table;
* per **target column x area**: duration quantiles, which cannot be merged from per-case figures;
* per **results file x status x run**: counts of good, quarantined, self-test and unknown-schema
  lines, examples of the quarantined ones, and which runs each file holds (the gate's check).

Spark cannot feed one scan into three aggregations, and caching every record to read it three times
cost more than the parse itself (issue 20: 17 s of 41 s at a million records). So each good record
is expanded into one row per grouping (``_kind``), and a single ``groupBy`` whose keys and aggregate
inputs are null outside their own kind computes all three; the result is small (cases x targets +
columns x areas + files) and is cached for the figures.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from reports.schema import VERDICTS

#: _kind values.
CASE, DURATION, SOURCE = 0, 1, 2
#: The keys of a case row: its cell, then the case.
CELL_KEYS = ("column", "config", "product", "version", "protocol", "queue_type", "requirement", "level", "area")
CASE_KEYS = (*CELL_KEYS, "case_id")
DURATION_KEYS = ("column", "area")
SOURCE_KEYS = ("source", "status", "run_id")
#: Record fields a case page shows, carried in the latest attempt's struct (reports.case_pages).
LATEST_FIELDS = ("run_id", "attempt", "verdict", "spec_verdict", "vendor_verdict", "expected", "observed",
                 "reason", "citation", "variant", "duration_s", "level", "history", "wire_trace")
#: What a matrix cell links to as its worst case: rank first, so the struct's minimum is the worst;
#: then the case and the latest attempt of that verdict, whose fields are shown.
WORST_FIELDS = ("_v", "case_id", "_order", "expected", "observed", "wire_trace", "reason", "citation")


def rank(col: str) -> Any:
    """A verdict's position in VERDICTS (worst first); anything else ranks after them all."""
    from pyspark.sql import functions as F

    expr = None
    for i, verdict in enumerate(VERDICTS):
        expr = F.when(F.col(col) == verdict, F.lit(i)) if expr is None else expr.when(F.col(col) == verdict, F.lit(i))
    return expr.otherwise(F.lit(len(VERDICTS)))


@dataclass
class Groupings:
    cases: Any  # DataFrame, one row per case (CASE_KEYS), over the cached pass
    durations: list[dict[str, Any]]  # per column and area
    sources: list[dict[str, Any]]  # per results file, status and run id


def compute(tagged: Any, *, durations: bool = True, run_ids: bool = True) -> Groupings:
    """``tagged``: the records as read (reports.ingest), with ``source`` and ``status`` columns.

    A good record gets a duration row only when ``durations`` is wanted (the report, not the gate)
    and a file row only when ``run_ids`` is (the gate, not the report): each row a record expands
    to is work in the one aggregation. Lines that are not good results always get their file row."""
    from pyspark.sql import functions as F

    kind = F.col("_kind")
    ok = F.col("status") == "ok"

    def only(k: int, value: Any) -> Any:
        return F.when(kind == k, value)

    wanted = [CASE] + ([DURATION] if durations else []) + ([SOURCE] if run_ids else [])
    expanded = tagged.withColumn("_kind", F.explode(F.when(ok, F.array(*[F.lit(k) for k in wanted])).otherwise(F.array(F.lit(SOURCE)))))
    # Everything the aggregation reads is computed here, in the scan's generated code: Spark's
    # object hash aggregate (the one that can hold sets, digests and structs) interprets its own
    # expressions row by row, so each expression moved out of it is time saved on every record.
    # The verdict is part of a case row's key (one count instead of one per verdict); the cases
    # table below folds a case's verdict rows into one.
    key_of = {name: [k for k, names in ((CASE, (*CASE_KEYS, "verdict")), (DURATION, DURATION_KEYS), (SOURCE, SOURCE_KEYS)) if name in names]
              for name in dict.fromkeys((*CASE_KEYS, "verdict", *SOURCE_KEYS))}
    inputs = [
        *[F.when(kind.isin(*kinds), F.col(name)).alias(name) for name, kinds in key_of.items()],
        only(CASE, F.lit(1)).alias("_one"),
        only(CASE, rank("spec_verdict")).alias("_s"), only(CASE, rank("vendor_verdict")).alias("_d"),
        only(CASE, F.struct(*[F.col(f) for f in LATEST_FIELDS])).alias("_latest"),
        only(CASE, F.struct("finished_at", "attempt", "run_id")).alias("_latest_key"),
        only(CASE, F.col("run_id")).alias("_run"),
        only(DURATION, F.col("duration_s")).alias("_duration"),
        only(SOURCE, F.lit(1)).alias("_line"), only(SOURCE, F.col("_corrupt")).alias("_bad"),
        only(SOURCE, F.when(F.col("status") == "unknown-schema", F.col("schema"))).alias("_schema"),
    ]
    duration = F.col("_duration")
    grouped = (expanded.select(kind, *inputs).groupBy(kind, *key_of)
               .agg(F.count("_one").alias("records"), F.min("_s").alias("_s"), F.min("_d").alias("_d"),
                    # max_by compares the small ordering key only, not every field of the struct it returns
                    F.max_by("_latest", "_latest_key").alias("latest"), F.max("_latest_key").alias("latest_key"),
                    F.collect_set("_run").alias("runs"),
                    F.count(duration).alias("d_cases"), F.mean(duration).alias("d_mean"),
                    # one digest for both quantiles (two calls build two digests per group)
                    F.percentile_approx(duration, [0.5, 0.95]).alias("d_q"), F.max(duration).alias("d_max"), F.sum(duration).alias("d_sum"),
                    F.count("_line").alias("s_lines"),
                    # two examples per file at most, whatever its size (a file of garbage stays cheap)
                    F.min("_bad").alias("s_first"), F.max("_bad").alias("s_last"), F.min("_schema").alias("s_schema"))
               .cache())
    by_kind = {k: [] for k in (DURATION, SOURCE)}
    for row in grouped.filter(kind != CASE).collect():  # small: columns x areas + files; builds the cache
        by_kind[row["_kind"]].append(row.asDict())
    durations = [{"column": r["column"], "area": r["area"], "cases": r["d_cases"], "mean_s": r["d_mean"],
                  "p50_s": r["d_q"][0] if r["d_q"] else None, "p95_s": r["d_q"][1] if r["d_q"] else None,
                  "max_s": r["d_max"], "total_s": r["d_sum"]} for r in by_kind[DURATION] if r["d_cases"]]
    sources = [{"source": r["source"], "status": r["status"], "run_id": r["run_id"], "lines": r["s_lines"],
                "examples": [e for e in dict.fromkeys((r["s_first"], r["s_last"])) if e is not None], "schema": r["s_schema"]}
               for r in by_kind[SOURCE]]
    by_verdict = grouped.filter(kind == CASE).withColumn("_v", rank("verdict"))
    # a struct whose minimum is the latest attempt (ties: the smaller run id)
    newest_first = F.struct((-F.col("latest_key.finished_at")).alias("finished_at"), (-F.col("latest_key.attempt")).alias("attempt"),
                            F.col("latest_key.run_id").alias("run_id"))
    if not run_ids:  # the good lines' count, which their file rows would have given
        ok_lines = by_verdict.agg(F.sum("records")).first()[0] or 0
        sources.append({"source": None, "status": "ok", "run_id": None, "lines": ok_lines, "examples": [], "schema": None})
    cases = (by_verdict.groupBy(*CASE_KEYS)
             .agg(F.sum("records").alias("records"),
                  *[F.sum(F.when(F.col("verdict") == v, F.col("records")).otherwise(0)).alias(f"n_{v}") for v in VERDICTS],
                  F.min("_v").alias("_v"), F.min("_s").alias("_s"), F.min("_d").alias("_d"),
                  # the latest record of the case's worst verdict: its rank first, then the latest
                  # attempt (so a report shows the same record for the same runs, every time)
                  F.min(F.struct(F.col("_v"), F.col("case_id"), newest_first.alias("_order"),
                                 *[F.col(f"latest.{f}").alias(f) for f in WORST_FIELDS[3:]])).alias("worst"),
                  F.max_by("latest", "latest_key").alias("latest"),
                  F.array_distinct(F.flatten(F.collect_list("runs"))).alias("runs")))  # collected once: not cached
    return Groupings(cases, durations, sources)
