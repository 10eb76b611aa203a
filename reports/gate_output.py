"""The gate's decision written out: a console table (rich), Markdown for a pull-request comment, JSON.

The console and Markdown show the rows that matter (every blocking, known, gated-and-changed or
changed row) and one count line for the unchanged rest; ``--all`` shows every row. The JSON holds
the complete table, one object per cell, so a CI can post-process it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from reports.gate import CLASSES

MARK = {"fail": "BLOCKS", "inconclusive": "UNDECIDED"}


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


def _note(r: dict[str, Any]) -> str:
    if r["class"] == "known":
        return f"known: {r['known_reason']}" + (f" {r['link']}" if r["link"] else "")
    if r.get("reason") and r["current"] in ("unsupported", "undocumented", "deviation"):
        return f"reason: {r['reason']}"[:160]
    return (r.get("observed") or "")[:160]


def headline(result: dict[str, Any]) -> str:
    c = result["counts"]
    parts = [f"{n} {name}" for name, n in sorted(c.items(), key=lambda kv: list(CLASSES).index(kv[0]))]
    return (f"gate: {result['outcome']} (exit {result['exit_code']}; levels {', '.join(result.get('levels', ['MUST']))}): "
            f"{len(result['table'])} cells: {', '.join(parts) or 'none'}; {len(result['xpass'])} xpass, {len(result['expired'])} expired")


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
    for r in result["undecided"]:
        console.print(f"UNDECIDED {r['requirement']} [{r['level']}] on {r['column']}: {r.get('observed') or 'error'}", markup=False)
    for r in result["known"]:
        console.print(f"KNOWN {r['requirement']} on {r['column']} ({r['change']}): {r['known_reason']} {r['link'] or ''}".rstrip(), markup=False)
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
    for x in result["xpass"]:
        lines.append(f"- XPASS `{x['requirement']}` on {_md(x['column'])}: passes now; remove it from the manifest ({_md(x['reason'])})")
    for k in result["expired"]:
        lines.append(f"- EXPIRED manifest entry `{k['requirement']}` ({_md(k['target'])}), expired {k['expires']}: {_md(k['reason'])}")
    lines += ["", f"_{_md(headline(result))}_", ""]
    return "\n".join(lines)


def write(result: dict[str, Any], out: Path) -> tuple[Path, Path]:
    """``gate.md`` and ``gate.json`` (schema ``conformance.gate/1``, the complete table) into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    md, js = out / "gate.md", out / "gate.json"
    md.write_text(markdown(result))
    js.write_text(json.dumps(result, indent=1, sort_keys=True, default=str) + "\n")
    return md, js
