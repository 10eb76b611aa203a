"""Soak runs on Spark: many runs' histories judged by the soak checkers, and the matrix of anomaly
rates per broker and nemesis.

A soak run folder holds ``soak.json`` (what ran: broker, protocol, nemesis, seed, check options)
and ``history.jsonl`` (every operation). The checkers judge one whole history in order, so a run is
the unit of work: the job's rows are the runs' history files, and a ``mapInPandas`` task reads
each whole and hands its text to :func:`conformance.soak.judge.judge_text`, which is
``checkers.run_all`` on the parsed history, the same call ``conformance soak`` makes. No checker
is written twice; a run judged here gets the verdicts and counts the run itself gets.

Why not DataFrame joins over ops: the queue checker's "an ack the broker had" and the tx checker's
"all or none" depend on the order of each consumer's operations, a sequential pass per run that a
join would have to re-express (a second implementation to keep equal). Per run it is linear and
the runs are independent: the job scales with the number of runs, one task per core busy.

On a cluster the few modules the tasks import are shipped with the job (:func:`_ship_code`). Only
the per-run results (a few KB each) come back to the driver, where the matrix is folded.
"""

from __future__ import annotations

import glob
import json
import os
import tempfile
import zipfile
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

SOAK_FILE = "soak.json"
HISTORY_FILE = "history.jsonl"
#: The per-run rows the tasks return: the run's history file and its judged record as JSON.
RESULT_SCHEMA = "path string, result string"
#: Checkers in the order the report shows them (conformance.soak.checkers.CHECKERS).
CHECKER_ORDER = ("queue", "redelivery", "order", "tx")


def is_soak_folder(path: str) -> bool:
    return os.path.isfile(os.path.join(path, SOAK_FILE))


def split_paths(paths: list[str]) -> tuple[list[str], list[str]]:
    """``conformance report``'s positional paths -> (paths of compliance runs, soak run folders).

    A folder holding ``soak.json`` is a soak run; a glob's soak folders are taken out of it (the
    glob stays for its other folders, if it matches any). Remote URLs (hdfs://, s3a://) are
    compliance paths: soak runs are found on the local file system."""
    rest: list[str] = []
    soaks: list[str] = []
    for p in paths:
        scheme = urlsplit(p).scheme
        if scheme and len(scheme) > 1 and scheme != "file":
            rest.append(p)
            continue
        local = p.removeprefix("file://")
        matches = sorted(glob.glob(local)) if glob.has_magic(local) else [local]
        found = [os.path.abspath(m) for m in matches if is_soak_folder(m)]
        soaks += [f for f in found if f not in soaks]
        if not matches or len(found) < len(matches):
            rest.append(p)
    return rest, soaks


def nemesis_label(meta: dict[str, Any]) -> str:
    """``cut`` / ``kill,pause``: the kinds the run's nemesis drew from (its --nemesis, or the kinds
    of a scripted schedule); ``none`` for a run without faults."""
    kinds = list((meta.get("options") or {}).get("nemesis") or []) or sorted({e.get("kind", "?") for e in meta.get("schedule") or []})
    return ",".join(kinds) or "none"


def run_info(folder: str) -> dict[str, Any]:
    """What the report says of a run, from its soak.json (redacted again: a target URL of an older
    run never reaches the page with its password)."""
    from conformance.secrets import redact

    try:
        meta = json.loads(Path(folder, SOAK_FILE).read_text())
        damaged = None if isinstance(meta, dict) else f"{SOAK_FILE} is not a JSON object"
    except (OSError, ValueError) as exc:
        meta, damaged = {}, f"{SOAK_FILE} unreadable: {exc}"
    meta = meta if isinstance(meta, dict) else {}
    opts = meta.get("options") or {}
    return {"folder": folder, "history": os.path.join(folder, HISTORY_FILE), "product": meta.get("product") or "?",
            "version": meta.get("version") or "", "protocol": meta.get("protocol") or "?", "nemesis": nemesis_label(meta),
            "seed": meta.get("seed"), "target": redact(str(meta.get("target") or "")), "queue_type": opts.get("queue_type"),
            "options": {k: opts[k] for k in ("ordered", "requeue_counts") if k in opts},
            # a history edited after the run, or a broker made wrong on the wire during it (--mutation):
            # either way a self-check of the checkers, no result about the broker
            "mutation": meta.get("history_mutation") or (meta.get("mutation") or {}).get("name"),
            "mutation_where": "history" if meta.get("history_mutation") else "wire" if meta.get("mutation") else None,
            "recorded": {k: v.get("verdict") for k, v in (meta.get("verdicts") or {}).items()},
            # what the run's profile documented of its anomalies (conformance.soak.documented), kept per checker
            "documented": {k: {"anomalies": v.get("anomalies"), **v["documented"]}
                           for k, v in (meta.get("verdicts") or {}).items() if isinstance(v, dict) and v.get("documented")},
            "faults_fired": len((meta.get("stats") or {}).get("faults_fired") or []),
            "workload_s": (meta.get("stats") or {}).get("workload_s"), "damaged": damaged}


def _ship_code(spark: Any) -> None:
    """On a cluster, the modules the tasks import, zipped and added to the job (executors may not
    have this package installed). Local mode's workers import it from the driver's own path."""
    master = _master(spark)
    if master is None or master.startswith("local"):
        return
    import conformance

    root = Path(conformance.__file__).resolve().parent
    folder = Path(tempfile.mkdtemp(prefix="conformance-soak-code-"))
    archive = folder / "conformance_soak.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.write(root / "__init__.py", "conformance/__init__.py")
        for f in sorted((root / "soak").rglob("*.py")):
            z.write(f, f"conformance/{f.relative_to(root)}")
    if master.startswith("sc://"):
        spark.addArtifacts(str(archive), pyfile=True)
    else:
        spark.sparkContext.addPyFile(str(archive))


def _master(spark: Any) -> str | None:
    try:
        return spark.sparkContext.master
    except Exception:  # noqa: BLE001 -- a Spark Connect session has no SparkContext
        return "sc://"


def _judge_partition(options: dict[str, dict[str, Any]]) -> Any:
    """The task: each row a history's path, read here whole and judged; each yields one row, the
    judged record as JSON."""

    def run(batches: Any) -> Any:
        import json as _json

        import pandas as pd

        from conformance.soak.checkers import CheckOptions
        from conformance.soak.judge import judge_text

        for batch in batches:
            out = []
            for path in batch["path"]:
                opts = CheckOptions.from_dict(options.get(path) or {})
                try:
                    with open(path, "rb") as fh:
                        text = fh.read()
                except OSError as exc:
                    res = {"ops": 0, "problem": f"{path}: not readable where the task ran ({exc.strerror})", "verdicts": {}}
                else:
                    res = judge_text(text, opts, source=path)
                out.append((path, _json.dumps(res)))
            yield pd.DataFrame(out, columns=["path", "result"])

    return run


def check_runs(spark: Any, folders: list[str]) -> list[dict[str, Any]]:
    """Every run folder's soak.json and its history judged on Spark: one dict per run, the
    :func:`run_info` fields with ``ops``, ``problem``, ``verdicts`` (per checker: verdict, counts,
    anomalies, note, listed), ``cpu_s`` and ``verdict`` (fail when a checker failed; broken when
    the history could not be judged; pass otherwise: ``unknown`` checkers are not failures).

    The job's rows are the histories' paths, one per task (up to 1024 tasks; Spark hands the next
    to whichever core is free, so runs of any sizes keep every core busy), and each task reads its
    file itself: the JVM carries no history text (reading 1M operations' files whole and handing
    them to the workers through Arrow cost the JVM 8 CPU seconds of 22). Soak runs are local
    folders (found by their soak.json), so on a cluster the executors read them where this
    process does: the same path on a shared file system, as the compliance runs' rule is."""
    if not folders:
        return []
    infos = {os.path.abspath(i["history"]): i for i in map(run_info, folders)}
    options = {path: i["options"] for path, i in infos.items()}
    readable = sorted((p for p in infos if os.path.isfile(p)), key=os.path.getsize, reverse=True)  # a missing one is its run's problem
    rows = []
    if readable:
        _ship_code(spark)
        before = spark.conf.get("spark.sql.execution.arrow.maxRecordsPerBatch", None)
        spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "1")  # one run at a time through each worker
        try:
            paths = spark.createDataFrame([(p,) for p in readable], "path string").repartition(min(len(readable), 1024))
            rows = paths.mapInPandas(_judge_partition(options), RESULT_SCHEMA).collect()
        finally:
            if before is None:
                spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
            else:
                spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", before)
    judged = {r["path"]: json.loads(r["result"]) for r in rows}
    out = []
    for path, info in infos.items():
        res = judged.get(path) or {"ops": 0, "problem": f"no {HISTORY_FILE} read", "verdicts": {}}
        damaged = info.pop("damaged")
        if damaged:  # what ran is unknown: its verdicts would land in no broker's row
            res = {**res, "problem": f"{damaged}: the run is not judged", "verdicts": {}}
        verdicts = {k: res["verdicts"][k] for k in [*CHECKER_ORDER, *sorted(set(res["verdicts"]) - set(CHECKER_ORDER))] if k in res["verdicts"]}
        verdicts = {k: _documented(v, info.get("documented", {}).get(k)) for k, v in verdicts.items()}
        verdict = ("broken" if res["problem"] else "fail" if any(v["verdict"] == "fail" for v in verdicts.values())
                   else "deviation" if any(v["verdict"] == "deviation" for v in verdicts.values()) else "pass")
        out.append({**info, "broker": broker_title(info), "ops": res["ops"], "problem": res["problem"], "verdicts": verdicts, "verdict": verdict, "cpu_s": res.get("cpu_s"),
                    "anomalies": sum(v["anomalies"] for v in verdicts.values())})
    return sorted(out, key=lambda r: (r["product"], r["version"], r["protocol"], r["nemesis"], str(r["seed"]), r["folder"]))


def broker_title(run: dict[str, Any]) -> str:
    from reports.render import PROTOCOL_NAMES

    name = " ".join(x for x in (run["product"], run["version"]) if x)
    return f"{name} · {PROTOCOL_NAMES.get(run['protocol'], run['protocol'])}"


def _documented(judged: dict[str, Any], doc: dict[str, Any] | None) -> dict[str, Any]:
    """The run's own decision on a checker's anomalies (its profile's deviations across a fault, made
    when it ran, where the profile and the fault windows are known) holds here when the history judged
    again shows as many anomalies: then they are the same ones. Otherwise the verdict judged here stands."""
    if not doc or judged["verdict"] != "fail" or doc.get("anomalies") != judged["anomalies"]:
        return judged
    return {**judged, "verdict": doc.get("verdict", judged["verdict"]), "documented": doc}


def matrix(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Anomaly rates per broker (product, version, protocol) and nemesis, over the runs judged.

    A cell: its runs, how many failed, the operations judged, the anomalies (all checkers) and their
    rate per million operations, and the anomalies per checker. A run whose history was mutated on
    purpose (``history_mutation`` or a wire ``mutation`` in its soak.json: a self-check of the checkers) is no result about
    its broker and is left out, counted; a run that could not be judged counts as broken."""
    cells: dict[tuple[str, str], dict[str, Any]] = {}
    left_out = 0
    for r in runs:
        if r.get("mutation"):
            left_out += 1
            continue
        key = (r["broker"], r["nemesis"])
        c = cells.setdefault(key, {"broker": key[0], "nemesis": key[1], "runs": 0, "failed": 0, "broken": 0, "ops": 0,
                                   "anomalies": 0, "by_checker": dict.fromkeys(CHECKER_ORDER, 0)})
        c["runs"] += 1
        c["failed"] += r["verdict"] == "fail"
        c["broken"] += r["verdict"] == "broken"
        c["ops"] += r["ops"] if r["verdict"] != "broken" else 0   # the operations judged: the rate's denominator
        c["anomalies"] += r["anomalies"]
        for name, v in r["verdicts"].items():
            c["by_checker"][name] = c["by_checker"].get(name, 0) + v["anomalies"]
    for c in cells.values():
        c["rate_per_million"] = round(1e6 * c["anomalies"] / c["ops"], 3) if c["ops"] else None
    brokers = sorted({k[0] for k in cells})
    nemeses = sorted({k[1] for k in cells})
    return {"brokers": brokers, "nemeses": nemeses, "cells": [cells[k] for k in sorted(cells)], "left_out_mutated": left_out}


def section(spark: Any, folders: list[str]) -> dict[str, Any]:
    """The report's soak section (matrix.json ``soak``): the runs judged and their matrix."""
    runs = check_runs(spark, folders)
    return {"runs": runs, "matrix": matrix(runs),
            "totals": {"runs": len(runs), "ops": sum(r["ops"] for r in runs), "failed": sum(r["verdict"] == "fail" for r in runs),
                       "broken": sum(r["verdict"] == "broken" for r in runs), "anomalies": sum(r["anomalies"] for r in runs)}}
