"""The kill matrix's files: ``killmatrix.json`` (also beside the clean run's results, for
``conformance report``), ``killmatrix.md`` and a single-file ``killmatrix.html``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from conformance.runner.selftest.plan import PROVABLE

KILLMATRIX_FILE = "killmatrix.json"


def write(out: Path, matrix: dict[str, Any]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    text = json.dumps(matrix, indent=1, sort_keys=True, default=str)
    (out / KILLMATRIX_FILE).write_text(text + "\n")
    clean = out / "runs" / "clean"
    if clean.is_dir():  # `conformance report <out>/runs/clean` shows the suite's strength beside the results
        (clean / KILLMATRIX_FILE).write_text(text + "\n")
    (out / "killmatrix.md").write_text(markdown(matrix))
    (out / "killmatrix.html").write_text(html(matrix))


def markdown(m: dict[str, Any]) -> str:
    c = m["counts"]
    lines = [
        f"# Self-test kill matrix: {m['product']} {m['version']} over {m['protocol']} (profile {m['profile']})",
        "",
        f"{c['cases']} cases ({c['provable']} provable: pass or documented deviation on the clean run), {c['mutations']} mutations, "
        f"{c['kills']} kills, {c['killed_cases']} cases killed, {c['blind_spots']} blind spots, {c['unexercised']} unexercised, "
        f"{c['unproven']} unproven ({c['unproven_must']} MUST, {c['unproven_deviation']} documented deviations, "
        f"{c.get('unproven_no_store', 0)} passes after a restart on a target without a store), "
        f"{c['false_alarms']} false alarms, {c.get('known_failures', 0)} known failures; {m['wall_s']:.0f} s.",
        "",
        "**Result: " + ("OK**" if m["ok"] else "PROBLEMS**\n\n" + "\n".join(f"- {p}" for p in m["problems"])),
        "",
        *_known_failures_md(m),
        "## Mutations",
        "",
        "| mutation | frames rewritten | cases run | killed requirements | declared to break | missed | errors |",
        "|---|---:|---:|---|---|---|---:|",
    ]
    for mu in m["mutations"]:
        lines.append(f"| `{mu['name']}` | {mu['frames_rewritten']} | {mu['cases_run']} | {', '.join(mu['killed_requirements']) or '—'} | "
                     f"{', '.join(mu['breaks']) or '(none declared)'} | {', '.join(mu['missed']) or ''} | {len(mu['errors'])} |")
    lines += ["", "## Cases", "", "| case | level | clean | killed by |", "|---|---|---|---|"]
    for case in m["cases"]:
        lines.append(f"| `{case['case']}` | {case['level']} | {case['clean']} | {', '.join(case['killed_by']) or ('**unproven**' if case['clean'] in PROVABLE else '')} |")
    return "\n".join(lines) + "\n"


def _known_failures_md(m: dict[str, Any]) -> list[str]:
    """The clean run's fails the profile names as known broker bugs, open upstream: the broker's, not
    false alarms, and no mutation can prove a case there."""
    known = m.get("known_failures") or []
    if not known:
        return []
    return ["## Known failures (broker bugs open upstream: not false alarms, not provable)", "",
            *(f"- `{k['case']}`: {k['known_bug']}" for k in known), ""]


def html(m: dict[str, Any]) -> str:
    """A single-file page (no scripts, no external assets): the cases × mutations grid at a glance."""
    from html import escape as e

    muts = [mu["name"] for mu in m["mutations"]]
    cell: dict[tuple[str, str], str] = {(c["case"], c["mutation"]): c["verdict"] for c in m["cells"]}
    killed = {(k["case"], k["mutation"]): k for k in m["kills"]}
    c = m["counts"]
    head = "".join(f'<th class="v" title="{e(mu["description"])}"><div>{i + 1}. {e(mu["name"])}</div></th>' for i, mu in enumerate(m["mutations"]))
    rows = []
    for case in m["cases"]:
        tds = []
        for name in muts:
            k = killed.get((case["case"], name))
            v = cell.get((case["case"], name))
            if k is not None:
                tds.append(f'<td class="k" title="{e(name)}: {e(k["observed"])}">&#x2715;</td>')
            elif v == "error":
                tds.append(f'<td class="e" title="{e(name)}: error">E</td>')
            elif v is not None:
                tds.append(f'<td class="s" title="{e(name)}: {e(v)}">&middot;</td>')
            else:
                tds.append("<td></td>")
        provable = case["clean"] in PROVABLE
        cls = "unproven" if provable and not case["killed_by"] else ("na" if not provable else "")
        rows.append(f'<tr class="{cls}"><th>{e(case["case"])}</th><td>{e(case["level"])}</td><td>{e(case["clean"])}</td>{"".join(tds)}</tr>')
    problems = "".join(f"<li>{e(p)}</li>" for p in m["problems"]) or "<li>none</li>"
    known_items = "".join(f"<li>{e(k['case'])}: {e(k['known_bug'])}</li>" for k in m.get("known_failures") or [])
    known = f"\n<p>Known failures (broker bugs open upstream: not false alarms, not provable):</p><ul>{known_items}</ul>" if known_items else ""
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>Kill matrix {e(m['product'])} {e(m['version'])} {e(m['protocol'])}</title>
<style>body{{font:13px system-ui,sans-serif;margin:1em}}table{{border-collapse:collapse}}td,th{{border:1px solid #ddd;padding:1px 4px}}
th.v{{height:14em;white-space:nowrap;vertical-align:bottom}}th.v div{{transform:rotate(-60deg);width:1.4em;transform-origin:left bottom}}
td.k{{background:#c62828;color:#fff;text-align:center}}td.e{{background:#f9a825;text-align:center}}td.s{{color:#999;text-align:center}}
tr.unproven th{{background:#ffe082}}tr.na{{color:#aaa}}tbody th{{text-align:left;font-weight:normal;white-space:nowrap}}</style></head><body>
<h1>Self-test kill matrix: {e(m['product'])} {e(m['version'])} over {e(m['protocol'])}</h1>
<p>{c['cases']} cases ({c['provable']} provable), {c['mutations']} mutations, <b>{c['kills']} kills</b>, {c['blind_spots']} blind spots,
{c['unproven']} unproven ({c['unproven_must']} MUST), {c['false_alarms']} false alarms, {c.get('known_failures', 0)} known failures; {m['wall_s']:.0f} s. Result: <b>{'OK' if m['ok'] else 'PROBLEMS'}</b></p>
<ul>{problems}</ul>{known}
<p>&#x2715;: the case failed under the mutation (hover: what it observed); E: error; &middot;: ran and passed; blank: the mutation never touched the case.
Yellow rows: provable but unproven. Grey rows: not provable on this target (unsupported, not applicable).</p>
<table><thead><tr><th>case</th><th>level</th><th>clean</th>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></body></html>
"""
