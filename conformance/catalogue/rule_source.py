"""The AMQP 0-9-1 rules derived from the specification's XML.

``extract(xml)`` reads amqp0-9-1.xml (the full file or the excerpt the suite ships,
conformance/catalogue/data/rules/sources/amqp0-9-1.excerpt.xml) and yields every ``<rule>`` with the id RabbitMQ's
compliance table uses (class or domain / method / field / rule name, '/'-joined), its first RFC
keyword and its text, plus every server ``<chassis>`` as ``<class>[/<method>]/chassis/server``.
``check(rules, yaml_rules)`` proves conformance/catalogue/data/rules/amqp-0-9-1.yaml derived from it: every rule of
the XML is listed, under its own keyword, with a quote taken word for word from its text.

    python3 -m conformance.catalogue.rule_source [XML] [--check]   # print the rules as YAML, or check the data
"""

from __future__ import annotations

import argparse
import re
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Iterable

from conformance.catalogue.rules import Rule, load_rules

#: Longest first, so "MUST NOT" is not read as "MUST".
KEYWORD_RE = re.compile(r"\b(MUST NOT|MUST|SHOULD NOT|SHOULD|MAY NOT|MAY)\b")
PROTOCOL = "amqp-0-9-1"
#: Ids of the YAML that are sections of the PDF specification, not elements of the XML.
PDF_SECTION = re.compile(r"^\d+(\.\d+)*$")


@dataclass(frozen=True)
class XmlRule:
    id: str
    keyword: str
    text: str
    kind: str  # "rule", "chassis" or "doc"
    on_failure: str = ""


def excerpt_path() -> Path:
    return Path(str(resources.files("conformance.catalogue") / "data" / "rules" / "sources" / "amqp0-9-1.excerpt.xml"))


def normalise(text: str) -> str:
    return " ".join(text.split())


def _doc(el: ET.Element) -> str:
    return normalise(" ".join(d.text or "" for d in el.findall("doc") if d.get("type") is None))


def extract(xml: Path) -> list[XmlRule]:
    """Every rule, server chassis and keyword-bearing class/domain doc of ``xml``, in document order."""
    root = ET.parse(xml).getroot()
    out: list[XmlRule] = []

    def visit(el: ET.Element, path: list[str]) -> None:
        for child in el:
            if child.tag in ("domain", "class", "method", "field"):
                visit(child, [*path, child.get("name", "")])
            elif child.tag == "rule":
                text = _doc(child)
                found = KEYWORD_RE.search(text)
                out.append(XmlRule("/".join([*path, child.get("name", "")]), found.group(1) if found else "", text, "rule",
                                   child.get("on-failure", "")))
            elif child.tag == "chassis" and child.get("name") == "server":
                out.append(XmlRule("/".join([*path, "chassis", "server"]), child.get("implement", ""), "", "chassis"))
        if el.tag in ("class", "domain"):
            text = _doc(el)
            if KEYWORD_RE.search(text):
                out.append(XmlRule("/".join(path), "", text, "doc"))

    visit(root, [])
    return out


def _quote_parts(quote: str) -> list[str]:
    return [normalise(p) for p in normalise(quote).split("...") if p.strip()]


def check(xml_rules: Iterable[XmlRule], yaml_rules: Iterable[Rule]) -> list[str]:
    """What keeps the YAML from being derived from the XML (empty: it is)."""
    xml_rules = list(xml_rules)
    by_id = {r.id: r for r in xml_rules if r.kind != "doc"}
    docs = [r for r in xml_rules if r.kind == "doc"]
    mine = {r.id: r for r in yaml_rules if r.protocol == PROTOCOL}
    problems: list[str] = []
    for rid, rule in by_id.items():
        if rule.kind == "rule" and rid not in mine:
            problems.append(f"{rid}: a rule of the XML the data does not list")
    for rid, rule in mine.items():
        if PDF_SECTION.match(rid):
            continue  # a section of the PDF, not an XML element
        src = by_id.get(rid)
        if src is None:
            owner = [d for d in docs if rid.startswith(d.id + "/")]
            if not owner:
                problems.append(f"{rid}: neither a rule nor a chassis of the XML")
                continue
            text = owner[0].text
            if not all(part in text for part in _quote_parts(rule.quote)):
                problems.append(f"{rid}: the quote is not in the <doc> of {owner[0].id}")
            elif rule.keyword not in {m.group(1) for m in KEYWORD_RE.finditer(" ".join(_quote_parts(rule.quote)))}:
                problems.append(f"{rid}: keyword {rule.keyword} is not the quote's")
            continue
        if src.kind == "chassis":
            if rule.keyword != src.keyword:
                problems.append(f"{rid}: keyword {rule.keyword}, the XML's chassis says implement = {src.keyword}")
            continue
        if rule.keyword != src.keyword:
            problems.append(f"{rid}: keyword {rule.keyword}, the XML rule's first keyword is {src.keyword}")
        missing = [p for p in _quote_parts(rule.quote) if p not in src.text]
        if missing:
            problems.append(f"{rid}: quote not found word for word in the XML rule: {missing[0]!r}")
    return problems


def to_yaml(rules: Iterable[XmlRule]) -> str:
    lines = []
    for r in rules:
        if r.kind == "doc":
            continue
        quote = r.text if r.kind == "rule" else f"<chassis name = \"server\" implement = \"{r.keyword}\" />"
        lines.append(f"  - {{id: {r.id!r}, keyword: {r.keyword}, quote: {quote!r}}}" + (f"  # on-failure {r.on_failure}" if r.on_failure else ""))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m conformance.catalogue.rule_source", description=__doc__.split("\n\n")[0])
    ap.add_argument("xml", nargs="?", type=Path, default=None, help="amqp0-9-1.xml (default: the excerpt the suite ships)")
    ap.add_argument("--check", action="store_true", help="check conformance/catalogue/data/rules/amqp-0-9-1.yaml against the XML")
    args = ap.parse_args(argv)
    rules = extract(args.xml or excerpt_path())
    if not args.check:
        print(to_yaml(rules))
        return 0
    problems = check(rules, load_rules().values())
    for p in problems:
        print(p, file=sys.stderr)
    print(f"{sum(r.kind == 'rule' for r in rules)} rules and {sum(r.kind == 'chassis' for r in rules)} server chassis in the XML; "
          f"{len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
