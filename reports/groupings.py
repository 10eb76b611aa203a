"""The three groupings every report figure comes from, computed in ONE pass over the results files.

Why one pass: parsing the JSON lines is nearly all of the pipeline's cost (about 5 s per million
records warm on 2 cores, more cold), and the figures need three different groupings of the records:

* per **case** (target column x requirement x case): the matrix cells, flakiness and the case
  pages are all sums, minima and maxima over a cell's cases, so they follow from this small table;
* per **target column x area**: duration quantiles, which cannot be merged from per-case figures;
* per **results file x status x run**: counts of good, quarantined, self-test and unknown-schema
  lines, examples of the quarantined ones, and which runs each file holds (the gate's check).

Spark cannot feed one scan into three aggregations, and caching every record to read it three times
cost more than the parse itself (17 s of 41 s at a million records). So each good record
is expanded into one row per grouping (``_kind``), and a single ``groupBy`` whose keys and aggregate
inputs are null outside their own kind computes all three; the result is small (cases x targets +
columns x areas + files) and is collected once; the per-case table is folded from it in Python
(fold_cases).
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
#: What the pass groups a case row by: CASE_KEYS without ``column`` and ``config``, which are
#: concatenations of these (fold_cases adds them), and with the verdict (one row per verdict of a
#: case). Two fewer strings to concatenate per record and to hash and compare per row of
#: the aggregation (with LATEST_CARRIED and fold_cases: the pass's JVM CPU 42-44 s -> 30 s at 1M
#: records, its task threads' share 21 s -> 15 s).
CASE_GROUP_KEYS = ("product", "version", "protocol", "queue_type", "requirement", "level", "area", "case_id", "verdict")
DURATION_KEYS = ("column", "area")
SOURCE_KEYS = ("source", "status", "run_id")
#: Record fields a case page shows, carried in the latest attempt's struct (reports.case_pages).
LATEST_FIELDS = ("run_id", "attempt", "verdict", "spec_verdict", "vendor_verdict", "expected", "observed",
                 "reason", "citation", "variant", "duration_s", "level", "history", "wire_trace", "unsupported_kind")
#: The latest record's fields the pass carries: the others are the same for every record its row
#: could come from (run id and attempt are in its ordering key; verdict and level are group keys),
#: so fold_cases puts them back: max_by copies this struct on (nearly) every record.
LATEST_CARRIED = tuple(f for f in LATEST_FIELDS if f not in ("run_id", "attempt", "verdict", "level"))
#: What a matrix cell links to as its worst case: rank first, so the struct's minimum is the worst;
#: then the case and the latest attempt of that verdict, whose fields are shown.
WORST_FIELDS = ("_v", "case_id", "_order", "expected", "observed", "wire_trace", "reason", "citation", "unsupported_kind")


def sql_text(value: str) -> str:
    """A Spark SQL string literal."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def rank(col: str) -> str:
    """A verdict's position in VERDICTS (worst first); anything else ranks after them all (SQL text)."""
    return "CASE " + " ".join(f"WHEN `{col}` = {sql_text(v)} THEN {i}" for i, v in enumerate(VERDICTS)) + f" ELSE {len(VERDICTS)} END"


@dataclass
class Groupings:
    cases: list[dict[str, Any]]  # one row per case (CASE_KEYS), folded from the pass's rows (fold_cases)
    durations: list[dict[str, Any]]  # per column and area
    sources: list[dict[str, Any]]  # per results file, status and run id


def compute(tagged: Any, *, durations: bool = True, run_ids: bool = True) -> Groupings:
    """``tagged``: the records as read (reports.ingest), with ``source`` and ``status`` columns.

    A good record gets a duration row only when ``durations`` is wanted (the report, not the gate)
    and a file row only when ``run_ids`` is (the gate, not the report): each row a record expands
    to is work in the one aggregation. Lines that are not good results always get their file row."""
    from pyspark.sql import functions as F

    # Every expression is SQL text, not built with pyspark.sql.functions: each F.col,
    # F.when, F.lit, ``==`` or ``.alias`` is a round trip to the JVM (about 0.4 ms warm), and
    # building the pass took 2,772 of them; as text it takes ~400. Measured cold, the time before
    # the first task hardly moved (about 1.0 s either way: the JVM's analysis of the plan
    # dominates; one projection instead of five withColumn in reports.ingest saved ~0.1 s), so
    # this buys little on an idle machine, more when round trips slow down on a loaded one. The
    # text gives the same expressions (tests/reports/test_reports.py, and reports compared before/after).
    def only(k: int, value: str, name: str) -> str:
        return f"CASE WHEN _kind = {k} THEN {value} END AS {name}"

    wanted = [CASE] + ([DURATION] if durations else []) + ([SOURCE] if run_ids else [])
    expanded = tagged.withColumn("_kind", F.expr(f"explode(CASE WHEN `status` = 'ok' THEN array({', '.join(map(str, wanted))}) ELSE array({SOURCE}) END)"))
    # Everything the aggregation reads is computed here, in the scan's generated code: Spark's
    # object hash aggregate (the one that can hold sets, digests and structs) interprets its own
    # expressions row by row, so each expression moved out of it is time saved on every record.
    # The verdict is part of a case row's key (one count instead of one per verdict); the cases
    # table below folds a case's verdict rows into one.
    key_of = {name: [k for k, names in ((CASE, CASE_GROUP_KEYS), (DURATION, DURATION_KEYS), (SOURCE, SOURCE_KEYS)) if name in names]
              for name in dict.fromkeys((*CASE_GROUP_KEYS, *DURATION_KEYS, *SOURCE_KEYS))}
    inputs = [
        *[f"CASE WHEN _kind IN ({', '.join(map(str, kinds))}) THEN `{name}` END AS `{name}`" for name, kinds in key_of.items()],
        only(CASE, "1", "_one"),
        only(CASE, rank("spec_verdict"), "_s"), only(CASE, rank("vendor_verdict"), "_d"),
        only(CASE, f"struct({', '.join(f'`{f}`' for f in LATEST_CARRIED)})", "_latest"),
        only(CASE, "struct(finished_at, attempt, run_id)", "_latest_key"),
        only(CASE, "run_id", "_run"),
        only(DURATION, "duration_s", "_duration"),
        only(SOURCE, "1", "_line"), only(SOURCE, "_corrupt", "_bad"),
        only(SOURCE, "CASE WHEN `status` = 'unknown-schema' THEN `schema` END", "_schema"),
    ]
    aggregates = [
        "count(_one) AS records", "min(_s) AS _s", "min(_d) AS _d",
        # max_by compares the small ordering key only, not every field of the struct it returns
        "max_by(_latest, _latest_key) AS latest", "max(_latest_key) AS latest_key",
        "collect_set(_run) AS runs",
        "count(_duration) AS d_cases", "avg(_duration) AS d_mean",
        # one digest for both quantiles (two calls build two digests per group)
        "percentile_approx(_duration, array(0.5D, 0.95D), 10000) AS d_q", "max(_duration) AS d_max", "sum(_duration) AS d_sum",
        "count(_line) AS s_lines",
        # two examples per file at most, whatever its size (a file of garbage stays cheap)
        "min(_bad) AS s_first", "max(_bad) AS s_last", "min(_schema) AS s_schema",
    ]
    grouped = expanded.selectExpr("_kind", *inputs).groupBy("_kind", *key_of).agg(*[F.expr(a) for a in aggregates])
    # ONE collect of the whole grouped table (cases x verdicts + columns x areas + files: thousands
    # of rows at a million records), and the per-case table folded here, in Python (fold_cases).
    # The table used to be cached and folded by Spark, which cost four more jobs (the
    # filter of the cache, the good lines' count, and the per-case aggregation's two stages) with
    # their planning, code generation and JIT work: 3.6 s of a 25-28 s million-record report, for
    # a fold over ~8k rows that Python does in 0.15-0.2 s (measured at 1M records, Spark event log:
    # six jobs after the scan's stage, 5.8 s at load ~3.5, became one reduce stage of 1.1-1.6 s;
    # matrix.json and every other output identical).
    by_kind: dict[int, list[dict[str, Any]]] = {k: [] for k in (CASE, DURATION, SOURCE)}
    for row in grouped.collect():
        by_kind[row["_kind"]].append(row.asDict(recursive=True))
    durations = [{"column": r["column"], "area": r["area"], "cases": r["d_cases"], "mean_s": r["d_mean"],
                  "p50_s": r["d_q"][0] if r["d_q"] else None, "p95_s": r["d_q"][1] if r["d_q"] else None,
                  "max_s": r["d_max"], "total_s": r["d_sum"]} for r in by_kind[DURATION] if r["d_cases"]]
    sources = [{"source": r["source"], "status": r["status"], "run_id": r["run_id"], "lines": r["s_lines"],
                "examples": [e for e in dict.fromkeys((r["s_first"], r["s_last"])) if e is not None], "schema": r["s_schema"]}
               for r in by_kind[SOURCE]]
    if not run_ids:  # the good lines' count, which their file rows would have given
        ok_lines = sum(r["records"] for r in by_kind[CASE])
        sources.append({"source": None, "status": "ok", "run_id": None, "lines": ok_lines, "examples": [], "schema": None})
    return Groupings(fold_cases(by_kind[CASE]), durations, sources)


def spark_order(value: Any) -> Any:
    """A sort key ordering values as Spark orders them (min/max/max_by of structs): null before any
    value, struct fields in turn, a NaN double after every number (and equal to NaN), -0.0 == 0.0."""
    if value is None:
        return (0,)
    if isinstance(value, dict):
        return (1, tuple(spark_order(v) for v in value.values()))
    if isinstance(value, float):
        return (1, (1, 0.0) if value != value else (0, value))
    return (1, value)


def _negated(value: Any) -> Any:
    return None if value is None else -value


def fold_cases(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The per-case table from the pass's (case, verdict) rows: what a Spark ``groupBy(*CASE_KEYS)``
    did before, with the same semantics, field names and field order:

    * ``records`` and ``n_<verdict>``: sums of the rows' record counts;
    * ``_v``, ``_s``, ``_d``: the worst verdict ranks (minima);
    * ``worst``: the minimum, in Spark's struct order, of (verdict rank, case, newest first
      (-finished_at, -attempt, run id), the latest record's expected, observed, trace, reason,
      citation): the latest record of the case's worst verdict;
    * ``latest``: the latest record of the case, by (finished_at, attempt, run id) as ``max_by``
      chose it; records of several verdicts equally latest (duplicated lines) give the worst
      verdict's (Spark's max_by gave whichever row its shuffle delivered last);
    * ``runs``: the distinct run ids.

    Cases come out sorted by their keys (Spark's order was its hash partitioning's)."""
    names = {v: i for i, v in enumerate(VERDICTS)}
    for r in rows:  # what the pass left out (CASE_GROUP_KEYS, LATEST_CARRIED), as Spark's concat_ws and struct gave them
        r["column"] = " ".join(x for x in (r["product"], r["version"], r["protocol"], r["queue_type"]) if x is not None)
        r["config"] = " ".join(x for x in (r["product"], r["protocol"], r["queue_type"]) if x is not None)
        if r["latest"] is not None:
            carried, key = r["latest"], r["latest_key"] or {}
            r["latest"] = {f: key.get(f) if f in ("run_id", "attempt") else r[f] if f in ("verdict", "level") else carried.get(f)
                           for f in LATEST_FIELDS}
    acc: dict[tuple[Any, ...], dict[str, Any]] = {}
    order = lambda r: (*[spark_order(r[k]) for k in CASE_KEYS], names.get(r["verdict"], len(VERDICTS)), spark_order(r["verdict"]))  # noqa: E731
    for r in sorted(rows, key=order):
        key = tuple(r[k] for k in CASE_KEYS)
        v = names.get(r["verdict"], len(VERDICTS))
        latest, latest_key = r["latest"], r["latest_key"] or {}
        worst = {"_v": v, "case_id": r["case_id"],
                 "_order": {"finished_at": _negated(latest_key.get("finished_at")), "attempt": _negated(latest_key.get("attempt")),
                            "run_id": latest_key.get("run_id")},
                 **{f: (latest or {}).get(f) for f in WORST_FIELDS[3:]}}
        a = acc.get(key)
        if a is None:
            acc[key] = {**{k: r[k] for k in CASE_KEYS}, "records": r["records"],
                        **{f"n_{name}": r["records"] if r["verdict"] == name else 0 for name in VERDICTS},
                        "_v": v, "_s": r["_s"], "_d": r["_d"], "worst": worst, "latest": latest,
                        "runs": list(dict.fromkeys(r["runs"] or ())), "_latest_key": latest_key}
            continue
        a["records"] += r["records"]
        if r["verdict"] in names:
            a[f"n_{r['verdict']}"] += r["records"]
        a["_v"], a["_s"], a["_d"] = min(a["_v"], v), _min(a["_s"], r["_s"]), _min(a["_d"], r["_d"])
        if spark_order(worst) < spark_order(a["worst"]):
            a["worst"] = worst
        if spark_order(latest_key) > spark_order(a["_latest_key"]):  # rows come worst verdict first: a tie keeps the worse
            a["latest"], a["_latest_key"] = latest, latest_key
        a["runs"] = list(dict.fromkeys([*a["runs"], *(r["runs"] or ())]))
    for a in acc.values():
        del a["_latest_key"]
    return list(acc.values())


def _min(a: Any, b: Any) -> Any:
    """Spark's min: nulls ignored."""
    return b if a is None else a if b is None else min(a, b)
