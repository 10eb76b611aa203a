"""The coverage map: every extracted spec rule, the requirements that operationalise it,
or why none does; and the figures covered / testable / total per protocol."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from conformance.catalogue.requirements import Requirement, catalogue
from conformance.catalogue.rules import PROTOCOLS, Rule, all_rules

UNCOVERED_TESTABLE = "testable from a client; no requirement covers it yet"


@dataclass(frozen=True)
class RuleCoverage:
    rule: Rule
    requirements: tuple[str, ...]

    @property
    def covered(self) -> bool:
        return bool(self.requirements)

    @property
    def reason(self) -> str:
        if self.covered:
            return ""
        return f"not testable: {self.rule.reason}" if not self.rule.testable else UNCOVERED_TESTABLE


def coverage(rules: Iterable[Rule] | None = None, requirements: Iterable[Requirement] | None = None) -> list[RuleCoverage]:
    rules = list(all_rules().values() if rules is None else rules)
    reqs = list(catalogue().values() if requirements is None else requirements)
    by_rule: dict[str, list[str]] = {}
    for req in reqs:
        for protocol, ids in req.rules:
            for i in ids:
                by_rule.setdefault(f"{protocol} {i}", []).append(req.id)
    return [RuleCoverage(r, tuple(by_rule.get(r.ref, ()))) for r in rules]


def figures(rows: list[RuleCoverage]) -> dict[str, dict[str, int]]:
    """Per protocol: covered, testable, total (and covered among the testable MUST/SHOULD rules)."""
    out: dict[str, dict[str, int]] = {}
    packs_protocols = sorted({c.rule.protocol for c in rows} - set(PROTOCOLS))  # a requirement pack's rules
    for protocol in (*PROTOCOLS, *packs_protocols):
        mine = [c for c in rows if c.rule.protocol == protocol]
        normative = [c for c in mine if c.rule.testable and c.rule.level in ("MUST", "SHOULD")]
        out[protocol] = {
            "covered": sum(c.covered for c in mine),
            "testable": sum(c.rule.testable for c in mine),
            "total": len(mine),
            "testable_must_should": len(normative),
            "testable_must_should_covered": sum(c.covered for c in normative),
        }
    return out


def closing_line(figs: dict[str, dict[str, int]]) -> str:
    return "; ".join(
        f"{p}: {f['covered']} covered / {f['testable']} testable / {f['total']} rules "
        f"(testable MUST/SHOULD covered: {f['testable_must_should_covered']}/{f['testable_must_should']})"
        for p, f in figs.items()
    )


def as_data(rows: list[RuleCoverage] | None = None) -> dict[str, object]:
    """The map as plain data (``conformance list --rules --json``, the report's coverage section)."""
    rows = coverage() if rows is None else rows
    return {
        "rules": [{"protocol": c.rule.protocol, "id": c.rule.id, "keyword": c.rule.keyword, "area": c.rule.area,
                   "quote": c.rule.quote, "testable": c.rule.testable, "requirements": list(c.requirements),
                   "reason": c.reason} for c in rows],
        "figures": figures(rows),
    }
