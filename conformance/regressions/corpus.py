"""The regression corpus, loaded and checked: one entry per documented broker bug in the mission's
areas (redelivery, acknowledgement, nack and reject, delivery limits and dead-lettering,
transactions, prefetch, persistence, links, failover).

Why a corpus: the catalogue was measured against real bugs and caught few, mostly because no case
reached the configuration or the event sequence where the bug lives. Each entry says where it
lives (scenario), which case fails on an affected version, and which self-test mutation makes a
healthy broker behave like the affected one through the proxy, so the case is shown to catch the
bug even where the affected version cannot run here. An entry with no case or no mutation yet says
what is missing: the corpus measures the catalogue's reach, it does not flatter it.

An entry is *caught* when its case's requirement is among the requirements its mutation must break
(conformance/nemesis/expectations.yaml); the self-test proves each such pair on a real broker
(``conformance selftest`` fails on a declared break that was not killed).

Schema of ``data/<product>.yaml`` (``schema: conformance.regressions/1``, ``product``, ``entries``):

    id         unique, lower case: the tracker and number ("rabbitmq-server-7732")
    upstream   {ref: "owner/repo#N" or "QPID-1234", url: https://..., title: the tracker's words}
    affected   versions that have the bug, a PEP 440 range (">=3.8.0,<3.12.0")
    fixed      the first release with the fix, or null while it is open
    area       a catalogue area (ack, nack, limit, dlx, tx, prefetch, persist, link, failover, publish)
    protocol   amqp-0-9-1, amqp-1.0 or stomp-1.2
    scenario   what happens, in protocol terms (frames, flags, outcomes)
    case       {requirement, queue_type, variant}: the cell that fails on an affected version, or null
    mutation   a self-test mutation of that protocol reproducing the bug, or null
    missing    required when case or mutation is null: what would reach the bug
    observed   optional {version, verdict, note}: what an affected version that runs here gave
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from conformance import yamlio
from conformance.errors import UsageError

DATA = Path(__file__).with_name("data")
SCHEMA = "conformance.regressions/1"
FIELDS = ("id", "upstream", "affected", "fixed", "area", "protocol", "scenario", "case", "mutation", "missing", "observed")
PROTOCOLS = ("amqp-0-9-1", "amqp-1.0", "stomp-1.2")
VERDICTS = ("pass", "fail", "deviation", "unsupported", "undocumented", "error", "blocked")
_ID = re.compile(r"^[a-z0-9][a-z0-9.-]*$")


@dataclass(frozen=True)
class Case:
    requirement: str
    queue_type: str | None = None
    variant: str | None = None

    def __str__(self) -> str:
        config = " ".join(x for x in (self.queue_type, self.variant) if x) or "-"
        return f"{self.requirement} [{config}]"


@dataclass(frozen=True)
class Entry:
    id: str
    product: str
    ref: str
    url: str
    title: str
    affected: str
    fixed: str | None
    area: str
    protocol: str
    scenario: str
    case: Case | None
    mutation: str | None
    missing: str | None
    observed: dict[str, str] | None
    origin: str

    @property
    def versions(self) -> str:
        return f"{self.affected} (fixed in {self.fixed})" if self.fixed else f"{self.affected} (open)"

    def caught(self) -> tuple[bool, str]:
        """Whether the self-test shows the case catching this bug, and if not, why not."""
        if self.case is None or self.mutation is None:
            return False, self.missing or "no case or no mutation"
        from conformance.nemesis.mutations import expectations

        declared = expectations().get(self.mutation)
        if declared is None or self.case.requirement not in declared.breaks:
            return False, f"{self.mutation} is not declared to break {self.case.requirement} (conformance/nemesis/expectations.yaml)"
        return True, ""


def _text(raw: Any, where: str, key: str) -> str:
    if not isinstance(raw, str) or not raw.strip():
        raise UsageError(f"{where}: {key}: expected text")
    return " ".join(raw.split())


def parse_entry(raw: Any, product: str, where: str) -> Entry:
    """One entry, checked against the catalogue, the installed mutations and its own versions."""
    from conformance.catalogue.requirements import catalogue
    from conformance.nemesis.mutations import available

    if not isinstance(raw, dict):
        raise UsageError(f"{where}: an entry is a mapping")
    unknown = [k for k in raw if k not in FIELDS]
    if unknown:
        raise UsageError(f"{where}: unknown key(s) {', '.join(map(str, unknown))}; allowed: {', '.join(FIELDS)}")
    eid = str(raw.get("id", ""))
    if not _ID.match(eid):
        raise UsageError(f"{where}: id {eid!r}: lower case letters, digits, '.' and '-'")
    where = f"{where} ({eid})"
    up = raw.get("upstream")
    if not isinstance(up, dict) or not str(up.get("url", "")).startswith(("https://", "http://")) or not up.get("ref"):
        raise UsageError(f"{where}: upstream: expected ref, url (https://...) and title")
    affected = _text(raw.get("affected"), where, "affected")
    try:
        spec = SpecifierSet(affected)
    except InvalidSpecifier:
        raise UsageError(f"{where}: affected: {affected!r} is not a version range (e.g. '>=3.8.0,<3.12.0')") from None
    fixed = raw.get("fixed")
    if fixed is not None:
        try:
            if Version(str(fixed)) in spec:
                raise UsageError(f"{where}: fixed {fixed} lies inside affected {affected}")
        except InvalidVersion:
            raise UsageError(f"{where}: fixed: {fixed!r} is not a version") from None
    protocol = raw.get("protocol")
    if protocol not in PROTOCOLS:
        raise UsageError(f"{where}: protocol: one of {', '.join(PROTOCOLS)}")
    reqs = catalogue()
    area = raw.get("area")
    if area not in {r.area for r in reqs.values()}:
        raise UsageError(f"{where}: area {area!r} is not a catalogue area")
    case = None
    if raw.get("case") is not None:
        c = raw["case"]
        if not isinstance(c, dict) or c.get("requirement") not in reqs or any(k not in ("requirement", "queue_type", "variant") for k in c):
            raise UsageError(f"{where}: case: expected requirement (a catalogue id), queue_type and variant")
        case = Case(str(c["requirement"]), c.get("queue_type"), c.get("variant"))
        from conformance.catalogue.configurations import split

        split(case.queue_type)  # a configured cell names a known configuration ("classic+priority")
        # a requirement applies to every adapter offering what it needs (its `protocols` only scope
        # its levels), except a pack's whose cases speak one protocol's frames themselves
        wire = reqs[case.requirement].wire_protocols
        if wire and protocol not in wire:
            raise UsageError(f"{where}: case {case.requirement} speaks {', '.join(wire)} on the wire, not {protocol}")
    mutation = raw.get("mutation")
    if mutation is not None and mutation not in {m.name for m in available(protocol)}:
        raise UsageError(f"{where}: mutation {mutation!r} is not a {protocol} mutation")
    missing = raw.get("missing")
    if (case is None or mutation is None) and not (isinstance(missing, str) and missing.strip()):
        raise UsageError(f"{where}: missing: say what would reach the bug (the entry has no {'case' if case is None else 'mutation'})")
    observed = raw.get("observed")
    if observed is not None:
        if not isinstance(observed, dict) or observed.get("verdict") not in VERDICTS or not observed.get("version"):
            raise UsageError(f"{where}: observed: expected version, verdict ({', '.join(VERDICTS)}) and note")
        if Version(str(observed["version"])) not in spec:
            raise UsageError(f"{where}: observed on {observed['version']}, which is not an affected version")
        observed = {k: str(v) for k, v in observed.items()}
    return Entry(id=eid, product=product, ref=str(up["ref"]), url=str(up["url"]), title=_text(up.get("title"), where, "upstream.title"),
                 affected=affected, fixed=str(fixed) if fixed is not None else None, area=str(area), protocol=str(protocol),
                 scenario=_text(raw.get("scenario"), where, "scenario"), case=case, mutation=mutation,
                 missing=" ".join(missing.split()) if isinstance(missing, str) else None, observed=observed, origin=where)


def load_file(path: Path) -> list[Entry]:
    data = yamlio.safe_load(path.read_text())
    where = path.name
    if not isinstance(data, dict) or data.get("schema") != SCHEMA or not data.get("product"):
        raise UsageError(f"{where}: expected schema: {SCHEMA}, product and entries")
    return [parse_entry(raw, str(data["product"]), f"{where} entry {i}") for i, raw in enumerate(data.get("entries") or [], 1)]


@cache
def corpus() -> tuple[Entry, ...]:
    """Every entry of every data file; ids unique across the corpus."""
    entries = [e for path in sorted(DATA.glob("*.yaml")) for e in load_file(path)]
    seen: set[str] = set()
    for e in entries:
        if e.id in seen:
            raise UsageError(f"{e.origin}: id {e.id} appears twice in the corpus")
        seen.add(e.id)
    return tuple(entries)
