"""``conformance list``: the requirement catalogue, the spec rules' coverage map, the profile keys.

(Not ``list.py``: a submodule is an attribute of its package, and ``conformance.cli.list`` would hide
the builtin inside conformance/cli/__init__.py.)"""

from __future__ import annotations

import argparse
import json
from typing import Any

from conformance.catalogue.requirements import LEVELS
from conformance.cli.exit_codes import EXIT_OK


def add_parser(sub: Any) -> None:
    ls = sub.add_parser("list", help="print the requirement catalogue")
    ls.add_argument("--area", help="only this area")
    ls.add_argument("--rules", action="store_true", help="the spec rules' coverage map: covering requirements, or why none")
    ls.add_argument("--level", choices=[lv.lower() for lv in LEVELS] + list(LEVELS), help="only this level")
    ls.add_argument("--json", action="store_true", help="machine-readable output")
    ls.add_argument("--pack", action="append", help="also list this requirement pack's requirements (repeatable)")
    ls.add_argument("--adapter", help="list the requirement packs this adapter's package ships too")
    ls.add_argument("--profile-keys", action="store_true", help="print the profile keys the cases read, their values and meaning")
    ls.add_argument("--regressions", action="store_true",
                    help="the regression corpus: documented broker bugs, the case and self-test mutation catching each")
    ls.set_defaults(func=command)


def command(args: argparse.Namespace) -> int:
    from conformance.cases import all_cases
    from conformance.catalogue.requirements import check_selection, select
    from conformance.runner.options import check

    if args.profile_keys:  # the documented schema (conformance/catalogue/data/profile_keys.yaml)
        from conformance.catalogue.profile_keys import render_keys

        print(render_keys())
        return EXIT_OK
    if args.regressions:
        return _list_regressions(args)
    check({"pack": args.pack}, args.adapter)  # the packs' requirements are listed with the core's
    if args.rules:
        return _list_rules(args)
    check_selection(areas=[args.area] if args.area else [])
    reqs = select(area=args.area, level=args.level)
    cases: dict[str, list[str]] = {}
    for c in all_cases():
        cases.setdefault(c.requirement, []).append(c.__name__)
    if args.json:
        out = [
            {"id": r.id, "level": r.level, "area": r.area, "text": r.text, "cases": cases.get(r.id, []),
             "sources": [s.__dict__ for s in r.sources]}
            for r in reqs
        ]
        print(json.dumps(out, indent=2))
        return EXIT_OK
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{len(reqs)} requirements", show_lines=False, expand=True)
    for col in ("id", "level", "area", "requirement", "cases"):
        table.add_column(col, overflow="fold")
    for r in reqs:
        table.add_row(r.id, r.level, r.area, r.text, str(len(cases.get(r.id, []))))
    Console().print(table)
    return EXIT_OK


def _list_rules(args: argparse.Namespace) -> int:
    """Every spec rule, covered by which requirements or why not; closing figures."""
    from conformance.catalogue.coverage import as_data, closing_line, coverage, figures

    rows = [c for c in coverage() if not args.area or c.rule.area == args.area]
    figs = figures(rows)
    if args.json:
        print(json.dumps(as_data(rows), indent=2))
        return EXIT_OK
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{len(rows)} spec rules", expand=True)
    for col in ("protocol", "rule", "keyword", "area", "covered by", "quote"):
        table.add_column(col, overflow="fold")
    for c in rows:
        table.add_row(c.rule.protocol, c.rule.id, c.rule.keyword, c.rule.area, ", ".join(c.requirements) or f"- ({c.reason})", c.rule.quote)
    console = Console()
    console.print(table)
    console.print(closing_line(figs))
    return EXIT_OK


def _list_regressions(args: argparse.Namespace) -> int:
    """The corpus (conformance/regressions/): entry, product, versions, case, mutation, caught."""
    from conformance.regressions.corpus import corpus

    entries = [e for e in corpus() if not args.area or e.area == args.area]
    rows = []
    for e in entries:
        caught, why = e.caught()
        rows.append({"id": e.id, "product": e.product, "ref": e.ref, "url": e.url, "versions": e.versions, "area": e.area,
                     "protocol": e.protocol, "case": str(e.case) if e.case else None, "mutation": e.mutation,
                     "caught": caught, "why_not": why or None, "observed": e.observed})
    if args.json:
        print(json.dumps(rows, indent=2))
        return EXIT_OK
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=f"{len(rows)} documented bugs", expand=True)
    for col in ("entry", "product", "versions", "case", "mutation", "caught"):
        table.add_column(col, overflow="fold")
    for r in rows:
        table.add_row(escape(f"{r['id']}\n{r['url']}"), escape(r["product"]), escape(r["versions"]), escape(r["case"] or "-"),
                      escape(r["mutation"] or "-"), "yes" if r["caught"] else escape(f"no: {r['why_not']}"))
    console = Console(width=max(Console().width, 160))
    console.print(table)
    products: dict[str, list[bool]] = {}
    for r in rows:
        products.setdefault(r["product"], []).append(r["caught"])
    for product, caught in sorted(products.items()):
        console.print(f"{product}: {len(caught)} entries, {sum(caught)} caught")
    console.print(f"all: {len(rows)} entries across {len(products)} products, {sum(r['caught'] for r in rows)} caught")
    return EXIT_OK
