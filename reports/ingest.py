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
from conformance.nemesis.mutations import RELAYS
from reports.schema import REQUIRED, RESULT_SCHEMAS, spark_schema

RESULTS_FILE = "results.jsonl"


@dataclass
class Ingested:
    cases: list[dict[str, Any]]  # one row per case of the good records (reports.groupings.fold_cases)
    counts: dict[str, int] = field(default_factory=dict)  # ok / quarantined / mutated
    quarantined_examples: list[dict[str, str]] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    durations: list[dict[str, Any]] = field(default_factory=list)  # per target column and area
    run_ids: dict[str, set[str]] = field(default_factory=dict)  # results file -> run ids of its good records


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


def ingest(spark: Any, paths: list[str], *, durations: bool = True, run_ids: bool = True) -> Ingested:
    """One pass over the results files (reports.groupings): the figures' groupings, the counts by
    status and the quarantine examples; a record of an unknown schema version is refused."""
    from reports.groupings import compute, sql_text
    from reports.runs import broker_name_sql, is_local, read_metas, run_targets

    files = result_files(paths)
    raw = (spark.read.schema(spark_schema()).option("mode", "PERMISSIVE").option("columnNameOfCorruptRecord", "_corrupt")
           .json(files))
    # SQL text, not pyspark.sql.functions: one JVM round trip per column instead of one per
    # function call (reports.groupings.compute says why).
    missing = " OR ".join(f"`{name}` IS NULL" for name in REQUIRED)
    status = (f"CASE WHEN _corrupt IS NOT NULL OR {missing} THEN 'quarantined' "
              f"WHEN NOT `schema` IN ({', '.join(map(sql_text, RESULT_SCHEMAS))}) THEN 'unknown-schema' "
              f"WHEN mutation IS NOT NULL AND NOT mutation IN ({', '.join(map(sql_text, RELAYS))}) THEN 'mutated' ELSE 'ok' END")
    # one projection: each withColumn is an analysis of the plan in a cold JVM (five took 0.43 s,
    # this one 0.29 s)
    # a broker that announces no product is named by its target, in every figure (reports.runs.broker_name)
    product, version = broker_name_sql(run_targets(read_metas(files, None if all(map(is_local, files)) else spark)))
    tagged = raw.selectExpr(*[f"`{c}`" for c in raw.columns if c not in ("queue_type", "product", "version")], "input_file_name() AS `source`",
                            f"{status} AS `status`", "coalesce(`queue_type`, '-') AS `queue_type`", f"{product} AS `product`", f"{version} AS `version`",
                            f"concat_ws(' ', {product}, {version}, `protocol`, coalesce(`queue_type`, '-')) AS `column`")
    groups = compute(tagged, durations=durations, run_ids=run_ids)
    counts = {key: 0 for key in ("ok", "quarantined", "mutated")}
    examples: list[dict[str, str]] = []
    run_ids: dict[str, set[str]] = {}
    for s in sorted(groups.sources, key=lambda s: (str(s["source"]), str(s["status"]), str(s["run_id"]))):
        counts[s["status"]] = counts.get(s["status"], 0) + s["lines"]
        if s["status"] == "unknown-schema":
            raise UsageError(f"{s['source']}: unknown result schema {s['schema']!r} (this pipeline reads {', '.join(RESULT_SCHEMAS)})")
        if s["status"] == "quarantined":
            examples += [{"source": s["source"], "line": line[:200]} for line in s["examples"]]
        if s["status"] == "ok" and s["source"] is not None:
            run_ids.setdefault(s["source"], set()).add(s["run_id"] or "?")
    return Ingested(groups.cases, counts, examples[:5], files, groups.durations, run_ids)
