"""Profiles: what one broker (version range, protocol) documents about itself, each entry with its citation.

A profile never makes a failure pass silently. It can
- supply the expectation for a requirement the spec leaves to the broker (``entries``),
- mark a requirement unsupported for some queue types: ``kind: cannot-express`` (the case is skipped
  with that reason) or ``kind: refused`` with the ``refusal`` the broker answers (the case runs; the
  refusal seen on the wire makes it unsupported, anything else is judged),
- document a deviation: a failure whose observed behaviour matches the documented one is reported
  as a deviation, with the citation, instead of a plain failure,
- name a known bug (``known_bugs``): a failure whose observed behaviour matches a bug reported
  upstream and still open stays a failure, and carries the upstream reference.

A deviation or known bug may hold only on some targets: ``when_target`` names facts the run's target
reports of itself (``no-store``: a node without a store module, which its vendor documents keeps no
durable state), so the same loss on a node with a store stays a failure.

Profiles are YAML files shipped by plugins (entry-point group ``conformance.profiles``: the folders
adapters/<product>/profiles/ and a plugin package's own), or any path given with ``--profile``, chosen
from the product and version the server announces at connect time unless the user names one.

A profile may say ``extends: <profile id>`` (any bundled profile, in any folder) and hold only what
differs from its parent; :func:`resolve` turns it into a whole profile before it is parsed:
- ``id``, ``title`` and ``checked`` are the profile's own, never inherited; ``match`` is merged key by
  key, and a child names its own ``match.versions`` (else parent and child claim the same servers);
- ``queue_types`` by name: a child's queue type replaces the parent's;
- ``entries`` by key, then by row (the default row ``value``/``source``/``reason`` as one, each
  ``by_queue_type`` row by queue type): a child's row replaces the parent's whole, with its own
  citation and reason, and the parent's other rows stay;
- ``deviations`` and ``known_bugs`` (by requirement, queue types, observed and when_target), ``unsupported`` (by requirement and queue
  types) and ``lacks`` (by capability): an item with the identity of an inherited one replaces it in
  place, any other is added after the inherited ones;
- removal is explicit, of an inherited member only: ``null`` for an entry, an entry's
  ``by_queue_type`` row or a queue type (as in JSON merge patch, RFC 7386); ``remove: true`` on a list
  item that names the identity of the inherited one.
A parent may itself extend another; a cycle or an unknown parent is refused.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, fields, is_dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from conformance import yamlio
from conformance.catalogue.configurations import base_of
from conformance.catalogue.profile_keys import entry_problem
from conformance.errors import UsageError
from conformance.unsupported import CANNOT_EXPRESS, REFUSED

#: The top-level keys a profile file may have.
PROFILE_FIELDS = ("id", "title", "checked", "extends", "match", "queue_types", "entries", "deviations", "known_bugs", "unsupported", "lacks")
#: Entry-point group of plugins shipping profiles: each entry point names a package directory of
#: profile YAML files (a STOMP package brings the profiles of its brokers).
PROFILE_GROUP = "conformance.profiles"


@dataclass(frozen=True)
class Entry:
    value: Any
    source: str
    #: Why the broker differs from the requirement's reference, when it does (conformance.kit.reference):
    #: with it the entry documents a deviation; without it a differing entry is refused.
    reason: str = ""


@dataclass(frozen=True)
class Documented:
    """A deviation, a known bug or an unsupported requirement, as the profile documents it."""

    requirement: str
    queue_types: tuple[str, ...] | None
    reason: str
    source: str
    #: For deviations and known bugs: the observation key the verdict must report for the entry to apply.
    observed: str | None = None
    #: For unsupported entries: cannot-express (the case is not run) or refused (the case runs and
    #: must see ``refusal`` on the wire: a reply code and its words such as "406 x-delivery-limit",
    #: or an AMQP 1.0 condition).
    kind: str = ""
    refusal: str = ""
    #: For deviations and known bugs: the server version ranges it affects, any of them (a bug fixed in a patch
    #: release inside the profile's range applies only before the fix); None: every version the
    #: profile matches.
    versions: tuple[str, ...] | None = None
    #: For deviations and known bugs: facts the run's target must report for the entry to apply
    #: (:data:`conformance.targets.TARGET_CONDITIONS`, e.g. ``no-store``: the vendor documents what a
    #: node built or installed without some module does); None: any target.
    when_target: tuple[str, ...] | None = None

    def applies(self, requirement: str, queue_type: str | None) -> bool:
        """For ``requirement`` on a cell: its queue types name the cell's (``classic+priority``) or
        the queue type it is a configuration of (``classic`` holds for every classic configuration)."""
        return self.requirement == requirement and (
            self.queue_types is None or queue_type is None or queue_type in self.queue_types or base_of(queue_type) in self.queue_types
        )

    def affects(self, server_version: str) -> bool:
        """Whether the server version is one it documents (an unknown version: the profile's word)."""
        if self.versions is None or not server_version:
            return True
        try:
            return any(Version(server_version) in SpecifierSet(r) for r in self.versions)
        except InvalidVersion:
            return True


@dataclass(frozen=True)
class QueueType:
    name: str
    durable: bool
    arguments: dict[str, Any]
    source: str
    #: False for a queue type the profile documents (how it is declared) but the catalogue does not
    #: run on, e.g. an append-only stream with no requeue or delivery limit to judge; ``reason`` says why.
    runs: bool = True
    reason: str = ""


@dataclass
class Profile:
    id: str
    title: str
    product: str
    versions: str
    protocols: tuple[str, ...]
    queue_types: dict[str, QueueType]
    entries: dict[str, dict[str | None, Entry]]
    deviations: list[Documented] = field(default_factory=list)
    unsupported: list[Documented] = field(default_factory=list)
    checked: str = ""
    path: str = ""
    #: Capabilities (conformance/catalogue/data/capabilities.yaml) the broker does not offer, by name, with reason
    #: and source: every requirement needing one is reported unsupported by the target.
    lacks: dict[str, Documented] = field(default_factory=dict)
    #: Bugs reported upstream and still open that the broker has: a failure matching one stays a
    #: failure (a profile explains, it never excuses) and carries the upstream reference.
    known_bugs: list[Documented] = field(default_factory=list)
    #: The version the judged server announced (set by :func:`select_profile`), "" when unknown.
    server_version: str = ""
    #: What the run's target reports of itself (:func:`conformance.targets.target_conditions`, set
    #: by the runner once the target is known): an entry with ``when_target`` applies only then.
    target_conditions: frozenset[str] = frozenset()

    def matches(self, product: str, version: str, protocol: str) -> bool:
        if self.product != "*" and self.product.lower() != product.lower():
            return False
        if protocol not in self.protocols:
            return False
        if not self.versions or self.versions == "*":
            return True
        try:
            return Version(version) in SpecifierSet(self.versions)
        except InvalidVersion:
            return False

    def entry(self, key: str, queue_type: str | None = None) -> Entry | None:
        by_qt = self.entries.get(key)
        if not by_qt:
            return None
        return by_qt.get(queue_type) or by_qt.get(base_of(queue_type)) or by_qt.get(None)

    def unsupported_reason(self, requirement: str, queue_type: str | None) -> Documented | None:
        return next((u for u in self.unsupported if u.applies(requirement, queue_type)), None)

    def deviation(self, requirement: str, queue_type: str | None, observed_key: str | None) -> Documented | None:
        return _matching(self.deviations, requirement, queue_type, observed_key, self.server_version, self.target_conditions)

    def known_bug(self, requirement: str, queue_type: str | None, observed_key: str | None) -> Documented | None:
        """The open upstream bug a failure with this observation key shows, if the profile names one."""
        return _matching(self.known_bugs, requirement, queue_type, observed_key, self.server_version, self.target_conditions)


def _matching(items: list[Documented], requirement: str, queue_type: str | None, observed_key: str | None,
              server_version: str, target_conditions: frozenset[str] = frozenset()) -> Documented | None:
    return next((d for d in items
                 if d.applies(requirement, queue_type) and d.observed == observed_key and d.affects(server_version)
                 and set(d.when_target or ()) <= target_conditions), None)


def _one_line(text: Any) -> str:
    return " ".join(str(text or "").split())


def _need(d: dict[str, Any], key: str, where: str) -> Any:
    if key not in d or d[key] in (None, ""):
        raise UsageError(f"{where}: missing {key!r}")
    return d[key]


#: What an ``unsupported:`` entry may claim. A profile's word is no refusal seen on the wire: an entry
#: claiming the broker refuses names the refusal to expect, and the case runs to see it.
PROFILE_UNSUPPORTED_KINDS = (CANNOT_EXPRESS, REFUSED)


def _unsupported_fields(raw: dict[str, Any], w: str) -> dict[str, str]:
    kind = raw.get("kind")
    if kind not in PROFILE_UNSUPPORTED_KINDS:
        raise UsageError(f"{w}.kind: expected one of {', '.join(PROFILE_UNSUPPORTED_KINDS)} (cannot-express: the broker "
                         "cannot express the requirement at all; refused: it refuses it cleanly, with 'refusal' to expect)")
    refusal = raw.get("refusal")
    if kind == REFUSED and (refusal is None or str(refusal).strip() == ""):
        raise UsageError(f"{w}: kind refused needs 'refusal', the protocol's refusal the case must observe "
                         "(a reply code and its words such as \"406 x-delivery-limit\", or an AMQP 1.0 condition such as amqp:not-implemented)")
    if kind == REFUSED and str(refusal).strip().isdigit():
        raise UsageError(f"{w}: refusal {refusal!r} is a bare reply code, which any close with it would match (an unknown "
                         "delivery tag is a 406 too): add the words of the refusal, e.g. \"406 x-delivery-limit\"")
    if kind == CANNOT_EXPRESS and (refusal is not None or "refus" in str(raw.get("reason", "")).lower()):
        raise UsageError(f"{w}: a cannot-express entry is not run, so it cannot claim a refusal; an entry whose broker "
                         "refuses is kind refused, with the 'refusal' the case must observe")
    return {"kind": kind, "refusal": "" if refusal is None else str(refusal)}


def _versions(raw: Any, w: str) -> tuple[str, ...] | None:
    """``versions``: one version range or a list of them (any matches), e.g. [">=3.10,<3.10.18", ">=3.11,<3.11.9"]."""
    if raw is None:
        return None
    ranges = [str(r) for r in (raw if isinstance(raw, list) else [raw])]
    for r in ranges:
        try:
            SpecifierSet(r)
        except InvalidSpecifier as exc:
            raise UsageError(f"{w}.versions: bad version range {r!r}: {exc}") from None
    if not ranges:
        raise UsageError(f"{w}.versions: expected a version range or a list of them")
    return tuple(ranges)


def _when_target(raw: Any, w: str) -> tuple[str, ...] | None:
    """``when_target``: one fact of the run's target or a list of them (all must hold), from the
    suite's vocabulary (conformance.targets.TARGET_CONDITIONS)."""
    from conformance.targets import TARGET_CONDITIONS

    if raw is None:
        return None
    facts = [str(x) for x in (raw if isinstance(raw, list) else [raw])]
    unknown = [f for f in facts if f not in TARGET_CONDITIONS]
    if not facts or unknown:
        known = "; ".join(f"{k}: {v}" for k, v in TARGET_CONDITIONS.items())
        raise UsageError(f"{w}.when_target: expected one or a list of the facts a target reports ({known}), not {unknown or raw!r}")
    return tuple(facts)


def _documented(items: Any, where: str, with_observed: bool, unsupported: bool = False) -> list[Documented]:
    out = []
    for i, raw in enumerate(items or []):
        w = f"{where}[{i}]"
        if not isinstance(raw, dict):
            raise UsageError(f"{w}: expected a mapping")
        _no_removal(raw, w)
        qts = raw.get("queue_types")
        if qts is not None and not (isinstance(qts, list) and all(isinstance(q, str) for q in qts)):
            raise UsageError(f"{w}.queue_types: expected a list of queue type names")
        out.append(
            Documented(
                requirement=str(_need(raw, "requirement", w)),
                queue_types=tuple(qts) if qts else None,
                reason=str(_need(raw, "reason", w)),
                source=str(_need(raw, "source", w)),
                observed=str(_need(raw, "observed", w)) if with_observed else None,
                versions=_versions(raw.get("versions"), w) if with_observed else None,
                when_target=_when_target(raw.get("when_target"), w) if with_observed else None,
                **(_unsupported_fields(raw, w) if unsupported else {}),
            )
        )
    return out


def _not_removal(raw: Any, w: str) -> None:
    if raw is None:
        raise UsageError(f"{w}: null removes an inherited member, so it belongs only in a profile that extends another")


def _no_removal(raw: dict[str, Any], w: str) -> None:
    if "remove" in raw:
        raise UsageError(f"{w}: 'remove' takes an inherited item away, so it belongs only in a profile that extends another "
                         "and names an item its parent has")


def parse_profile(data: Any, origin: str) -> Profile:
    """A whole profile (see :func:`resolve` for one that extends another)."""
    if not isinstance(data, dict):
        raise UsageError(f"{origin}: a profile must be a mapping")
    unknown = [k for k in data if k not in PROFILE_FIELDS]
    if unknown:
        raise UsageError(f"{origin}: unknown field(s) {', '.join(map(str, unknown))}; allowed: {', '.join(PROFILE_FIELDS)}")
    if "extends" in data:
        raise UsageError(f"{origin}: extends {data['extends']!r} is not resolved; load the file (load_profile_file) or resolve() it first")
    match = _need(data, "match", origin)
    if not isinstance(match, dict):
        raise UsageError(f"{origin}: 'match' must be a mapping")
    versions = str(match.get("versions", "*"))
    if versions != "*":
        try:
            SpecifierSet(versions)
        except InvalidSpecifier as exc:
            raise UsageError(f"{origin}: bad version range {versions!r}: {exc}") from exc
    for key, kind in (("queue_types", dict), ("entries", dict), ("deviations", list), ("known_bugs", list), ("unsupported", list), ("match", dict)):
        if data.get(key) is not None and not isinstance(data[key], kind):
            raise UsageError(f"{origin}: {key!r} must be a {'mapping' if kind is dict else 'list'}, not {type(data[key]).__name__}")
    if not isinstance(match.get("protocols"), list):
        raise UsageError(f"{origin}: match.protocols must be a list of protocol names")
    qts = {}
    for name, raw in (data.get("queue_types") or {}).items():
        w = f"{origin}: queue_types.{name}"
        _not_removal(raw, w)
        if not isinstance(raw, dict):
            raise UsageError(f"{w}: expected a mapping")
        declare = raw.get("declare") or {}
        if not isinstance(declare, dict) or not isinstance(declare.get("arguments") or {}, dict):
            raise UsageError(f"{w}.declare: expected a mapping (durable, arguments: a mapping)")
        unknown = [k for k in raw if k not in ("declare", "source", "catalogue", "reason")]
        if unknown:
            raise UsageError(f"{w}: unknown key(s) {', '.join(map(str, unknown))}; allowed: declare, source, catalogue, reason")
        runs = raw.get("catalogue", True)
        if runs not in (True, False):
            raise UsageError(f"{w}.catalogue: expected true or false")
        qts[name] = QueueType(
            name=name,
            durable=bool(declare.get("durable", True)),
            arguments=dict(declare.get("arguments") or {}),
            source=str(_need(raw, "source", w)),
            runs=runs,
            reason="" if runs else str(_need(raw, "reason", w)),
        )
    entries: dict[str, dict[str | None, Entry]] = {}
    for key, raw in (data.get("entries") or {}).items():
        w = f"{origin}: entries.{key}"
        _not_removal(raw, w)
        if not isinstance(raw, dict):
            raise UsageError(f"{w}: expected a mapping with value and source")
        by_qt: dict[str | None, Entry] = {}
        if "value" in raw:
            by_qt[None] = Entry(raw["value"], str(_need(raw, "source", w)), _one_line(raw.get("reason")))
        if not isinstance(raw.get("by_queue_type") or {}, dict):
            raise UsageError(f"{w}.by_queue_type: expected a mapping of queue type to value and source")
        for qt, sub in (raw.get("by_queue_type") or {}).items():
            _not_removal(sub, f"{w}.by_queue_type.{qt}")
            if not isinstance(sub, dict) or "value" not in sub:
                raise UsageError(f"{w}.by_queue_type.{qt}: needs value and source")
            by_qt[qt] = Entry(sub["value"], str(_need(sub, "source", f"{w}.by_queue_type.{qt}")), _one_line(sub.get("reason")))
        if not by_qt:
            raise UsageError(f"{w}: no value")
        for qt, e in by_qt.items():
            problem = entry_problem(str(key), e.value)
            if problem:
                raise UsageError(f"{w}{'' if qt is None else f'.by_queue_type.{qt}'}: {problem}")
        entries[key] = by_qt
    return Profile(
        id=str(_need(data, "id", origin)),
        title=str(data.get("title", data["id"])),
        product=str(_need(match, "product", f"{origin}: match")),
        versions=versions,
        protocols=tuple(_need(match, "protocols", f"{origin}: match")),
        queue_types=qts,
        entries=entries,
        deviations=_documented(data.get("deviations"), f"{origin}: deviations", True),
        known_bugs=_known_bugs(data.get("known_bugs"), f"{origin}: known_bugs"),
        unsupported=_documented(data.get("unsupported"), f"{origin}: unsupported", False, unsupported=True),
        checked=str(data.get("checked", "")),
        path=origin,
        lacks=_lacks(data.get("lacks"), f"{origin}: lacks"),
    )


#: A link to the upstream tracker's report (an issue, a pull request, a ticket).
_URL = re.compile(r"https?://\S+")
#: The words by which a known bug's source says the report is still open upstream.
_OPEN = re.compile(r"\bopen\b", re.IGNORECASE)


def _known_bugs(items: Any, where: str) -> list[Documented]:
    """``known_bugs``: the shape of ``deviations``, each source citing the upstream report by URL and
    saying it is open. A bug fixed in a later release is a deviation on the affected versions instead."""
    out = _documented(items, where, True)
    for i, doc in enumerate(out):
        if not _URL.search(doc.source):
            raise UsageError(f"{where}[{i}].source: cite the upstream report by its URL (the tracker's issue or pull request)")
        if not _OPEN.search(doc.source):
            raise UsageError(f"{where}[{i}].source: say that the upstream report is open; a bug fixed in a later release is "
                             "a deviation on the affected versions, citing the fix")
    return out


def _lacks(items: Any, where: str) -> dict[str, Documented]:
    """``lacks: [{capability, reason, source}]``, each capability a known name.

    A lack skips every case needing it, so it may only say that the broker's dialect cannot express
    the capability at all (unsupported, kind cannot-express): a broker that refuses it is seen
    refusing, through an ``unsupported`` entry of kind refused, whose case runs."""
    from conformance.catalogue.capabilities import check_names

    out: dict[str, Documented] = {}
    if items is not None and not isinstance(items, list):
        raise UsageError(f"{where}: expected a list of {{capability, reason, source}}")
    for i, raw in enumerate(items or []):
        w = f"{where}[{i}]"
        if not isinstance(raw, dict):
            raise UsageError(f"{w}: expected a mapping")
        _no_removal(raw, w)
        name = str(_need(raw, "capability", w))
        check_names([name], w)
        if "refus" in str(raw.get("reason", "")).lower():
            raise UsageError(f"{w}: a lack is not run, so it cannot claim a refusal; list the requirements under "
                             "'unsupported' with kind refused and the 'refusal' their cases must observe")
        out[name] = Documented(requirement="*", queue_types=None, reason=str(_need(raw, "reason", w)), source=str(_need(raw, "source", w)))
    return out


#: Profile data as read from its file, by profile id: (file, data).
Lookup = Callable[[str], "tuple[str, dict[str, Any]] | None"]


def resolve(data: Any, origin: str, lookup: Lookup | None = None) -> Any:
    """The whole profile a file describes: its own data merged over its parent's (``extends``), the
    parent resolved first; the merge rules are in the module's docstring. ``lookup`` finds a parent by
    id (default: the bundled profiles)."""
    return _resolve(data, origin, lookup or _bundled_data, ())


def _resolve(data: Any, origin: str, lookup: Lookup, chain: tuple[str, ...]) -> Any:
    if not isinstance(data, dict) or "extends" not in data:
        return data
    parent_id = data["extends"]
    if not isinstance(parent_id, str) or not parent_id:
        raise UsageError(f"{origin}: extends: expected the id of a profile")
    chain = (*chain, str(data.get("id", origin)))
    if parent_id in chain:
        raise UsageError(f"{origin}: extends cycle: {' -> '.join((*chain, parent_id))}")
    found = lookup(parent_id)
    if found is None:
        raise UsageError(f"{origin}: extends: unknown profile {parent_id!r}; bundled: {', '.join(sorted(_bundled_raw()))}")
    parent_origin, parent = found
    parent = _resolve(parent, parent_origin, lookup, chain)
    if not isinstance(parent, dict):
        raise UsageError(f"{origin}: extends {parent_id!r}: {parent_origin} is not a profile mapping")
    return _merge(parent, data, origin)


#: What identifies an item of a list section, for a child to replace or remove it.
_IDENTITY = {
    "deviations": ("requirement", "queue_types", "observed", "when_target"),
    "known_bugs": ("requirement", "queue_types", "observed", "when_target"),
    "unsupported": ("requirement", "queue_types"),
    "lacks": ("capability",),
}


def _merge(parent: dict[str, Any], child: dict[str, Any], origin: str) -> dict[str, Any]:
    out: dict[str, Any] = {k: child[k] for k in ("id", "title", "checked") if k in child}
    out.update({k: v for k, v in child.items() if k not in PROFILE_FIELDS})  # refused by parse_profile, named in its message
    match = child.get("match")
    if match is not None and not isinstance(match, dict):
        raise UsageError(f"{origin}: 'match' must be a mapping")
    if not match or "versions" not in match:
        raise UsageError(f"{origin}: a profile that extends another names its own match.versions "
                         "(else both claim the same servers)")
    out["match"] = {**(parent.get("match") or {}), **match}
    out["queue_types"] = _merge_mapping(parent.get("queue_types"), child.get("queue_types"), f"{origin}: queue_types", replace_whole=True)
    out["entries"] = _merge_mapping(parent.get("entries"), child.get("entries"), f"{origin}: entries", replace_whole=False)
    for key, identity in _IDENTITY.items():
        out[key] = _merge_list(parent.get(key), child.get(key), f"{origin}: {key}", identity)
    return out


def _mapping(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise UsageError(f"{where}: expected a mapping, not {type(value).__name__}")
    return value


def _merge_mapping(parent: Any, child: Any, where: str, replace_whole: bool) -> dict[str, Any]:
    """Members by name; ``null`` removes an inherited one. Entries merge row by row."""
    out = dict(_mapping(parent, where))
    for name, value in _mapping(child, where).items():
        if value is None:
            if name not in out:
                raise UsageError(f"{where}.{name}: null removes an inherited member, and the parent has no {name!r}")
            del out[name]
        elif replace_whole or name not in out or not isinstance(value, dict) or not isinstance(out[name], dict):
            out[name] = value
        else:
            out[name] = _merge_entry(out[name], value, f"{where}.{name}")
    return out


_ROW = ("value", "source", "reason")


def _merge_entry(parent: dict[str, Any], child: dict[str, Any], where: str) -> dict[str, Any]:
    """An entry's default row is replaced whole (value with its source and reason); its
    ``by_queue_type`` rows one by one, ``null`` removing an inherited row."""
    if "value" not in child and any(k in child for k in ("source", "reason")):
        raise UsageError(f"{where}: a row is replaced whole: give its value with its source (and reason)")
    row = child if "value" in child else parent
    out = {k: row[k] for k in _ROW if k in row}
    out.update({k: v for k, v in parent.items() if k not in (*_ROW, "by_queue_type")})
    out.update({k: v for k, v in child.items() if k not in (*_ROW, "by_queue_type")})
    rows = _merge_mapping(parent.get("by_queue_type"), child.get("by_queue_type"), f"{where}.by_queue_type", replace_whole=True)
    if rows:
        out["by_queue_type"] = rows
    return out


def _merge_list(parent: Any, child: Any, where: str, identity: tuple[str, ...]) -> list[Any]:
    """Items by identity: a child's item replaces the inherited one in place, ``remove: true`` takes it
    away, any other is added after the inherited ones."""
    for name, items in (("parent", parent), ("child", child)):
        if items is not None and not isinstance(items, list):
            raise UsageError(f"{where}: expected a list ({name}), not {type(items).__name__}")

    def ident(item: Any) -> Any:
        if not isinstance(item, dict):
            return None
        return tuple(tuple(v) if isinstance(v, list) else v for v in (item.get(k) for k in identity))

    out = list(parent or [])
    for i, item in enumerate(child or []):
        key = ident(item)
        at = next((j for j, old in enumerate(out) if key is not None and ident(old) == key), None)
        if isinstance(item, dict) and "remove" in item:
            named = ", ".join(f"{k} {item.get(k)!r}" for k in identity if item.get(k) is not None)
            if item["remove"] is not True or set(item) - {"remove", *identity}:
                raise UsageError(f"{where}[{i}]: a removal is 'remove: true' with the identity of the inherited item "
                                 f"({', '.join(identity)}) and nothing else")
            if at is None:
                raise UsageError(f"{where}[{i}]: remove: the parent has no item with {named}")
            del out[at]
        elif at is None:
            out.append(item)
        else:
            out[at] = item
    return out


def _read(path: Path) -> Any:
    try:
        return yamlio.safe_load(path.read_text())
    except (OSError, yaml.YAMLError, ValueError) as exc:
        raise UsageError(f"{path}: cannot read profile: {' '.join(str(exc).split())}") from None


def load_profile_file(path: Path) -> Profile:
    return _load(_read(path), str(path))


def _load(data: Any, origin: str) -> Profile:
    profile = parse_profile(resolve(data, origin), origin)
    from conformance.catalogue.profile_check import profile_problems  # it reads the catalogue, which reads no profile

    problems = profile_problems(profile)
    if problems:
        raise UsageError(problems[0] + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""))
    return profile


@cache
def bundled_profiles() -> tuple[Profile, ...]:
    """Every profile installed: the built-in broker products ship theirs the way a plugin does."""
    return tuple(_load(data, origin) for origin, data in sorted(_bundled_raw().values(), key=lambda od: Path(od[0]).name))


@cache
def _bundled_raw() -> dict[str, tuple[str, Any]]:
    """The bundled profile files as read, by id (a parent named by ``extends`` is found here)."""
    out: dict[str, tuple[str, Any]] = {}
    for path in _plugin_profile_files():
        data = _read(path)
        pid = str(data.get("id", path)) if isinstance(data, dict) else str(path)
        if pid in out:
            raise UsageError(f"profile id {pid!r} is in both {out[pid][0]} and {path}")
        out[pid] = (str(path), data)
    return out


def _bundled_data(profile_id: str) -> tuple[str, dict[str, Any]] | None:
    return _bundled_raw().get(profile_id)


def _plugin_profile_files() -> list[Path]:
    """Profile files shipped by plugins (entry-point group ``conformance.profiles``): each entry point
    loads to a directory path (a str or Path, or a module whose ``PROFILES_DIR`` is one)."""
    from conformance.plugins import load_group

    out: list[Path] = []
    for name, obj in sorted(load_group(PROFILE_GROUP).items()):
        folder = Path(str(getattr(obj, "PROFILES_DIR", obj)))
        if not folder.is_dir():
            raise UsageError(f"plugin {name!r} in {PROFILE_GROUP}: {folder} is not a directory of profile YAML files")
        out.extend(sorted(p for p in folder.iterdir() if p.suffix == ".yaml"))
    return out


def check_profile_option(override: str | None) -> None:
    """Validate ``--profile`` before anything is launched (a file is parsed, an id must exist)."""
    if not override:
        return
    p = Path(override)
    if p.suffix in (".yaml", ".yml") or p.exists():
        load_profile_file(p)
    elif override not in {prof.id for prof in bundled_profiles()}:
        raise UsageError(f"unknown profile {override!r}; bundled: {', '.join(p.id for p in bundled_profiles())}")


def profile_digest(profile: Profile) -> str:
    """sha256 of the resolved profile the run judged by (two runs with other profiles are not comparable).

    Its input is the profile's data after ``extends``, not its file: moving the file, folding it into a
    parent or editing a comment leaves the digest alone; a changed entry, citation or range changes it."""
    import hashlib
    import json

    text = json.dumps(profile_data(profile), sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def profile_data(profile: Profile) -> dict[str, Any]:
    """The resolved profile as plain JSON data, what :func:`profile_digest` hashes: a run keeps it in
    run.json so that a gate across releases can show which entries differ between two runs."""
    return _canonical(profile)


#: Profile fields that are not profile data: where the file lies, which server and target the run met.
_NOT_DATA = ("path", "server_version", "target_conditions")


def _canonical(obj: Any) -> Any:
    """Plain JSON data: mapping keys as strings (the default row of an entry under ""), order of lists kept."""
    if is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: _canonical(getattr(obj, f.name)) for f in fields(obj) if f.name not in _NOT_DATA}
    if isinstance(obj, dict):
        return {"" if k is None else str(k): _canonical(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_canonical(v) for v in obj]
    return obj


def profile_on(target: Any, product: str, version: str, protocol: str, override: str | None = None) -> Profile:
    """:func:`select_profile` with the facts ``target`` reports of itself (conformance.targets.target_conditions),
    so an entry that holds only on such a target (``when_target``) holds here: what a run and a soak judge with."""
    from conformance.targets import target_conditions

    return replace(select_profile(product, version, protocol, override), target_conditions=target_conditions(target))


def select_profile(product: str, version: str, protocol: str, override: str | None = None) -> Profile:
    """The user's choice (id or file), else the most specific bundled profile for this server.

    A product-specific profile beats the protocol's spec-only baseline (product "*").
    """
    return replace(_select(product, version, protocol, override), server_version=version)


def _select(product: str, version: str, protocol: str, override: str | None) -> Profile:
    profiles = bundled_profiles()
    if override:
        p = Path(override)
        if p.suffix in (".yaml", ".yml") or p.exists():
            return load_profile_file(p)
        for prof in profiles:
            if prof.id == override:
                return prof
        raise UsageError(f"unknown profile {override!r}; bundled: {', '.join(p.id for p in profiles)}")
    candidates = [p for p in profiles if p.matches(product, version, protocol)]
    if not candidates:
        raise UsageError(f"no profile for {product} {version} over {protocol}; name one with --profile")
    return sorted(candidates, key=lambda p: p.product == "*")[0]
