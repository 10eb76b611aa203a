"""What two runs' profiles say differently, and which gate cells each difference touched.

A broker team gates release N+1 against release N, and the two releases often sit under different
profiles (LavinMQ 1.3.1 under ``lavinmq-1``, 2.9.1 under ``lavinmq-2.9``). The verdicts stay
comparable: a profile explains a difference, it never changes what was observed. What the gate must
show is where the explanation changed, so that a failure the new profile excuses is seen and decided
on, never passed silently (reports.gate: class ``excused``).

Each side's profile is the resolved data the run kept in ``run.json`` (``profile_data``); a run
written before runs kept it falls back to the installed profile of that id (or the file at its
``profile_path``), said so, with a warning when that profile's digest is not the run's.

A difference is one member of the resolved profile (reports lists them by section):

- ``entries``: one row of an entry (``key`` or ``key [queue type]``): it touches the cells of the
  requirements that read the key (``read_by`` in conformance/catalogue/data/profile_keys.yaml) whose
  queue type reads that row on either side;
- ``deviations`` and ``known_bugs`` (by requirement, queue types, observed) and ``unsupported`` (by
  requirement, queue types): the cells of that requirement and queue types (a deviation's or known
  bug's ``versions`` restrict it to the servers of that side it affects);
- ``lacks`` (by capability): the cells of every requirement that needs the capability;
- ``queue_types`` (by name): every cell of that queue type;
- ``match`` (product, versions, protocols): which servers the profile claims; it touches no cell.

Title and ``checked`` are prose about the profile, and its id is shown beside the comparison.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from reports.runs import RunMeta

#: The sections a difference can be in, in the order they are listed.
SECTIONS = ("match", "queue_types", "entries", "deviations", "known_bugs", "unsupported", "lacks")
#: What identifies an item of a list section (as conformance.catalogue.profiles merges them).
IDENTITY = {"deviations": ("requirement", "queue_types", "observed"), "known_bugs": ("requirement", "queue_types", "observed"),
            "unsupported": ("requirement", "queue_types")}
#: The fields of a cell a difference names.
CELL_FIELDS = ("requirement", "config", "column", "queue_type", "case_id")


@dataclass(frozen=True)
class SideProfile:
    """One side's profile for one product and protocol."""

    id: str
    digest: str
    data: dict[str, Any] | None  # None: its content could not be found
    origin: str  # where the content came from, in words


def _plain(obj: Any) -> Any:
    """Mappings without null members: an absent field and a null one say the same (a deviation with no
    queue types applies to all), so both sides are compared in this one form."""
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items() if v is not None}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    return obj


def side_profile(metas: list[RunMeta]) -> SideProfile:
    """The profile one side's runs judged by: the data its run.json kept, else the installed one."""
    m = metas[0]
    pid, digest = m.profile or "?", m.profile_digest or "?"
    for meta in metas:
        if isinstance(meta.raw.get("profile_data"), dict):
            return SideProfile(pid, digest, _plain(meta.raw["profile_data"]), f"run.json of {meta.folder}")
    return _installed(pid, digest, m)


def _installed(pid: str, digest: str, meta: RunMeta) -> SideProfile:
    """An older run's profile, from the profiles installed now (or the file the run named)."""
    from pathlib import Path

    from conformance.catalogue.profiles import bundled_profiles, load_profile_file, profile_data, profile_digest
    from conformance.errors import UsageError

    found, where = None, ""
    try:
        found = next((p for p in bundled_profiles() if p.id == pid), None)
        where = "the installed profile"
        path = meta.raw.get("profile_path")
        if found is None and isinstance(path, str) and Path(path).is_file():
            found, where = load_profile_file(Path(path)), f"the file {path}"
    except UsageError as exc:
        return SideProfile(pid, digest, None, f"{meta.folder}: run.json keeps no profile data and loading {pid!r} failed ({exc})")
    if found is None:
        return SideProfile(pid, digest, None, f"{meta.folder}: run.json keeps no profile data and no profile {pid!r} is installed")
    origin = f"{meta.folder}: run.json keeps no profile data; read from {where} {pid!r}"
    if profile_digest(found) != digest:
        origin += f", whose content is not the run's (digest {profile_digest(found)[:12]}, the run's {digest[:12]}): the list may be inexact"
    return SideProfile(pid, digest, _plain(profile_data(found)), origin)


def _ident(item: dict[str, Any], fields: tuple[str, ...]) -> tuple[Any, ...]:
    return tuple(tuple(v) if isinstance(v, list) else v for v in (item.get(f) for f in fields))


def _label(section: str, item: dict[str, Any]) -> str:
    qts = item.get("queue_types")
    where = f" [{', '.join(qts)}]" if qts else ""
    observed = f" observed {item['observed']!r}" if item.get("observed") is not None else ""
    return f"{item.get('requirement')}{where}{observed}"


def _changed_fields(b: Any, c: Any) -> list[str]:
    if isinstance(b, dict) and isinstance(c, dict):
        return sorted(k for k in set(b) | set(c) if b.get(k) != c.get(k))
    return []


def differences(base: dict[str, Any], cur: dict[str, Any]) -> list[dict[str, Any]]:
    """Every member the two resolved profiles differ in: section, key, change (added, removed,
    changed), the fields that changed, both sides' member, and what it applies to (``scope``)."""
    out: list[dict[str, Any]] = []

    def add(section: str, key: str, b: Any, c: Any, scope: dict[str, Any]) -> None:
        if b == c:
            return
        change = "added" if b is None else "removed" if c is None else "changed"
        out.append({"section": section, "key": key, "change": change, "fields": _changed_fields(b, c) if change == "changed" else [],
                    "baseline": b, "current": c, "scope": scope})

    for f in ("product", "versions", "protocols"):
        add("match", f, base.get(f), cur.get(f), {})
    bq, cq = base.get("queue_types") or {}, cur.get("queue_types") or {}
    for name in sorted(set(bq) | set(cq)):
        add("queue_types", name, bq.get(name), cq.get(name), {"queue_type": name})
    be, ce = base.get("entries") or {}, cur.get("entries") or {}
    for key in sorted(set(be) | set(ce)):
        brows, crows = be.get(key) or {}, ce.get(key) or {}
        for row in sorted(set(brows) | set(crows)):
            add("entries", key if row == "" else f"{key} [{row}]", brows.get(row), crows.get(row), {"entry": key, "row": row})
    for section, fields in IDENTITY.items():
        bl, cl = base.get(section) or [], cur.get(section) or []
        bi, ci = {_ident(i, fields): i for i in bl}, {_ident(i, fields): i for i in cl}
        for ident in list(dict.fromkeys([*bi, *ci])):
            item = bi.get(ident) or ci[ident]
            add(section, _label(section, item), bi.get(ident), ci.get(ident),
                {"requirement": item.get("requirement"), "queue_types": item.get("queue_types")})
    bl, cl = base.get("lacks") or {}, cur.get("lacks") or {}
    for cap in sorted(set(bl) | set(cl)):
        add("lacks", cap, bl.get(cap), cl.get(cap), {"capability": cap})
    return out


def _row_read(data: dict[str, Any], key: str, queue_type: str | None) -> str | None:
    """Which row of entry ``key`` a case of ``queue_type`` reads (as Profile.entry picks it)."""
    rows = (data.get("entries") or {}).get(key) or {}
    if queue_type is not None and queue_type in rows:
        return queue_type
    return "" if "" in rows else None


def _affects(item: dict[str, Any] | None, version: str | None) -> bool:
    """Whether a deviation applies to a server of this version (conformance.catalogue.profiles.Documented.affects)."""
    if item is None:
        return False
    ranges = item.get("versions")
    if not ranges or not version:
        return True
    from packaging.specifiers import SpecifierSet
    from packaging.version import InvalidVersion, Version

    try:
        return any(Version(version) in SpecifierSet(r) for r in ranges)
    except InvalidVersion:
        return True


def _touches(d: dict[str, Any], cell: dict[str, Any], side_data: dict[str, Any], side_item: dict[str, Any] | None) -> bool:
    """Whether difference ``d`` applies to ``cell`` as one side's profile stands (``side_item``: that
    side's member, None when the side has none)."""
    scope, section, qt = d["scope"], d["section"], cell.get("queue_type")
    if side_item is None:
        return False
    if section == "queue_types":
        return qt == scope["queue_type"]
    if section == "entries":
        from conformance.catalogue.profile_keys import profile_keys

        spec = profile_keys().get(scope["entry"])
        readers = spec.read_by if spec is not None else ()
        return cell["requirement"] in readers and _row_read(side_data, scope["entry"], qt) == scope["row"]
    if section in IDENTITY:
        qts = scope["queue_types"]
        if cell["requirement"] != scope["requirement"] or not (qts is None or qt is None or qt in qts):
            return False
        return section not in ("deviations", "known_bugs") or _affects(side_item, cell.get("version"))
    if section == "lacks":
        from conformance.catalogue.requirements import catalogue

        req = catalogue().get(cell["requirement"])
        return req is not None and scope["capability"] in req.needs
    return False


def touched(d: dict[str, Any], base_data: dict[str, Any], cur_data: dict[str, Any],
            base_cells: Iterable[dict[str, Any]], cur_cells: Iterable[dict[str, Any]]) -> list[tuple[str, str]]:
    """The (config, requirement) cells difference ``d`` applies to on either side."""
    out: dict[tuple[str, str], None] = {}
    for data, item, cells in ((base_data, d["baseline"], base_cells), (cur_data, d["current"], cur_cells)):
        for cell in cells:
            if _touches(d, cell, data, item):
                out[(cell["config"], cell["requirement"])] = None
    return list(out)


def show(value: Any, fields: list[str] | None = None) -> str:
    """A member in one line; only the fields that changed when some did."""
    if value is None:
        return "—"
    if fields and isinstance(value, dict):
        value = {k: value.get(k) for k in fields}
    if isinstance(value, dict) and set(value) == {"value"}:
        value = value["value"]
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def compare(pairs: list[tuple[str, str, SideProfile, SideProfile]], base_cells: list[dict[str, Any]],
            cur_cells: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[tuple[str, str], list[str]]]:
    """Per product and protocol whose profiles differ: both profiles and every difference with the
    cells it touched; and per (config, requirement) cell, the differences that touched it."""
    comparisons: list[dict[str, Any]] = []
    by_cell: dict[tuple[str, str], list[str]] = {}
    for product, protocol, b, c in pairs:
        ours = (product, protocol)
        mb = [x for x in base_cells if (x.get("product"), x.get("protocol")) == ours]
        mc = [x for x in cur_cells if (x.get("product"), x.get("protocol")) == ours]
        diffs = differences(b.data, c.data) if b.data is not None and c.data is not None else []
        for d in diffs:
            d["touched"] = touched(d, b.data or {}, c.data or {}, mb, mc)
            label = f"{d['section']} {d['key']} ({d['change']}; {b.id} -> {c.id})"
            for key in d["touched"]:
                by_cell.setdefault(key, []).append(label)
        comparisons.append({"product": product, "protocol": protocol,
                            "baseline": {"profile": b.id, "digest": b.digest, "origin": b.origin, "found": b.data is not None},
                            "current": {"profile": c.id, "digest": c.digest, "origin": c.origin, "found": c.data is not None},
                            "differences": diffs})
    return comparisons, by_cell


def with_cells(comparisons: list[dict[str, Any]], rows: list[dict[str, Any]]) -> None:
    """Each difference's touched cells as the gate classified them (requirement, target, queue type,
    the cell's worst case, both states, class), in place of their keys; drops the internal scope."""
    index = {(r["config"], r["requirement"]): r for r in rows}
    for comp in comparisons:
        for d in comp["differences"]:
            d.pop("scope", None)
            d["cells"] = [{"requirement": r["requirement"], "column": r["column"], "config": r["config"],
                           "queue_type": r.get("queue_type"),
                           "case_id": r.get("case_id"), "baseline": r["baseline"], "current": r["current"],
                           "class": r["class"], "blocking": r["blocking"]}
                          for r in (index[k] for k in d.pop("touched", []) if k in index)]


def _text(d: dict[str, Any], side: str) -> str:
    item = d[side]
    if item is None:
        return "—"
    fields = d["fields"]
    if isinstance(item, dict) and d["section"] == "entries" and (not fields or "value" in fields):
        return show(item.get("value"))
    if isinstance(item, dict) and not fields and d["section"] in ("deviations", "known_bugs", "unsupported", "lacks"):
        return show({k: item[k] for k in ("kind", "versions", "reason") if item.get(k)})
    return show(item, fields)


def brief(d: dict[str, Any], width: int = 100) -> tuple[str, str]:
    """Both sides of a difference for a console or Markdown line: an entry's value (when it changed,
    or the row came or went), a list item's reason, else the fields that changed, from a little
    before where the two texts part (a citation edited at its end would show twice the same start);
    each cut at ``width``."""
    b, c = _text(d, "baseline"), _text(d, "current")
    same = 0
    while same < min(len(b), len(c)) and b[same] == c[same]:
        same += 1
    if same > 40:
        cut = same - 20
        b, c = "…" + b[cut:], "…" + c[cut:]
    return tuple(t if len(t) <= width else t[: width - 1] + "…" for t in (b, c))  # type: ignore[return-value]


def case_name(case_id: str | None) -> str:
    """The test of a cell's worst case with its parameters (queue type, variant): ``test[classic-nack]``."""
    return (case_id or "").rsplit("::", 1)[-1]
