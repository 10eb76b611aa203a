"""One page per matrix cell (target column x requirement) in the HTML report, as Autobahn's testsuite
has one per case: what ``conformance explain`` prints, for every case of the cell.

Why per cell and not per record: the pipeline is sized for a million records (bench/report_pipeline.py);
a page per record would be a million files. A cell is what a person clicks in the matrix, and its
cases (queue-type variants, ack modes) are few: each is shown at its latest attempt, with how many
attempts it had and their verdicts. The content comes from :func:`conformance.catalogue.explain.sections`,
so the page and the console can never tell two different stories.

The Spark side is the per-case rows of the one pass over the files (reports.groupings), which
carry each case's latest attempt: collected once for the whole report, then the pages are written
by plain Python.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from conformance import unsupported
from reports.schema import VERDICTS

#: The folder of the pages inside the report folder (relative links keep the report one offline folder).
PAGES_DIR = "cases"
def page_path(cell: dict[str, Any]) -> str:
    """``cases/<cell anchor>.html``: the link of a matrix cell, stable across reports."""
    raw = f"{cell['requirement']}-{cell['column']}"
    return f"{PAGES_DIR}/" + "".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in raw) + ".html"


def case_rows(cases: list[dict[str, Any]], runs: dict[str, dict[str, Any]] | None = None) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """(requirement, column) -> the cell's cases, each a record as results.jsonl holds it (for explain).

    ``cases``: the collected per-case rows (reports.analysis.case_rows), which carry each case's
    latest attempt.
    ``runs``: run id -> its run.json (target, adapter, profile for the rerun command): target,
    adapter and profile come from there rather than from every record, which would cost the
    million-record pass three more columns for a few hundred small files read once."""
    runs = runs or {}
    out: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in cases:
        latest = dict(row["latest"] or {})
        meta = runs.get(str(latest.get("run_id")), {})
        record = {**latest, "case_id": row["case_id"], "requirement": row["requirement"],
                  "target": meta.get("target"), "adapter": meta.get("adapter"), "profile": meta.get("profile"),
                  "history": _json_list(latest.get("history")), "wire_trace": _lines(latest.get("wire_trace")),
                  "attempts": row["records"], "verdict_counts": {v: row[f"n_{v}"] for v in VERDICTS if row[f"n_{v}"]}}
        out.setdefault((row["requirement"], row["column"]), []).append(record)
    for cases in out.values():
        cases.sort(key=lambda r: str(r["case_id"]))
    return out


def _json_list(text: Any) -> list[Any] | None:
    """A record's history is JSON text in the Spark schema; the explanation wants the events back."""
    if not text:
        return None
    try:
        value = json.loads(text)
    except (TypeError, ValueError):
        return [{"op": "history", "detail": str(text)}]
    return value if isinstance(value, list) else [value]


def _lines(text: Any) -> list[str] | None:
    """A wire trace: a JSON list of lines (as runs write it) or plain text (older records, the bench)."""
    if not text:
        return None
    if isinstance(text, str) and text.startswith("["):
        try:
            return [str(t) for t in json.loads(text)]
        except ValueError:
            pass
    return str(text).splitlines()


STYLE = """body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",sans-serif;margin:1.2em 2em;color:#222;max-width:80em}
h1{font-size:1.4em;margin:.2em 0} h2{font-size:1.1em;margin:1.2em 0 .2em;border-bottom:1px solid #ddd}
h3{font-size:1em;margin:.8em 0 .2em}
pre{white-space:pre-wrap;background:#fafafa;border:1px solid #eee;padding:.4em;font-size:12px;max-height:30em;overflow:auto}
.v{display:inline-block;padding:0 .5em;font-weight:600}
.pass{background:#2e7d32;color:#fff}.fail{background:#c62828;color:#fff}.error,.blocked{background:#6a1b9a;color:#fff}
.deviation{background:#f9a825;color:#222}.unsupported{background:#cfd8dc;color:#333}.undocumented{background:#b3e5fc;color:#333}
.muted{color:#777} section.case{border-top:3px solid #ddd;margin-top:1.5em}"""


def render_page(cell: dict[str, Any], title: str, cases: list[dict[str, Any]]) -> str:
    """The HTML of one cell's page: a header naming the cell, then per case the explain sections."""
    from conformance.catalogue.explain import sections
    from conformance.catalogue.requirements import catalogue

    reqs = catalogue()
    e = html.escape
    verdict = "flaky" if cell.get("flaky") else unsupported.label(cell)
    parts = ["<!doctype html>", '<html lang="en"><head><meta charset="utf-8">',
             f"<title>{e(str(cell['requirement']))} on {e(title)}</title><style>{STYLE}</style></head><body>",
             '<p><a href="../report.html#matrix">&larr; compliance matrix</a></p>',
             f"<h1>{e(str(cell['requirement']))} [{e(str(cell.get('level')))}] on {e(title)}</h1>",
             f'<p>Cell: <span class="v {e(str(cell.get("verdict")))}">{e(verdict)}</span> (the worst of its cases); spec verdict '
             f"{e(str(cell.get('spec_verdict')))}, vendor verdict {e(str(cell.get('vendor_verdict')))}; {cell.get('cases')} case(s), "
             f"{cell.get('records')} record(s) over {cell.get('runs')} run(s). Each case below at its latest attempt.</p>"]
    if not cases:
        parts.append('<p class="muted">No case record of this cell reached the page builder.</p>')
    for rec in cases:
        run = {"target": rec.get("target"), "adapter": rec.get("adapter"), "profile": rec.get("profile")}
        record = {**rec, "queue_type": None if cell.get("queue_type") in (None, "-") else cell.get("queue_type"),
                  "protocol": cell.get("protocol"), "product": cell.get("product"), "version": cell.get("version")}
        seen = ", ".join(f"{v} {n}" for v, n in rec.get("verdict_counts", {}).items())
        parts.append(f'<section class="case"><h2 id="{e(str(rec["case_id"]))}">{e(str(rec["case_id"]))} '
                     f'<span class="v {e(str(rec.get("verdict")))}">{e(unsupported.label(rec))}</span></h2>'
                     f'<p class="muted">{rec.get("attempts")} attempt(s): {e(seen)}</p>')
        for s in sections(run, record, reqs.get(str(rec.get("requirement")))):
            parts.append(f"<h3>{e(s.title)}</h3><pre>{e(chr(10).join(s.lines))}</pre>")
        parts.append("</section>")
    parts.append("</body></html>\n")
    return "".join(parts)


def write_pages(out: Path, cells: list[dict[str, Any]], cases: dict[tuple[str, str], list[dict[str, Any]]],
                titles: dict[str, str]) -> int:
    """Every cell's page under ``out/cases/``; returns how many were written."""
    import shutil

    folder = Path(out) / PAGES_DIR
    shutil.rmtree(folder, ignore_errors=True)  # a page of an earlier report's cell must not linger as if current
    folder.mkdir(parents=True)
    for cell in cells:
        page = render_page(cell, titles.get(cell["column"], cell["column"]), cases.get((cell["requirement"], cell["column"]), []))
        (Path(out) / page_path(cell)).write_text(page)
    return len(cells)
