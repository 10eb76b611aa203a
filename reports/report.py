"""``conformance report``: many runs in, one compliance report out (HTML, Markdown, JSON, Parquet, CSV)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reports import analysis
from reports.ingest import Ingested, ingest
from reports.render import render_html, render_markdown, write_json

if TYPE_CHECKING:
    from conformance.runner.progress import StepProgress

KILLMATRIX_FILE = "killmatrix.json"


def figures(spark: Any, paths: list[str]) -> tuple[dict[str, Any], Ingested]:
    """Everything the outputs show, from the runs under ``paths``: one Spark pass over the records,
    the per-case table collected once (``result["_cases"]``, for the case pages too), folded here."""
    data = ingest(spark, paths, run_ids=False)
    rows = analysis.case_rows(data.cases)
    cells = analysis.cells(rows)
    result: dict[str, Any] = {
        "cells": sorted(cells, key=lambda c: (c["requirement"], c["column"])),
        "area_scores": analysis.scores(cells, "area"),
        "level_scores": analysis.scores(cells, "level"),
        "flakiness": analysis.flakiness(rows),
        "durations": sorted(data.durations, key=lambda r: (r["column"], r["area"])),
        "summary": {"records": data.counts["ok"], "quarantined": data.counts["quarantined"], "mutated": data.counts["mutated"],
                    "sources": len(data.sources), "quarantined_examples": data.quarantined_examples},
    }
    result["_cases"] = rows
    return result, data


def cells(spark: Any, paths: list[str]) -> tuple[list[dict[str, Any]], dict[str, set[str]]]:
    """Only the matrix cells of the runs under ``paths`` (what the gate needs: no durations, no
    case's latest record), and the run ids whose records each results file holds (a folder run
    into twice holds two)."""
    from urllib.parse import unquote, urlsplit

    data = ingest(spark, paths, durations=False)
    ids: dict[str, set[str]] = {}
    for src, runs in data.run_ids.items():
        key = unquote(urlsplit(src).path) if src.startswith("file:") else src
        ids.setdefault(key, set()).update(runs)
    return analysis.cells(analysis.case_rows(data.cases, latest=False)), ids


def killmatrices(paths: list[str]) -> list[dict[str, Any]]:
    """Self-test kill matrices lying in the given run folders (small JSON, read without Spark)."""
    import glob

    out = []
    for p in paths:
        for folder in (sorted(glob.glob(p)) if glob.has_magic(p) else [p]):
            f = Path(folder) / KILLMATRIX_FILE
            if f.is_file():
                try:
                    out.append(json.loads(f.read_text()))
                except json.JSONDecodeError:
                    continue  # a damaged self-test file does not cost the compliance report
    return out


def run_statuses(files: list[str], baseline_files: list[str], spark: Any | None = None) -> list[dict[str, Any]]:
    """How each run read ended (``run.json``): a run that did not finish is shown as such everywhere,
    its results are real but incomplete."""
    from reports.runs import is_local, read_metas

    out = []
    for role, fs in (("current", files), ("baseline", baseline_files)):
        remote = spark if not all(is_local(f) for f in fs) else None
        for m in read_metas(fs, remote):
            out.append({"role": role, "folder": m.folder, "run_id": m.run_id, "status": m.status if m.problem is None else "unknown",
                        "finished": m.finished, "ended": m.ended,
                        # a broker that stopped answering: the run's restarts of it, and any end of its judging
                        "restarts": list(m.raw.get("restarts") or []), "target_dead": m.raw.get("target_dead")})
    return out


def rule_coverage() -> dict[str, Any]:
    """The spec rules of the catalogue this report was built with, covered by which requirements or
    why not: static data of the suite, not of the runs, so computed outside Spark."""
    from conformance.catalogue.coverage import as_data

    return as_data()


class _Stages:
    """The report's stages as a progress: the one starting ends the one before."""

    def __init__(self, progress: StepProgress | None, names: list[str]) -> None:
        self.progress, self.current = progress, None
        if progress is not None:
            progress.plan(len(names))

    def next(self, name: str, note: str | None = None) -> None:
        if self.progress is None:
            return
        if self.current is not None:
            self.progress.finish(self.current, note=note)
        self.current = name
        self.progress.begin(name)

    def end(self, note: str | None = None) -> None:
        if self.progress is not None and self.current is not None:
            self.progress.finish(self.current, note=note)
            self.current = None


def page_runs(files: list[str], spark: Any) -> dict[str, dict[str, Any]]:
    """run id -> run.json of the runs read (the case pages' rerun command names their target)."""
    from reports.runs import is_local, read_metas

    remote = spark if not all(is_local(f) for f in files) else None
    return {m.run_id: m.raw for m in read_metas(files, remote) if m.run_id}


def empty_figures() -> dict[str, Any]:
    """The compliance figures of no compliance run (a report of soak runs only)."""
    return {"cells": [], "area_scores": [], "level_scores": [], "flakiness": [], "durations": [], "runs": [], "killmatrices": [],
            "summary": {"records": 0, "quarantined": 0, "mutated": 0, "sources": 0, "quarantined_examples": []}}


def build(paths: list[str], out: Path, *, baseline: list[str] | None = None, master: str | None = None, verbose: bool = False,
          progress: StepProgress | None = None) -> dict[str, Any]:
    """The report of the runs under ``paths``: compliance runs (results.jsonl) and soak runs
    (a folder holding soak.json: reports.soak), in any mix."""
    from conformance import __version__
    from reports import case_pages
    from reports.ingest import result_files
    from reports.render import column_title
    from reports.session import spark_run
    from reports.soak import split_paths
    from reports.tables import write_tables

    paths, soak_folders = split_paths(paths)
    files, base_files = (result_files(paths) if paths or not soak_folders else []), result_files(baseline or [])  # a bad path is a one-line error before Spark starts
    compliance = ["read the records, compute the matrix", "read the runs' status", *(["the baseline"] if baseline else []),
                  "each cell's cases"] if files else []
    stages = _Stages(progress, ["start Spark", *compliance, *(["judge the soak runs"] if soak_folders else []), "write Parquet and CSV",
                                "write HTML, Markdown, JSON and the case pages"])
    stages.next("start Spark")
    cases: list[dict[str, Any]] = []
    with spark_run(master, verbose=verbose) as spark:
        if files:
            stages.next("read the records, compute the matrix")
            result, _ = figures(spark, paths)
            tally = Counter("flaky" if c.get("flaky") else c["verdict"] for c in result["cells"])
            note = f"{result['summary']['records']} records, {len(result['cells'])} cells: " + " ".join(f"{v} {n}" for v, n in tally.most_common())
            stages.next("read the runs' status", note)
            result["runs"] = run_statuses(files, base_files, spark)
            if baseline:
                stages.next("the baseline")
                base, _ = figures(spark, baseline)
                result["diff"] = analysis.compare(base["cells"], result["cells"])
            result["killmatrices"] = killmatrices(paths)
            stages.next("each cell's cases")
            cases = case_pages.case_rows(result.pop("_cases"), page_runs(files, spark))
        else:
            result = empty_figures()
        if soak_folders:
            from reports.soak import section

            stages.next("judge the soak runs")
            result["soak"] = section(spark, soak_folders)
        result["rule_coverage"] = rule_coverage()
        result["suite_version"] = __version__
    stages.next("write Parquet and CSV", _soak_note(result.get("soak")))
    out.mkdir(parents=True, exist_ok=True)
    write_tables(result["cells"], out)
    stages.next("write HTML, Markdown, JSON and the case pages")
    (out / "report.html").write_text(render_html(result, out))
    (out / "summary.md").write_text(render_markdown(result))
    write_json(result, out / "matrix.json")
    titles = {c["column"]: column_title(c["column"], result["cells"]) for c in result["cells"]}
    case_pages.write_pages(out, result["cells"], cases, titles)
    stages.end()
    return result


def _soak_note(soak: dict[str, Any] | None) -> str | None:
    if not soak:
        return None
    t = soak["totals"]
    return f"{t['runs']} soak run(s), {t['ops']} ops: {t['failed']} failing, {t['broken']} not judged"
