"""Rendering the collected figures: one offline HTML page, a Markdown summary, JSON.

No CDN, no script: charts are inline SVG built here, so the page opens the same on a laptop, in a
CI artifact viewer or in a browser with no network.
"""

from __future__ import annotations

import html
import json
import os
import time
from pathlib import Path
from typing import Any

from conformance import unsupported
from conformance.runner.judged import NOT_JUDGED
from reports.case_pages import page_path
from reports.schema import LEVELS, VERDICTS

TEMPLATES = Path(__file__).with_name("templates")
PROBLEM_VERDICTS = ("fail", "error", "blocked", "deviation")
#: The queue type ingest gives a record without one (a requirement that holds for the whole target).
NO_QUEUE_TYPE = "-"
PROTOCOL_NAMES = {"amqp-0-9-1": "AMQP 0-9-1", "amqp-1.0": "AMQP 1.0", "stomp-1.2": "STOMP 1.2"}


def target_title(cell: dict[str, Any]) -> str:
    """``RabbitMQ 3.10.8 · AMQP 0-9-1``: how a person names the target, not the column key (a broker
    that announced no version has none: ``proton-example · AMQP 1.0``)."""
    name = " ".join(str(x) for x in (cell["product"], cell.get("version")) if x)
    return f"{name} · {PROTOCOL_NAMES.get(cell['protocol'], cell['protocol'])}"


def queue_type_label(queue_type: str | None) -> str:
    return "any queue type" if queue_type in (None, NO_QUEUE_TYPE) else f"{queue_type} queue"


def matrix_layout(cells: list[dict[str, Any]], requirements: list[dict[str, Any]],
                  grid: dict[tuple[str, str], dict[str, Any]]) -> dict[str, Any]:
    """Targets as column groups (one per product, version and protocol), their queue types as the
    columns under them, and per requirement the cells of each group in order.

    Why: a requirement without a queue type (basic.get-empty, delivery tags) holds for its whole
    target. As a column of its own (``RabbitMQ 3.10.8 amqp-0-9-1 -``) it looked like a fourth
    target; here its cell spans its target's queue-type columns instead. A target with no queue types
    at all, or a requirement with both kinds of cell, keeps an "any queue type" column."""
    groups: dict[tuple[str, str, str], dict[str, Any]] = {}
    for c in cells:
        g = groups.setdefault((c["product"], c["version"], c["protocol"]), {"title": target_title(c), "typed": {}, "untyped": None})
        if c.get("queue_type") in (None, NO_QUEUE_TYPE):
            g["untyped"] = c["column"]
        else:
            g["typed"][c["column"]] = c["queue_type"]
    targets, rows = [], {}
    for key in sorted(groups, key=lambda k: tuple(x or "" for x in k)):
        g = groups[key]
        typed = sorted(g["typed"], key=lambda col: g["typed"][col])
        mixed = g["untyped"] is not None and any(
            (r["requirement"], g["untyped"]) in grid and any((r["requirement"], col) in grid for col in typed) for r in requirements)
        cols = [{"column": col, "label": queue_type_label(g["typed"][col])} for col in typed]
        if g["untyped"] is not None and (mixed or not typed):
            cols.append({"column": g["untyped"], "label": queue_type_label(None)})
        targets.append({"title": g["title"], "columns": cols})
        for r in requirements:
            whole = grid.get((r["requirement"], g["untyped"])) if g["untyped"] else None
            if whole is not None and not any((r["requirement"], col) in grid for col in typed):
                entries = [{"cell": whole, "span": len(cols), "note": "any queue type" if len(cols) > 1 else ""}]
            else:
                entries = [{"cell": grid.get((r["requirement"], c["column"])), "span": 1, "note": ""} for c in cols]
            rows.setdefault(r["requirement"], []).extend(entries)
    return {"targets": targets, "rows": rows}


def column_title(column: str, cells: list[dict[str, Any]]) -> str:
    """A score table's column header in the matrix's words (``RabbitMQ 3.10.8 · AMQP 0-9-1, classic queue``)."""
    for c in cells:
        if c["column"] == column:
            return f"{target_title(c)}, {queue_type_label(c.get('queue_type'))}"
    return column


def _anchor(cell: dict[str, Any]) -> str:
    raw = f"cell-{cell['requirement']}-{cell['column']}"
    return "".join(ch if ch.isalnum() or ch in "-_" else "-" for ch in raw)


def bar_chart(items: list[tuple[str, float]], *, unit: str, title: str, width: int = 720) -> str:
    """Horizontal bars, one per label: the values people compare at a glance."""
    if not items:
        return "<p>No data.</p>"
    top = max(v for _, v in items) or 1.0
    row, label_w = 18, 260
    height = row * len(items) + 24
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" aria-label="{html.escape(title)}">',
             f'<text x="0" y="12" font-size="12" font-weight="600">{html.escape(title)}</text>']
    for i, (label, value) in enumerate(items):
        y = 20 + i * row
        w = max(1.0, (width - label_w - 80) * value / top)
        parts.append(f'<text x="{label_w - 6}" y="{y + 12}" font-size="11" text-anchor="end">{html.escape(label[:44])}</text>')
        parts.append(f'<rect x="{label_w}" y="{y + 2}" width="{w:.1f}" height="{row - 5}" fill="#5c6bc0"/>')
        parts.append(f'<text x="{label_w + w + 4:.1f}" y="{y + 12}" font-size="11">{value:.3g} {unit}</text>')
    parts.append("</svg>")
    return "".join(parts)


def flaky_label(cell: dict[str, Any]) -> str:
    """A cell whose case both passed and failed: never shown as plainly failing or passing."""
    return f"flaky {100 * cell['passes'] / cell['decided']:.0f}% ({cell['passes']}/{cell['decided']})" if cell.get("decided") else "flaky"


def flaky_cells(cells: list[dict[str, Any]]) -> list[dict[str, Any]]:
    order = {lv: i for i, lv in enumerate(LEVELS)}
    return sorted(({**c, "label": flaky_label(c)} for c in cells if c.get("flaky")),
                  key=lambda c: (order.get(c["level"], 9), c["pass_rate"] or 0, c["requirement"], c["column"]))


def unfinished_lines(result: dict[str, Any]) -> list[str]:
    """One sentence per run that did not finish, for every output's banner."""
    return [f"{r['role']} run {r['folder']} did not finish: {r['ended']}; its results are incomplete"
            for r in result.get("runs", []) if not r["finished"]]


def restart_lines(result: dict[str, Any]) -> list[str]:
    """One sentence per run whose target stopped answering: which case hung it, how often the run
    restarted it, and whether its judging ended there (conformance.runner.hangs)."""
    lines = []
    for r in result.get("runs", []):
        restarts = r.get("restarts") or []
        if restarts:
            causes = "; ".join(f"after {x.get('after_case')} hung it ({x.get('cause')})" for x in restarts)
            lines.append(f"{r['role']} run {r['folder']} restarted its target {len(restarts)} time(s): {causes}")
        if r.get("target_dead"):
            lines.append(f"{r['role']} run {r['folder']} stopped judging its target: {r['target_dead']}")
    return lines


def context(result: dict[str, Any]) -> dict[str, Any]:
    from reports.analysis import undrawn_columns

    undrawn = undrawn_columns(result["cells"])  # a configuration no run has a result in is no column (matrix.json keeps its cells)
    cells = [c for c in result["cells"] if c["column"] not in undrawn]
    columns = sorted({c["column"] for c in cells})
    reqs: dict[str, dict[str, Any]] = {}
    for c in cells:
        reqs.setdefault(c["requirement"], {"requirement": c["requirement"], "level": c["level"], "area": c["area"]})
    order = {lv: i for i, lv in enumerate(LEVELS)}
    requirements = sorted(reqs.values(), key=lambda r: (r["area"], order.get(r["level"], 9), r["requirement"]))
    grid = {}
    details = []
    for c in cells:
        c = dict(c)
        c["label"] = flaky_label(c) if c.get("flaky") else unsupported.label(c)  # "unsupported (refused)"
        c["page"] = page_path(c)  # every cell links to its case page (reports.case_pages)
        if c["verdict"] in PROBLEM_VERDICTS:
            c["anchor"] = _anchor(c)
            details.append(c)
        grid[(c["requirement"], c["column"])] = c
    rank = {v: i for i, v in enumerate(VERDICTS)}
    details.sort(key=lambda c: (rank.get(c["verdict"], 9), order.get(c["level"], 9), c["requirement"], c["column"]))
    by_col: dict[str, dict[str, Any]] = {}
    for s in result["level_scores"]:
        if s["column"] in undrawn:
            continue
        k = by_col.setdefault(s["column"], {"column": s["column"], "pass": 0, "judged": 0, **dict.fromkeys(NOT_JUDGED, 0)})
        if s["level"] == "MUST":
            for key in ("pass", "judged", *NOT_JUDGED):  # error and blocked: beside the score, never in it
                k[key] += s[key]
    kpis = [{**k, "score": (k["pass"] / k["judged"]) if k["judged"] else None} for k in by_col.values()]
    durations = sorted(((f"{d['column']} · {d['area']}", d["p95_s"] or 0.0) for d in result["durations"] if d["column"] not in undrawn), key=lambda x: -x[1])[:30]
    flaky = [f for f in result["flakiness"] if f["flaky"]]
    kms = []
    for km in result.get("killmatrices", []):
        km = dict(km)
        cellmap = {(c["case"], c["mutation"]): ("error" if c["verdict"] == "error" else "ran") for c in km.get("cells", [])}
        for k in km.get("kills", []):
            cellmap[(k["case"], k["mutation"])] = "kill"
        km["cellmap"] = cellmap
        km.setdefault("unproven_deviation", [])
        kms.append(km)
    return {
        "columns": columns, "requirements": requirements, "grid": grid, "details": details, "verdicts": VERDICTS,
        "matrix": matrix_layout(cells, requirements, grid), "column_titles": {col: column_title(col, cells) for col in columns},
        "areas": sorted({c["area"] for c in cells}), "levels": [lv for lv in LEVELS if any(c["level"] == lv for c in cells)],
        "area_scores": {(s["column"], s["area"]): s for s in result["area_scores"]},
        "level_scores": {(s["column"], s["level"]): s for s in result["level_scores"]},
        "kpis": kpis, "diff": result.get("diff"), "flaky": flaky, "repeated": len(result["flakiness"]),
        "duration_chart": bar_chart(durations, unit="s", title="95th percentile case duration by target and area"),
        "flaky_chart": bar_chart([(f"{f['column'][:20]} · {f['case_id'][-24:]}", f["pass_rate"] * 100) for f in flaky[:30]],
                                 unit="% pass", title="Pass rate of flaky cases"),
        "killmatrices": kms, "summary": result["summary"], "coverage": coverage_context(result, grid, columns),
        "unfinished": [r for r in result.get("runs", []) if not r["finished"]], "flaky_cells": flaky_cells(cells),
        "restart_lines": restart_lines(result),
        "undrawn": [{**u, "title": column_title(u["column"], result["cells"])} for u in undrawn.values()],
        "generated": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "version": result.get("suite_version", ""),
    }


def coverage_context(result: dict[str, Any], grid: dict[tuple[str, str], dict[str, Any]], columns: list[str]) -> dict[str, Any] | None:
    """The report's spec-coverage section: each rule with its covering requirements and their cells
    in this report (worst verdict per target column), or why no requirement covers it."""
    data = result.get("rule_coverage")
    if not data:
        return None
    rules = []
    for r in data["rules"]:
        reqs = [{"id": req, "cells": [grid.get((req, col)) for col in columns]} for req in r["requirements"]]
        rules.append({**r, "covering": reqs})
    return {"rules": rules, "figures": data["figures"]}


def _href(path: str, out: Path | None) -> str:
    """A link from the report's folder to a local file (relative: the report and its runs move together)."""
    import os
    from urllib.parse import quote

    if out is None:
        return Path(path).resolve().as_uri()
    return quote(os.path.relpath(path, Path(out).resolve()))


def soak_context(result: dict[str, Any], out: Path | None = None) -> dict[str, Any] | None:
    """The soak section (reports.soak): the matrix as rows of brokers over nemesis columns, each run
    with its verdicts and links, and the anomalies by checker and kind over all runs."""
    from conformance.soak.checkers import order, queue, redelivery, tx

    soak = result.get("soak")
    if not soak:
        return None
    m = soak["matrix"]
    grid = {(c["broker"], c["nemesis"]): c for c in m["cells"]}
    rows = [{"broker": b, "cells": [grid.get((b, n)) for n in m["nemeses"]]} for b in m["brokers"]]
    runs = []
    for r in soak["runs"]:
        links = [{"name": name, "href": _href(os.path.join(r["folder"], name), out)} for name in ("soak.json", "history.jsonl")]
        anomalies = [{"checker": name, **a} for name, v in r["verdicts"].items() for a in v.get("listed", [])]
        runs.append({**r, "links": links, "listed": anomalies,
                     "recorded_differs": bool(r["recorded"]) and not r.get("mutation")
                     and any(r["recorded"].get(k) not in (None, v["verdict"]) for k, v in r["verdicts"].items())})
    kinds = []
    for mod in (queue, redelivery, order, tx):
        for kind in mod.KINDS:
            counted = [(r, r["verdicts"].get(mod.NAME, {}).get("counts", {}).get(kind, 0)) for r in soak["runs"]]
            kinds.append({"checker": mod.NAME, "kind": kind, "total": sum(n for r, n in counted if not r.get("mutation")),
                          "runs": sum(1 for r, n in counted if n and not r.get("mutation")),
                          "mutated": sum(n for r, n in counted if r.get("mutation"))})
    return {"matrix": m, "rows": rows, "runs": runs, "kinds": kinds, "totals": soak["totals"], "checkers": ("queue", "redelivery", "order", "tx")}


def render_html(result: dict[str, Any], out: Path | None = None) -> str:
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), autoescape=True, trim_blocks=False)
    return env.get_template("report.html.j2").render(**context(result), soak=soak_context(result, out))


def render_markdown(result: dict[str, Any], html_name: str = "report.html") -> str:
    """Short enough for a pull-request comment: scores, regressions, what fails."""
    ctx = context(result)
    lines = ["## Broker compliance", ""]
    for text in unfinished_lines(result):
        lines.append(f"> :warning: **UNFINISHED RUN**: {text}")
    for text in ctx["restart_lines"]:
        lines.append(f"> :warning: **TARGET STOPPED ANSWERING**: {text}")
    if ctx["unfinished"] or ctx["restart_lines"]:
        lines.append("")
    lines.append("| target | MUST pass | fail | flaky | deviation | error | blocked | unsupported |")
    lines.append("|---|---:|---:|---:|---:|---:|---:|---:|")
    per: dict[str, dict[str, int]] = {}
    for c in result["cells"]:  # kpis: the drawn columns only
        counts = per.setdefault(c["column"], {**dict.fromkeys(VERDICTS, 0), "flaky": 0})
        counts["flaky" if c.get("flaky") else c["verdict"]] += 1
    for k in ctx["kpis"]:
        v = per.get(k["column"], {})
        score = f"{100 * k['score']:.0f}% ({k['pass']}/{k['judged']})" if k["score"] is not None else "n/a"
        lines.append(f"| {k['column']} | {score} | {v.get('fail', 0)} | {v.get('flaky', 0)} | {v.get('deviation', 0)} | {v.get('error', 0)} | {v.get('blocked', 0)} | {v.get('unsupported', 0)} |")
    if ctx["undrawn"]:
        lines += ["", "_Not drawn (no run has a result in them, every cell unsupported): "
                      + "; ".join(f"{u['title']} ({u['cells']} cells)" for u in ctx["undrawn"]) + "._"]
    diff = result.get("diff")
    if diff is not None:
        newly = [d for d in diff if d["change"] == "newly failing"]
        vanished = [d for d in diff if d["change"] == "vanished"]
        lines += ["", f"**Against the baseline:** {len(newly)} newly failing, {len(vanished)} vanished (not in these runs), "
                      f"{sum(d['change'] == 'fixed' for d in diff)} fixed, {sum(d['change'] == 'still failing' for d in diff)} still failing."]
        for d in vanished[:10]:
            lines.append(f"- :grey_question: `{d['requirement']}` [{d['level']}] on {d['baseline_column']}: {d['baseline']} on the baseline, not run now")
        for d in newly[:20]:
            lines.append(f"- :x: `{d['requirement']}` [{d['level']}] on {d['column']}: {d['baseline']} -> {d['current']}: {(d['observed'] or '')[:160]}")
    if ctx["flaky_cells"]:
        lines += ["", "**Flaky** (a case both passed and failed over its repetitions; pass rate):"]
        for c in ctx["flaky_cells"][:20]:
            lines.append(f"- `{c['requirement']}` [{c['level']}] on {c['column']}: {c['label']}")
    for title, verdicts in (("Failing", ("fail",)), ("Not judged (the suite or its assumptions broke, not the broker)", NOT_JUDGED)):
        listed = [c for c in ctx["details"] if c["verdict"] in verdicts and not c.get("flaky")]
        if listed:
            lines += ["", f"**{title}:**"]
            for c in listed[:20]:
                lines.append(f"- `{c['requirement']}` [{c['level']}] on {c['column']}: {c['verdict'] + ': ' if c['verdict'] in NOT_JUDGED else ''}"
                             f"{(c['observed'] or '')[:160]}")
            if len(listed) > 20:
                lines.append(f"- ... {len(listed) - 20} more in {html_name}")
    soak = soak_context(result)
    if soak:
        t = soak["totals"]
        lines += ["", (f"**Soak runs:** {t['runs']} run(s), {t['ops']} operations judged, {t['failed']} failing, {t['broken']} not judged; "
                       "anomalies per million operations by broker and nemesis:"), "",
                  "| broker | " + " | ".join(soak["matrix"]["nemeses"]) + " |", "|---|" + "---:|" * len(soak["matrix"]["nemeses"])]
        for row in soak["rows"]:
            lines.append(f"| {row['broker']} | " + " | ".join(
                "" if c is None else f"{c['rate_per_million']:g} ({c['failed']}/{c['runs']} failing)" for c in row["cells"]) + " |")
        for r in soak["runs"]:
            if r["verdict"] != "pass":
                found = ", ".join(f"{k} {v['anomalies']}" for k, v in r["verdicts"].items() if v["anomalies"])
                lines.append(f"- {'self-check ' if r.get('mutation') else ''}{r['verdict']}: {r['broker']}, {r['nemesis']}, seed {r['seed']} "
                             f"({r['folder']}): {r['problem'] or found}")
    s = result["summary"]
    lines += ["", f"_{s['records']} case records, {s['quarantined']} quarantined line(s). Full report: {html_name}_", ""]
    return "\n".join(lines)


def write_json(result: dict[str, Any], path: Path) -> None:
    keep = {k: v for k, v in result.items() if k != "killmatrices"}
    keep["schema"] = "conformance.report/1"
    path.write_text(json.dumps(keep, indent=1, sort_keys=True, default=str) + "\n")
