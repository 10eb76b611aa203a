"""Profiles: what one broker (version range, protocol) documents about itself, each entry with its citation.

A profile never makes a failure pass silently. It can
- supply the expectation for a requirement the spec leaves to the broker (``entries``),
- mark a requirement unsupported for some queue types: ``kind: cannot-express`` (the case is skipped
  with that reason) or ``kind: refused`` with the ``refusal`` the broker answers (the case runs; the
  refusal seen on the wire makes it unsupported, anything else is judged),
- document a deviation: a failure whose observed behaviour matches the documented one is reported
  as a deviation, with the citation, instead of a plain failure.

Profiles are YAML files in conformance/profiles/ (or any path given with ``--profile``), chosen from
the product and version the server announces at connect time unless the user names one.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from conformance import yamlio
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from conformance.errors import UsageError
from conformance.catalogue.profile_keys import entry_problem
from conformance.unsupported import CANNOT_EXPRESS, REFUSED

#: The top-level keys a profile file may have.
PROFILE_FIELDS = ("id", "title", "checked", "match", "queue_types", "entries", "deviations", "unsupported", "lacks")
#: Entry-point group of plugins shipping profiles: each entry point names a package directory of
#: profile YAML files (issue 19: a STOMP package brings the profiles of its brokers).
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
    """A deviation or an unsupported requirement, as the profile documents it."""

    requirement: str
    queue_types: tuple[str, ...] | None
    reason: str
    source: str
    #: For deviations: the observation key the verdict must report for the deviation to apply.
    observed: str | None = None
    #: For unsupported entries: cannot-express (the case is not run) or refused (the case runs and
    #: must see ``refusal`` on the wire: a reply code and its words such as "406 x-delivery-limit",
    #: or an AMQP 1.0 condition).
    kind: str = ""
    refusal: str = ""
    #: For deviations: the server version ranges it affects, any of them (a bug fixed in a patch
    #: release inside the profile's range applies only before the fix); None: every version the
    #: profile matches.
    versions: tuple[str, ...] | None = None

    def applies(self, requirement: str, queue_type: str | None) -> bool:
        return self.requirement == requirement and (
            self.queue_types is None or queue_type is None or queue_type in self.queue_types
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
    #: and source: every requirement needing one is reported unsupported by the target (issue 19).
    lacks: dict[str, Documented] = field(default_factory=dict)
    #: The version the judged server announced (set by :func:`select_profile`), "" when unknown.
    server_version: str = ""

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
        return by_qt.get(queue_type) or by_qt.get(None)

    def unsupported_reason(self, requirement: str, queue_type: str | None) -> Documented | None:
        return next((u for u in self.unsupported if u.applies(requirement, queue_type)), None)

    def deviation(self, requirement: str, queue_type: str | None, observed_key: str | None) -> Documented | None:
        return next(
            (d for d in self.deviations
             if d.applies(requirement, queue_type) and d.observed == observed_key and d.affects(self.server_version)),
            None,
        )


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


def _documented(items: Any, where: str, with_observed: bool, unsupported: bool = False) -> list[Documented]:
    out = []
    for i, raw in enumerate(items or []):
        w = f"{where}[{i}]"
        if not isinstance(raw, dict):
            raise UsageError(f"{w}: expected a mapping")
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
                **(_unsupported_fields(raw, w) if unsupported else {}),
            )
        )
    return out


def parse_profile(data: Any, origin: str) -> Profile:
    if not isinstance(data, dict):
        raise UsageError(f"{origin}: a profile must be a mapping")
    unknown = [k for k in data if k not in PROFILE_FIELDS]
    if unknown:
        raise UsageError(f"{origin}: unknown field(s) {', '.join(map(str, unknown))}; allowed: {', '.join(PROFILE_FIELDS)}")
    match = _need(data, "match", origin)
    if not isinstance(match, dict):
        raise UsageError(f"{origin}: 'match' must be a mapping")
    versions = str(match.get("versions", "*"))
    if versions != "*":
        try:
            SpecifierSet(versions)
        except InvalidSpecifier as exc:
            raise UsageError(f"{origin}: bad version range {versions!r}: {exc}") from exc
    for key, kind in (("queue_types", dict), ("entries", dict), ("deviations", list), ("unsupported", list), ("match", dict)):
        if data.get(key) is not None and not isinstance(data[key], kind):
            raise UsageError(f"{origin}: {key!r} must be a {'mapping' if kind is dict else 'list'}, not {type(data[key]).__name__}")
    if not isinstance(match.get("protocols"), list):
        raise UsageError(f"{origin}: match.protocols must be a list of protocol names")
    qts = {}
    for name, raw in (data.get("queue_types") or {}).items():
        w = f"{origin}: queue_types.{name}"
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
        if not isinstance(raw, dict):
            raise UsageError(f"{w}: expected a mapping with value and source")
        by_qt: dict[str | None, Entry] = {}
        if "value" in raw:
            by_qt[None] = Entry(raw["value"], str(_need(raw, "source", w)), _one_line(raw.get("reason")))
        if not isinstance(raw.get("by_queue_type") or {}, dict):
            raise UsageError(f"{w}.by_queue_type: expected a mapping of queue type to value and source")
        for qt, sub in (raw.get("by_queue_type") or {}).items():
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
        unsupported=_documented(data.get("unsupported"), f"{origin}: unsupported", False, unsupported=True),
        checked=str(data.get("checked", "")),
        path=origin,
        lacks=_lacks(data.get("lacks"), f"{origin}: lacks"),
    )


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
        name = str(_need(raw, "capability", w))
        check_names([name], w)
        if "refus" in str(raw.get("reason", "")).lower():
            raise UsageError(f"{w}: a lack is not run, so it cannot claim a refusal; list the requirements under "
                             "'unsupported' with kind refused and the 'refusal' their cases must observe")
        out[name] = Documented(requirement="*", queue_types=None, reason=str(_need(raw, "reason", w)), source=str(_need(raw, "source", w)))
    return out


def load_profile_file(path: Path) -> Profile:
    try:
        data = yamlio.safe_load(path.read_text())
    except (OSError, yaml.YAMLError, ValueError) as exc:
        raise UsageError(f"{path}: cannot read profile: {' '.join(str(exc).split())}") from None
    profile = parse_profile(data, str(path))
    from conformance.kit.reference import profile_problems  # the references live in the catalogue, which imports no profile

    problems = profile_problems(profile)
    if problems:
        raise UsageError(problems[0] + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""))
    return profile


@cache
def bundled_profiles() -> tuple[Profile, ...]:
    """Every profile installed: the built-in broker products ship theirs the way a plugin does."""
    return tuple(load_profile_file(p) for p in sorted(_plugin_profile_files(), key=lambda p: p.name))


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
    """sha256 of the profile file the run judged by (two runs with other profiles are not comparable)."""
    import hashlib

    try:
        return hashlib.sha256(Path(profile.path).read_bytes()).hexdigest()
    except OSError:
        return hashlib.sha256(repr(profile).encode()).hexdigest()


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
