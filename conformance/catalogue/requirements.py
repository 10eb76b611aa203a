"""The requirement catalogue: normative statements kept as data (conformance/catalogue/data/requirements/*.yaml)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, Iterable

import yaml

from conformance import yamlio
from conformance.errors import UsageError

LEVELS = ("MUST", "SHOULD", "MAY", "EXTENSION")
SOURCE_KINDS = ("spec", "vendor", "seed")
ID_PATTERN = re.compile(r"^[A-Z][A-Z0-9]*(-[A-Z0-9]+)+$")


@dataclass(frozen=True)
class Source:
    kind: str
    ref: str
    url: str | None = None

    def __str__(self) -> str:
        return f"{self.ref} <{self.url}>" if self.url else self.ref


@dataclass(frozen=True)
class Reference:
    """The behaviour a requirement takes as right for one profile key (conformance/catalogue/data/profile_keys.yaml),
    and the spec rule, seed or vendor text it rests on. An observation equal to one of ``values``
    passes; a profile can only explain a difference from it (a deviation), never make it a pass."""

    key: str
    values: tuple[Any, ...]
    source: str


@dataclass(frozen=True)
class Requirement:
    id: str
    level: str
    text: str
    area: str
    sources: tuple[Source, ...]
    protocols: tuple[str, ...] = ()
    #: The reference value of each profile key its cases judge by (conformance.kit.reference).
    reference: tuple[Reference, ...] = field(default=(), compare=False, hash=False)
    extra: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    #: Spec rules (conformance/catalogue/data/rules/) the requirement operationalises, per protocol; the first of a
    #: protocol gives the level over that protocol.
    rules: tuple[tuple[str, tuple[str, ...]], ...] = ()
    #: Capabilities the cases need (conformance/catalogue/data/capabilities.yaml): the requirement applies to every
    #: adapter offering them, whatever its protocol. ``protocols`` only scopes the levels.
    needs: tuple[str, ...] = ()
    #: The requirement pack that ships it (conformance.catalogue.packs), None for the core catalogue.
    pack: str | None = None
    #: The protocols its pack's cases speak on the wire themselves: it applies to no other adapter.
    wire_protocols: tuple[str, ...] = ()

    def rule_refs(self) -> dict[str, list[str]]:
        return {p: list(ids) for p, ids in self.rules}

    def level_for(self, protocol: str | None) -> str:
        """The level over ``protocol``: its first rule's keyword; EXTENSION where no spec rule of
        that protocol is named (vendor or seed sources only); the declared level when unknown."""
        if protocol is None or protocol not in self.protocols:
            return self.level
        from conformance.catalogue.rules import level_of

        return level_of(self.rule_refs(), protocol) or "EXTENSION"

    def citation(self) -> str:
        return "; ".join(str(s) for s in self.sources)

    def reference_for(self, key: str) -> Reference | None:
        return next((r for r in self.reference if r.key == key), None)


@dataclass(frozen=True)
class Area:
    id: str
    title: str
    requirements: tuple[Requirement, ...]


def _parse_area(data: Any, origin: str, pack: Any = None) -> Area:
    if not isinstance(data, dict) or "area" not in data or "requirements" not in data:
        raise UsageError(f"{origin}: a requirements file needs 'area' and 'requirements'")
    area = str(data["area"])
    reqs = []
    for i, raw in enumerate(data["requirements"] or []):
        where = f"{origin}: requirement #{i + 1}"
        if not isinstance(raw, dict):
            raise UsageError(f"{where}: expected a mapping")
        missing = [k for k in ("id", "level", "text", "sources") if not raw.get(k)]
        if missing:
            raise UsageError(f"{where}: missing {', '.join(missing)}")
        rid = str(raw["id"])
        if not ID_PATTERN.match(rid):
            raise UsageError(f"{where}: id {rid!r} is not of the form AREA-WORD(-WORD)")
        if raw["level"] not in LEVELS:
            raise UsageError(f"{where} ({rid}): level {raw['level']!r} is not one of {', '.join(LEVELS)}")
        sources = []
        for s in raw["sources"]:
            if not isinstance(s, dict) or s.get("kind") not in SOURCE_KINDS or not s.get("ref"):
                raise UsageError(f"{where} ({rid}): each source needs kind ({'/'.join(SOURCE_KINDS)}) and ref")
            sources.append(Source(kind=s["kind"], ref=str(s["ref"]), url=s.get("url")))
        rules = _parse_rules(raw.get("rules"), where, rid)
        known = {"id", "level", "text", "sources", "protocols", "reference", "rules", "needs"}
        from conformance.catalogue.capabilities import check_names  # applicability is by capability

        if "needs" not in raw:  # an omitted list would make the requirement apply to every protocol
            raise UsageError(f"{where} ({rid}): needs is required (the capabilities its cases use; [] for none)")
        needs = tuple(sorted(check_names(raw.get("needs") or (), f"{where} ({rid}) needs")))
        reqs.append(
            Requirement(
                id=rid,
                level=raw["level"],
                text=" ".join(str(raw["text"]).split()),
                area=area,
                sources=tuple(sources),
                protocols=tuple(raw.get("protocols") or ()),
                reference=_parse_reference(raw.get("reference"), where, rid),
                extra={k: v for k, v in raw.items() if k not in known},
                rules=rules,
                needs=needs,
                pack=pack.name if pack is not None else None,
                wire_protocols=pack.protocols if pack is not None else (),
            )
        )
    return Area(id=area, title=str(data.get("title", area)), requirements=tuple(reqs))


LEVEL_ORDER = ("EXTENSION", "MAY", "SHOULD", "MUST")


def _parse_reference(raw: Any, where: str, rid: str) -> tuple[Reference, ...]:
    """``reference: {<profile key>: {value: V | values: [V, ...], source: ...}}``: every value one the
    key's schema allows, every key one whose verdicts are judged against a reference."""
    if raw is None:
        return ()
    from conformance.catalogue.profile_keys import entry_problem, profile_keys

    if not isinstance(raw, dict):
        raise UsageError(f"{where} ({rid}): reference must map profile keys to value (or values) and source")
    out = []
    for key, spec in raw.items():
        w = f"{where} ({rid}) reference.{key}"
        schema = profile_keys().get(str(key))
        if schema is None:
            raise UsageError(f"{w}: unknown profile key (see `conformance list --profile-keys`)")
        if schema.judged != "reference":
            raise UsageError(f"{w}: the key is judged by {schema.judged}, not against a requirement's reference")
        if not isinstance(spec, dict) or ("value" in spec) == ("values" in spec) or not spec.get("source"):
            raise UsageError(f"{w}: needs value (or values: a list of equally right ones) and source")
        values = [spec["value"]] if "value" in spec else spec["values"]
        if not isinstance(values, list) or not values:
            raise UsageError(f"{w}: values must be a non-empty list")
        for v in values:
            problem = entry_problem(str(key), v)
            if problem:
                raise UsageError(f"{w}: {problem}")
        out.append(Reference(key=str(key), values=tuple(values), source=" ".join(str(spec["source"]).split())))
    return tuple(out)


def check_references(reqs: dict[str, Requirement]) -> None:
    """Every requirement that reads a reference-judged profile key states its reference, and the
    requirements that share a key agree on it (one behaviour is right, whoever asks)."""
    from conformance.catalogue.profile_keys import profile_keys

    for key, spec in profile_keys().items():
        if spec.judged != "reference":
            continue
        seen: dict[str, tuple[Any, ...]] = {}
        for rid in spec.read_by:
            req = reqs.get(rid)
            if req is None:
                continue
            ref = req.reference_for(key)
            if ref is None:
                raise UsageError(f"{rid}: its cases judge by profile key {key}, but the requirement states no reference for it")
            seen[rid] = ref.values
        if len({repr(v) for v in seen.values()}) > 1:
            raise UsageError(f"requirements disagree on the reference of {key}: {seen}")


def _parse_rules(raw: Any, where: str, rid: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    if raw is None:
        return ()
    if not isinstance(raw, dict) or not all(isinstance(v, list) and v for v in raw.values()):
        raise UsageError(f"{where} ({rid}): rules must map a protocol to a non-empty list of rule ids")
    return tuple((str(p), tuple(str(i) for i in ids)) for p, ids in raw.items())


def check_levels(req: Requirement) -> None:
    """The declared level is the strongest level the cited rules give over the requirement's
    protocols; a requirement without spec rules is EXTENSION. Refuses a MUST without a spec rule."""
    from conformance.catalogue.rules import all_rules

    rules = all_rules()
    for protocol, ids in req.rules:
        if req.protocols and protocol not in req.protocols:
            raise UsageError(f"{req.id}: names rules of {protocol}, which it does not apply to")
        for i in ids:
            if f"{protocol} {i}" not in rules:
                raise UsageError(f"{req.id}: unknown rule {protocol} {i!r} (see conformance/catalogue/data/rules/)")
    levels = [req.level_for(p) for p in (req.protocols or tuple(p for p, _ in req.rules))] or ["EXTENSION"]
    strongest = max(levels, key=LEVEL_ORDER.index) if req.rules else "EXTENSION"
    if req.level == "MUST" and not any(rules[f"{p} {ids[0]}"].level == "MUST" for p, ids in req.rules):
        raise UsageError(f"{req.id}: level MUST without a MUST rule of the specification")
    if req.level != strongest:
        raise UsageError(f"{req.id}: level {req.level} but its rules give {strongest} "
                         f"({', '.join(f'{p}: {req.level_for(p)}' for p in req.protocols) or 'no rules'})")


def load_areas(paths: Iterable[Path] | None = None) -> list[Area]:
    """The core's requirement files, then those of every active requirement pack (conformance.catalogue.packs)."""
    from conformance.catalogue.active_packs import active, pack_of

    if paths is None:
        root = resources.files("conformance.catalogue") / "data" / "requirements"
        paths = sorted(Path(str(p)) for p in root.iterdir() if p.name.endswith(".yaml"))
        paths += [f for pack in active() for f in pack.requirement_files]
    areas = []
    for p in paths:
        try:
            data = yamlio.safe_load(Path(p).read_text())
        except (OSError, yaml.YAMLError) as exc:
            raise UsageError(f"{p}: cannot read requirements: {exc}") from exc
        areas.append(_parse_area(data, str(p), pack_of(Path(p))))
    return areas


@cache
def catalogue() -> dict[str, Requirement]:
    """Every requirement by id; duplicate ids are an error."""
    out: dict[str, Requirement] = {}
    for area in load_areas():
        for r in area.requirements:
            if r.id in out:
                first = out[r.id].pack
                raise UsageError(f"duplicate requirement id {r.id}" + (f" (already in {'pack ' + first if first else 'the core catalogue'})" if r.pack else ""))
            check_levels(r)
            out[r.id] = r
    check_references(out)
    return out


def requirement(rid: str) -> Requirement:
    try:
        return catalogue()[rid]
    except KeyError:
        raise UsageError(f"unknown requirement {rid!r}") from None


def check_selection(requirements: Iterable[str] = (), areas: Iterable[str] = ()) -> None:
    """Refuse requirement ids and areas the catalogue does not have (one line, for the CLI and pytest)."""
    known = catalogue()
    for rid in requirements:
        if rid not in known:
            raise UsageError(f"unknown requirement {rid!r} (see: conformance list)")
    known_areas = {r.area for r in known.values()}
    for area in areas:
        if area not in known_areas:
            raise UsageError(f"unknown area {area!r}; known: {', '.join(sorted(known_areas))}")


def select(area: str | None = None, level: str | None = None) -> list[Requirement]:
    reqs = list(catalogue().values())
    if area:
        reqs = [r for r in reqs if r.area == area]
    if level:
        if level.upper() not in LEVELS:
            raise UsageError(f"unknown level {level!r}; one of {', '.join(LEVELS)}")
        reqs = [r for r in reqs if r.level == level.upper()]
    return reqs


@cache
def catalogue_digest() -> str:
    """sha256 over what a verdict rests on (ids, levels, texts, applicability, sources, profile keys).

    Runs record it so that a gate compares like with like: two runs with different digests judged
    different requirements, whatever their ids say."""
    import hashlib
    import json

    rows = [
        [r.id, r.level, r.area, r.text, list(r.protocols), [[x.key, list(x.values), x.source] for x in r.reference], [[s.kind, s.ref] for s in r.sources],
         [[p, list(ids)] for p, ids in r.rules], list(r.needs)] + ([r.pack, list(r.wire_protocols)] if r.pack else [])
        for r in sorted(catalogue().values(), key=lambda r: r.id)
    ]
    return hashlib.sha256(json.dumps(rows, sort_keys=True).encode()).hexdigest()
