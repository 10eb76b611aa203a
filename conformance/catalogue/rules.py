"""Spec rules as data (conformance/catalogue/data/rules/<protocol>.yaml): the normative statements requirements rest on.

Each rule has the spec's own id (AMQP 0-9-1: the XML rule reference such as basic/reject/requeue/01,
or a PDF section; AMQP 1.0: a section number and field), its exact keyword, a short quote, and
whether a client can observe it at all. A requirement's level per protocol is the keyword of the
first rule it names for that protocol (:func:`level_of`)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, Iterable

import yaml

from conformance import yamlio
from conformance.errors import UsageError

KEYWORDS = ("MUST", "MUST NOT", "SHOULD", "SHOULD NOT", "MAY", "MAY NOT")
#: The requirement level a rule's keyword gives. "MAY NOT" (0-9-1's wording for a client
#: prohibition) is a permission of the server's, like MAY.
LEVEL_OF_KEYWORD = {"MUST": "MUST", "MUST NOT": "MUST", "SHOULD": "SHOULD", "SHOULD NOT": "SHOULD", "MAY": "MAY", "MAY NOT": "MAY"}
PROTOCOLS = ("amqp-0-9-1", "amqp-1.0")
AREAS = ("ack", "nack", "prefetch", "publish", "tx", "persist", "link", "limit", "dlx")


@dataclass(frozen=True)
class Rule:
    protocol: str
    id: str
    keyword: str
    quote: str
    area: str
    testable: bool = True
    reason: str = ""

    @property
    def ref(self) -> str:
        return f"{self.protocol} {self.id}"

    @property
    def level(self) -> str:
        return LEVEL_OF_KEYWORD[self.keyword]


def _parse(data: Any, origin: str, protocols: tuple[str, ...] = PROTOCOLS, areas: tuple[str, ...] = AREAS) -> tuple[str, list[Rule]]:
    """``protocols``/``areas``: what the file may name (a requirement pack adds its own, conformance.catalogue.packs)."""
    if not isinstance(data, dict) or data.get("protocol") not in protocols or not isinstance(data.get("rules"), list):
        raise UsageError(f"{origin}: a rules file needs 'protocol' (one of {', '.join(protocols)}) and a 'rules' list")
    protocol = data["protocol"]
    src = data.get("source")
    if not isinstance(src, dict) or not src.get("url"):
        raise UsageError(f"{origin}: 'source' needs a url")
    out: list[Rule] = []
    seen: set[str] = set()
    for i, raw in enumerate(data["rules"]):
        where = f"{origin}: rule #{i + 1}"
        if not isinstance(raw, dict):
            raise UsageError(f"{where}: expected a mapping")
        unknown = set(raw) - {"id", "keyword", "quote", "area", "testable", "reason"}
        if unknown:
            raise UsageError(f"{where}: unknown field(s) {sorted(unknown)}")
        for k in ("id", "keyword", "quote", "area"):
            if not raw.get(k):
                raise UsageError(f"{where}: missing {k}")
        rid = str(raw["id"])
        if rid in seen:
            raise UsageError(f"{where}: duplicate rule id {rid!r}")
        seen.add(rid)
        if raw["keyword"] not in KEYWORDS:
            raise UsageError(f"{where} ({rid}): keyword {raw['keyword']!r} is not one of {', '.join(KEYWORDS)}")
        if raw["keyword"] not in str(raw["quote"]) and "<chassis" not in str(raw["quote"]):
            raise UsageError(f"{where} ({rid}): the quote does not contain its keyword {raw['keyword']!r}")
        if raw["area"] not in areas:
            raise UsageError(f"{where} ({rid}): area {raw['area']!r} is not one of {', '.join(areas)}")
        testable = raw.get("testable", True)
        if not isinstance(testable, bool):
            raise UsageError(f"{where} ({rid}): testable must be true or false")
        if not testable and not raw.get("reason"):
            raise UsageError(f"{where} ({rid}): testable: false needs a reason")
        out.append(Rule(protocol, rid, raw["keyword"], " ".join(str(raw["quote"]).split()), raw["area"], testable, str(raw.get("reason") or "")))
    return protocol, out


def load_rules(paths: Iterable[Path] | None = None) -> dict[str, Rule]:
    """Every rule by ``"<protocol> <id>"``: the core's, then those of the active requirement packs
    (a pack's rules may name its own protocols and the areas of its requirement files)."""
    extra: dict[Path, tuple[tuple[str, ...], tuple[str, ...]]] = {}
    if paths is None:
        from conformance.catalogue.active_packs import active

        root = resources.files("conformance.catalogue") / "data" / "rules"
        paths = sorted(Path(str(p)) for p in root.iterdir() if p.name.endswith(".yaml"))
        for pack in active():
            areas = tuple(str((yamlio.safe_load(f.read_text()) or {}).get("area", "")) for f in pack.requirement_files)
            for f in pack.rule_files:
                extra[f] = (PROTOCOLS + pack.protocols, AREAS + areas)
            paths += list(pack.rule_files)
    rules: dict[str, Rule] = {}
    for p in paths:
        try:
            data = yamlio.safe_load(Path(p).read_text())
        except (OSError, yaml.YAMLError) as exc:
            raise UsageError(f"{p}: cannot read rules: {exc}") from exc
        _, parsed = _parse(data, str(p), *extra.get(Path(p), (PROTOCOLS, AREAS)))
        for r in parsed:
            if r.ref in rules:
                raise UsageError(f"{p}: rule {r.ref} is defined twice")
            rules[r.ref] = r
    return rules


@cache
def all_rules() -> dict[str, Rule]:
    return load_rules()


def level_of(rule_refs: dict[str, list[str]], protocol: str) -> str | None:
    """The level a requirement has over ``protocol``: the first named rule's keyword, or None
    when it names no rule of that protocol."""
    refs = rule_refs.get(protocol) or []
    if not refs:
        return None
    return all_rules()[f"{protocol} {refs[0]}"].level
