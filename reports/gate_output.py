"""The gate's decision written out: a console table (rich), Markdown for a pull-request comment, JSON.

The console and Markdown show the rows that matter (every blocking, known, gated-and-changed or
changed row) and one count line for the unchanged rest; ``--all`` shows every row. The JSON holds
the complete table, one object per cell, so a CI can post-process it.

When the two sides ran under different profiles, all three list every profile difference with the
cells it touched (``profiles`` in the JSON; reports.profile_diff).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from reports.gate import CLASSES
from reports.profile_diff import brief, case_name

MARK = {"fail": "BLOCKS", "inconclusive": "UNDECIDED"}
#: Cells listed under one profile difference on the console and in Markdown (gate.json has them all).
CELLS_SHOWN = 12


def shown(result: dict[str, Any], everything: bool = False) -> tuple[list[dict[str, Any]], int]:
    """The rows to show, and how many unchanged rows are summarised instead."""
    rows = result["table"]
    if everything:
        return rows, 0
    keep = [r for r in rows if r["class"] != "unchanged" or r["blocking"]]
    return keep, len(rows) - len(keep)


def _cell(state: str | None, rate: str | None) -> str:
    if state is None:
        return "—"
    return f"{state} {rate}" if rate else state


def _touched(c: dict[str, Any]) -> str:
    """A cell a profile difference touched, in one line."""
    mark = " BLOCKS" if c["blocking"] == "fail" else ""
    return (f"{c['requirement']} on {c['column']} ({case_name(c['case_id'])}): "
            f"{c['baseline'] or '—'} -> {c['current'] or '—'} ({c['class']}){mark}")


def _difference(d: dict[str, Any]) -> str:
    fields = f" ({', '.join(d['fields'])})" if d["fields"] else ""
    b, c = brief(d)
    return f"{d['change']} {d['section']} {d['key']}{fields}: {b} -> {c}"


def _comparison(p: dict[str, Any]) -> str:
    b, c = p["baseline"], p["current"]
    return (f"PROFILE {p['product']} {p['protocol']}: baseline {b['profile']} ({b['digest'][:12]}) vs current "
            f"{c['profile']} ({c['digest'][:12]}): {len(p['differences'])} difference(s), "
            f"{sum(1 for d in p['differences'] if d['cells'])} of them touching cells of these runs")


def profile_lines(result: dict[str, Any]) -> list[str]:
    """Every profile difference and the cells it touched, as plain lines (console, CI log)."""
    lines: list[str] = []
    for p in result.get("profiles", []):
        lines.append(_comparison(p))
        for side in ("baseline", "current"):
            if not p[side]["origin"].startswith("run.json of "):
                lines.append(f"  note ({side}): {p[side]['origin']}")
        for d in p["differences"]:
            lines.append(f"  {_difference(d)}")
            cells = d["cells"]
            lines += [f"    touched {_touched(c)}" for c in cells[:CELLS_SHOWN]]
            if len(cells) > CELLS_SHOWN:
                lines.append(f"    ... and {len(cells) - CELLS_SHOWN} more cell(s) (gate.json lists them all)")
            if not cells:
                lines.append("    touched no cell of these runs")
    return lines


def _note(r: dict[str, Any]) -> str:
    if r.get("profile_differences") and r["class"] in ("excused", "known"):
        text = "profile: " + "; ".join(r["profile_differences"])
        return (f"known: {r['known_reason']}; " if r["class"] == "known" else "") + text[:200]
    if r["class"] == "known":
        return f"known: {r['known_reason']}" + (f" {r['link']}" if r["link"] else "")
    if r.get("reason") and r["current"] in ("unsupported", "undocumented", "deviation"):
        return f"reason: {r['reason']}"[:160]
    return (r.get("observed") or "")[:160]


def headline(result: dict[str, Any]) -> str:
    c = result["counts"]
    parts = [f"{n} {name}" for name, n in sorted(c.items(), key=lambda kv: list(CLASSES).index(kv[0]))]
    return (f"gate: {result['outcome']} (exit {result['exit_code']}; levels {', '.join(result.get('levels', ['MUST']))}): "
            f"{len(result['table'])} cells: {', '.join(parts) or 'none'}; {len(result['xpass'])} xpass, {len(result['expired'])} expired"
            + "".join(f"; profile {p['baseline']['profile']} -> {p['current']['profile']}: {len(p['differences'])} difference(s)"
                      for p in result.get("profiles", [])))


def print_console(result: dict[str, Any], *, everything: bool = False) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(highlight=False, soft_wrap=True)  # plain lines stay whole: greppable in a CI log
    if not console.is_terminal:
        console.width = max(console.width, 140)  # a CI log is not 80 columns; folded ids are unreadable
    rows, hidden = shown(result, everything)
    table = Table(title="Gate: every cell of baseline ∪ current (details below)", show_lines=False)
    for name in ("", "class", "requirement", "level", "target", "baseline", "current"):
        table.add_column(name, overflow="fold")
    style = {"fail": "bold red", "inconclusive": "bold magenta"}
    for r in rows:
        table.add_row(MARK.get(r["blocking"] or "", ""), r["class"], r["requirement"], r["level"], r["column"] or "",
                      _cell(r["baseline"], r["baseline_rate"]), _cell(r["current"], r["current_rate"]),
                      style=style.get(r["blocking"] or ""))
    if rows:
        console.print(table)
    if hidden:
        console.print(f"{hidden} unchanged cell(s) not shown (--all shows them)", markup=False)
    for r in result["blocking"]:  # Expected vs Actual of what blocks, greppable in a CI log
        console.print(f"{r['class'].upper()} {r['requirement']} [{r['level']}] on {r['column']}: "
                      f"{_cell(r['baseline'], r['baseline_rate'])} -> {_cell(r['current'], r['current_rate'])}", markup=False)
        if r["current"] is not None:
            console.print(f"  Expected: {r.get('expected') or ''}\n  Actual:   {r.get('observed') or ''}", markup=False)
        if r.get("reason"):
            console.print(f"  Reason:   {r['reason']}", markup=False)
        if r.get("known_bug"):
            console.print(f"  Known bug: {r['known_bug']}", markup=False)
        if r.get("profile_differences"):
            console.print(f"  Profile:  {'; '.join(r['profile_differences'])}", markup=False)
    for r in result["undecided"]:
        console.print(f"UNDECIDED {r['requirement']} [{r['level']}] on {r['column']}: {r.get('observed') or 'error'}", markup=False)
    for r in result["known"]:
        console.print(f"KNOWN {r['requirement']} on {r['column']} ({r['change']}): {r['known_reason']} {r['link'] or ''}".rstrip(), markup=False)
    for line in profile_lines(result):
        console.print(line, markup=False)
    for x in result["xpass"]:
        console.print(f"XPASS {x['requirement']} on {x['column']}: passes now although known as failing ({x['reason']}); remove it from the manifest", markup=False)
    for k in result["expired"]:
        console.print(f"EXPIRED known deviation {k['requirement']} ({k['target']}) expired {k['expires']}: {k['reason']}", markup=False)
    for cause in result["causes"]:
        console.print(f"cause: {cause}", markup=False)
    console.print(headline(result), markup=False)


def _md(text: str | None) -> str:
    return (text or "").replace("|", "\\|").replace("\n", " ")


def markdown(result: dict[str, Any], *, everything: bool = False) -> str:
    icon = {"PASSED": ":white_check_mark:", "FAILED": ":x:", "INCONCLUSIVE": ":warning:"}[result["outcome"]]
    lines = [f"## Release gate: {icon} {result['outcome']} (exit {result['exit_code']})", ""]
    for cause in result["causes"]:
        lines.append(f"- **cause:** {_md(cause)}")
    if result["causes"]:
        lines.append("")
    rows, hidden = shown(result, everything)
    if rows:
        lines += ["| | class | requirement | level | target | baseline | current | note |", "|---|---|---|---|---|---|---|---|"]
        for r in rows:
            lines.append(f"| {MARK.get(r['blocking'] or '', '')} | {r['class']} | `{r['requirement']}` | {r['level']} | {_md(r['column'])} | "
                         f"{_md(_cell(r['baseline'], r['baseline_rate']))} | {_md(_cell(r['current'], r['current_rate']))} | {_md(_note(r))} |")
    if hidden:
        lines += ["", f"_{hidden} unchanged cell(s) not shown._"]
    lines += _profile_markdown(result)
    for x in result["xpass"]:
        lines.append(f"- XPASS `{x['requirement']}` on {_md(x['column'])}: passes now; remove it from the manifest ({_md(x['reason'])})")
    for k in result["expired"]:
        lines.append(f"- EXPIRED manifest entry `{k['requirement']}` ({_md(k['target'])}), expired {k['expires']}: {_md(k['reason'])}")
    lines += ["", f"_{_md(headline(result))}_", ""]
    return "\n".join(lines)


def _profile_markdown(result: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    for p in result.get("profiles", []):
        b, c = p["baseline"], p["current"]
        lines += ["", f"### Profile differences: {_md(p['product'])} {_md(p['protocol'])}: `{b['profile']}` → `{c['profile']}`", ""]
        lines += [f"- note ({side}): {_md(p[side]['origin'])}" for side in ("baseline", "current") if not p[side]["origin"].startswith("run.json of ")]
        if not p["differences"]:
            lines.append("_The two profiles differ in nothing the gate compares (title, checked)._")
            continue
        lines += ["", "| change | section | key | baseline | current | cells touched |", "|---|---|---|---|---|---|"]
        for d in p["differences"]:
            cells = [f"{'**BLOCKS** ' if x['blocking'] == 'fail' else ''}`{x['requirement']}` {_md(x['column'])} "
                     f"({_md(case_name(x['case_id']))}): {x['baseline'] or '—'} → {x['current'] or '—'} ({x['class']})"
                     for x in d["cells"][:CELLS_SHOWN]]
            if len(d["cells"]) > CELLS_SHOWN:
                cells.append(f"… and {len(d['cells']) - CELLS_SHOWN} more (gate.json)")
            key = f"{d['key']} ({', '.join(d['fields'])})" if d["fields"] else d["key"]
            b, c = brief(d)
            lines.append(f"| {d['change']} | {d['section']} | `{_md(key)}` | {_md(b)} | {_md(c)} | "
                         f"{'<br>'.join(cells) or 'none'} |")
    return lines


def write(result: dict[str, Any], out: Path) -> tuple[Path, Path]:
    """``gate.md`` and ``gate.json`` (schema ``conformance.gate/1``, the complete table) into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    md, js = out / "gate.md", out / "gate.json"
    md.write_text(markdown(result))
    js.write_text(json.dumps(result, indent=1, sort_keys=True, default=str) + "\n")
    return md, js
