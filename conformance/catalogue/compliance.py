"""The suite's spec verdicts beside a vendor's own rule-by-rule grades.

A vendor grades rules in its own words (conformance/catalogue/data/rules/vendor/<vendor>-compliance.yaml, e.g.
RabbitMQ's "Compatibility and Conformance" table). For every rule both the suite covers and the
vendor grades, :func:`compare` puts the spec verdicts of a run (results.jsonl) on the covering
requirements beside the vendor's grade and says whether they agree:

* the vendor says it conforms (``ok``, or ``does`` for a SHOULD) and every spec verdict is pass, or
* the vendor says it does not (``planned``, ``failing``, ``doesn't`` for a SHOULD) and a spec
  verdict is fail (its vendor verdict may be ``deviation``, when the profile cites the grade).

``does``/``doesn't`` on a MAY or MAY NOT rule says whether the server exercises an option, not
whether it conforms: listed, not counted as agreement or disagreement.

    python3 -m conformance.catalogue.compliance RESULTS.jsonl [--out docs/rabbitmq-compliance-comparison.md]
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Iterable

from conformance import yamlio
from conformance.catalogue.coverage import RuleCoverage, coverage
from conformance.errors import UsageError

CONFORMS = {"ok"}
DOES_NOT = {"planned", "failing"}
OPTION = {"does", "doesn't"}


@dataclass(frozen=True)
class Grades:
    vendor: str
    protocol: str
    url: str
    grades: dict[str, dict[str, str]]


def load_grades(path: Path | None = None) -> Grades:
    p = path or Path(str(resources.files("conformance.catalogue") / "data" / "rules" / "vendor" / "rabbitmq-compliance.yaml"))
    data = yamlio.safe_load(p.read_text())
    if not isinstance(data, dict) or data.get("schema") != "conformance.vendor-grades/1" or not isinstance(data.get("grades"), dict):
        raise UsageError(f"{p}: not a conformance.vendor-grades/1 file")
    for rid, g in data["grades"].items():
        if not isinstance(g, dict) or g.get("status") not in CONFORMS | DOES_NOT | OPTION:
            raise UsageError(f"{p}: {rid}: status must be one of {sorted(CONFORMS | DOES_NOT | OPTION)}")
    return Grades(data["vendor"], data["protocol"], data["source"]["url"], {str(k): v for k, v in data["grades"].items()})


def vendor_conforms(status: str, keyword: str) -> bool | None:
    """What the vendor's grade says about conformance: True, False, or None (an option's use)."""
    if status in CONFORMS:
        return True
    if status in DOES_NOT:
        return False
    if keyword.startswith("MAY"):
        return None
    return status == "does"


@dataclass(frozen=True)
class Row:
    rule: str
    keyword: str
    vendor_status: str
    vendor_note: str
    requirements: tuple[str, ...]
    verdicts: tuple[str, ...]  # "REQ: spec/vendor (cases)"
    suite: str  # pass, fail, not run
    agreement: str  # agree, disagree, option, not run
    comment: str = ""  # the suite's explanation of a disagreement (grades file)


def _verdicts(records: list[dict[str, Any]], req: str) -> tuple[str, str]:
    mine = [r for r in records if r.get("requirement") == req]
    if not mine:
        return "not run", f"{req}: not run"
    spec = sorted({r.get("spec_verdict", "n/a") for r in mine})
    vendor = sorted({r.get("verdict", "?") for r in mine})
    judged = [v for v in spec if v != "n/a"]  # unsupported, error...: the spec was not judged there
    status = "fail" if "fail" in judged else "pass" if judged and all(v == "pass" for v in judged) else "not judged"
    return status, f"{req}: spec {'/'.join(spec)}, vendor {'/'.join(vendor)} ({len(mine)} case{'s' if len(mine) != 1 else ''})"


def compare(records: Iterable[dict[str, Any]], grades: Grades, rows: list[RuleCoverage] | None = None) -> list[Row]:
    records = [r for r in records if r.get("protocol") == grades.protocol]
    out = []
    for c in rows if rows is not None else coverage():
        if c.rule.protocol != grades.protocol or c.rule.id not in grades.grades or not c.covered:
            continue
        g = grades.grades[c.rule.id]
        per = [_verdicts(records, req) for req in c.requirements]
        run = [s for s, _ in per if s not in ("not run", "not judged")]
        suite = "not run" if not run else "fail" if "fail" in run else "pass"
        says = vendor_conforms(g["status"], c.rule.keyword)
        if suite == "not run":
            agreement = "not run"
        elif says is None:
            agreement = "option"
        else:
            agreement = "agree" if says == (suite == "pass") else "disagree"
        out.append(Row(c.rule.id, c.rule.keyword, g["status"], g.get("note", ""), c.requirements, tuple(t for _, t in per), suite, agreement,
                       g.get("comment", "")))
    return out


def render(rows: list[Row], grades: Grades, meta: dict[str, Any]) -> str:
    counts = {k: sum(r.agreement == k for r in rows) for k in ("agree", "disagree", "option", "not run")}
    lines = [
        f"# {grades.vendor} {meta.get('version', '')}: the suite's spec verdicts beside {grades.vendor}'s own grades",
        "",
        f"Generated by `python3 -m conformance.catalogue.compliance` from a run against {meta.get('product', grades.vendor)} "
        f"{meta.get('version', '')} ({meta.get('protocol', grades.protocol)}, profile {meta.get('profile', '?')}); "
        f"grades from {grades.url} (conformance/catalogue/data/rules/vendor/). One row per rule that the suite covers and "
        f"{grades.vendor} grades. Agreement: {counts['agree']} agree, {counts['disagree']} disagree, "
        f"{counts['option']} option (a MAY graded does/doesn't), {counts['not run']} not run.",
        "",
        f"| rule | keyword | {grades.vendor} grade | suite spec verdict | agreement | requirements (spec / vendor verdicts) |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        grade = r.vendor_status + (f" ({r.vendor_note})" if r.vendor_note else "")
        lines.append(f"| `{r.rule}` | {r.keyword} | {grade} | {r.suite} | {r.agreement} | {'; '.join(r.verdicts)} |")
    odd = [r for r in rows if r.agreement in ("disagree", "option")]
    if odd:
        lines += ["", "## Disagreements and options", ""]
        for r in odd:
            lines.append(f"- `{r.rule}` ({r.keyword}; {grades.vendor}: {r.vendor_status}; suite: {r.suite}, {r.agreement}): "
                         + (r.comment or "no explanation recorded in the grades file."))
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m conformance.catalogue.compliance", description=__doc__.split("\n\n")[0])
    ap.add_argument("results", type=Path, help="results.jsonl of a run against the vendor's broker")
    ap.add_argument("--grades", type=Path, default=None, help="vendor grades file (default: RabbitMQ's)")
    ap.add_argument("--out", type=Path, default=None, help="write the Markdown table here (default: stdout)")
    args = ap.parse_args(argv)
    records = [json.loads(line) for line in args.results.read_text().splitlines() if line.strip()]
    grades = load_grades(args.grades)
    meta = next((r for r in records if r.get("protocol") == grades.protocol), {})
    text = render(compare(records, grades), grades, meta)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
    else:
        print(text, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
