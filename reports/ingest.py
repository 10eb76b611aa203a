"""Reading run folders into one DataFrame of case records, with bad lines quarantined, not fatal.

A results file can be cut short by a killed run or damaged by hand; one bad line must not cost the
report the thousands of good ones beside it, so it is counted and set aside. A record of a schema
version this pipeline does not know is different: reading it with the wrong schema would silently
misreport, so that is refused. Records a self-test made against a deliberately faulty broker
(``mutation`` set) are never results about a broker and are left out, counted.
"""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from conformance.errors import UsageError
from conformance.mutations import RELAYS
from reports.schema import REQUIRED, RESULT_SCHEMAS, spark_schema

RESULTS_FILE = "results.jsonl"
#: The record fields the report and the gate read (reports.analysis, reports.report); typed
#: (non-string) fields stay so that a line with a value of the wrong type is still quarantined.
USED = ("schema", "run_id", "case_id", "requirement", "level", "area", "queue_type", "verdict", "spec_verdict",
        "vendor_verdict", "reason", "citation", "expected", "observed", "duration_s", "attempt", "finished_at",
        "product", "version", "protocol", "mutation", "wire_trace",
        # issue 22: what a cell's case page shows besides (reports.case_pages.PAGE_COLUMNS)
        "variant", "history")


@dataclass
class Ingested:
    records: Any  # DataFrame of good records
    counts: dict[str, int] = field(default_factory=dict)  # ok / quarantined / mutated
    quarantined_examples: list[dict[str, str]] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)


def result_files(paths: list[str]) -> list[str]:
    """Each run folder, glob or file given -> results files; local ones are checked here so that a
    typo is a one-line error, not a Spark stack trace."""
    out: list[str] = []
    for p in paths:
        scheme = urlsplit(p).scheme
        if scheme and len(scheme) > 1 and scheme != "file":  # hdfs://, s3a://, ...: Spark resolves it
            out.append(p if p.endswith(".jsonl") else p.rstrip("/") + "/" + RESULTS_FILE)
            continue
        local = p[len("file://"):] if p.startswith("file://") else p
        matches = sorted(glob.glob(local)) if glob.has_magic(local) else [local]
        if not matches or not all(os.path.exists(m) for m in matches):
            raise UsageError(f"no run folder or results file at {p}")
        for m in matches:
            f = m if os.path.isfile(m) else os.path.join(m, RESULTS_FILE)
            if os.path.isfile(f):
                out.append(os.path.abspath(f))
            elif not glob.has_magic(local):
                raise UsageError(f"{m} has no {RESULTS_FILE}: not a run folder")
    if not out and paths:
        raise UsageError(f"no {RESULTS_FILE} found under {', '.join(paths)}")
    return out


def ingest(spark: Any, paths: list[str]) -> Ingested:
    from pyspark.sql import functions as F

    files = result_files(paths)
    raw = (spark.read.schema(spark_schema()).option("mode", "PERMISSIVE").option("columnNameOfCorruptRecord", "_corrupt")
           .json(files).withColumn("source", F.input_file_name()))
    missing = None
    for name in REQUIRED:
        cond = F.col(name).isNull()
        missing = cond if missing is None else (missing | cond)
    status = (F.when(F.col("_corrupt").isNotNull() | missing, F.lit("quarantined"))
              .when(~F.col("schema").isin(*RESULT_SCHEMAS), F.lit("unknown-schema"))
              .when(F.col("mutation").isNotNull() & ~F.col("mutation").isin(*RELAYS), F.lit("mutated"))
              .otherwise(F.lit("ok")))
    # One parse of the files, cached: the counts, the quarantine examples and every figure read it.
    # (Spark also refuses a query on the corrupt-record column of an uncached JSON scan.)
    # Only what a figure reads is cached (not the history, target, adapter...): the cache is built
    # from every line, so each dropped column is work saved per record. A string column never makes
    # a line corrupt (any JSON value reads as text), so dropping one changes no quarantine decision.
    tagged = raw.withColumn("status", status).select(*USED, "_corrupt", "source", "status").cache()
    counts = {r["status"]: int(r["count"]) for r in tagged.groupBy("status").count().collect()}
    if counts.get("unknown-schema"):
        bad = tagged.filter(F.col("status") == "unknown-schema").select("schema", "source").first()
        raise UsageError(f"{bad['source']}: unknown result schema {bad['schema']!r} (this pipeline reads {', '.join(RESULT_SCHEMAS)})")
    examples = [{"source": r["source"], "line": (r["_corrupt"] or "")[:200]}
                for r in tagged.filter(F.col("status") == "quarantined").select("source", "_corrupt").limit(5).collect()]
    good = tagged.filter(F.col("status") == "ok").drop("_corrupt", "status")
    good = good.withColumn("queue_type", F.coalesce(F.col("queue_type"), F.lit("-")))
    good = good.withColumn("column", F.concat_ws(" ", F.col("product"), F.col("version"), F.col("protocol"), F.col("queue_type")))
    good = good.withColumn("config", F.concat_ws(" ", F.col("product"), F.col("protocol"), F.col("queue_type")))
    for key in ("ok", "quarantined", "mutated"):
        counts.setdefault(key, 0)
    return Ingested(good, counts, examples, files)
