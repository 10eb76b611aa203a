"""Requirement packs: a package ships its own requirements, the spec rules they cite
and the cases that check them, through the entry-point group ``conformance.packs``.

Why a plugin surface: a team owning a protocol (or a broker feature) must be able to add the
normative statements that matter to it without a fork of ``conformance/catalogue/data/requirements/``. A pack is
data with the core's own schema, so everything the core checks for its catalogue (ids, levels from
the cited rule's keyword, sources, ``needs``) is checked for the pack's too, at load, in one line
naming the pack.

A pack is a module (or any object) the entry point names, with these attributes:

* ``REQUIREMENTS`` (required): a folder of requirement YAML files, the schema of
  ``conformance/catalogue/data/requirements/*.yaml`` (area, requirements with id, level, rules, needs, sources).
* ``CASES`` (required): the dotted name of the package holding the pack's case modules (``test_*.py``,
  ``Case`` subclasses naming the pack's requirements); ``conformance run`` collects it beside the core.
* ``RULES`` (optional): a folder of spec-rule YAML files (the schema of ``conformance/catalogue/data/rules/*.yaml``)
  for a protocol the core has no rules of; the pack's requirements may cite them.
* ``PROTOCOLS`` (optional): the protocols the pack's cases speak on the wire themselves. When given,
  the pack's requirements apply only to an adapter of one of them (a case writing raw STOMP frames
  means nothing over AMQP), whatever their ``needs``.

Which packs a run loads (the selection rule), the way pytest treats its plugins: installing a
package activates what it ships *for what you run*. By default a run loads the packs shipped by the
same distribution as the selected adapter (installing ``conformance-stomp`` and running
``--adapter stomp`` brings its STOMP pack); ``--pack NAME`` adds any other installed pack and
``--pack no:NAME`` leaves a default one out (pytest's ``-p no:NAME``). Nothing else is imported, so
a broken pack nobody selected cannot abort a run. The core names no pack.
"""

from __future__ import annotations

import importlib
import importlib.util
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Any, Iterable

from conformance.catalogue import active_packs, requirements, rules
from conformance.catalogue.active_packs import Pack, active, pack_of
from conformance.errors import UsageError

PACK_GROUP = "conformance.packs"
#: Pack, active and pack_of are the registry's (conformance.catalogue.active_packs), named here too
#: for the callers that activate packs.
__all__ = ["PACK_GROUP", "Pack", "activate", "active", "adapter_entry_name", "deactivate_all", "installed", "pack_of", "selection"]


def _fail(name: str, what: str) -> UsageError:
    return UsageError(f"requirement pack {name!r} in {PACK_GROUP}: {what}")


def _yaml_files(name: str, obj: Any, attr: str, required: bool) -> tuple[Path, ...]:
    value = getattr(obj, attr, None)
    if value is None:
        if required:
            raise _fail(name, f"has no {attr} (a folder of YAML files)")
        return ()
    folder = Path(str(value))
    if not folder.is_dir():
        raise _fail(name, f"{attr} {str(folder)!r} is not a folder")
    files = tuple(sorted(p for p in folder.iterdir() if p.suffix == ".yaml"))
    if required and not files:
        raise _fail(name, f"{attr} folder {str(folder)!r} holds no .yaml file")
    return files


def _from_entry_point(ep: EntryPoint) -> Pack:
    """Load and validate one pack's declaration (not yet its requirements: see :func:`activate`)."""
    try:
        obj = ep.load()
    except Exception as exc:  # noqa: BLE001 - a broken third-party pack: one line naming it, never a traceback
        raise _fail(ep.name, f"failed to load: {type(exc).__name__}: {exc}") from None
    reqs = _yaml_files(ep.name, obj, "REQUIREMENTS", True)
    rules = _yaml_files(ep.name, obj, "RULES", False)
    cases = getattr(obj, "CASES", None)
    if not isinstance(cases, str) or not cases:
        raise _fail(ep.name, "has no CASES (the dotted name of its case package)")
    try:
        spec = importlib.util.find_spec(cases)
    except (ImportError, ValueError) as exc:
        raise _fail(ep.name, f"CASES {cases!r} cannot be found: {exc}") from None
    if spec is None or not spec.submodule_search_locations:
        raise _fail(ep.name, f"CASES {cases!r} is not an importable package")
    protocols = getattr(obj, "PROTOCOLS", ()) or ()
    if isinstance(protocols, str) or not all(isinstance(p, str) for p in protocols):
        raise _fail(ep.name, "PROTOCOLS must be a list of protocol names")
    return Pack(ep.name, reqs, rules, cases, Path(next(iter(spec.submodule_search_locations))), tuple(protocols))


def installed() -> list[str]:
    """Names of every installed pack (nothing is imported)."""
    return sorted({ep.name for ep in entry_points(group=PACK_GROUP)})


def _dist_of(group: str, name: str) -> str | None:
    for ep in entry_points(group=group, name=name):
        return ep.dist.name if ep.dist is not None else None
    return None


def selection(options: Iterable[str] = (), adapter: str | None = None) -> list[str]:
    """The packs a run loads: the selected adapter's distribution's, plus ``--pack NAME``, minus
    ``--pack no:NAME`` (see the module docstring). Unknown names are a usage error."""
    from conformance.api import ADAPTER_GROUP

    options = list(options or ())
    known = installed()
    wanted: list[str] = []
    dist = _dist_of(ADAPTER_GROUP, adapter) if adapter else None
    if dist is not None:
        wanted = sorted({ep.name for ep in entry_points(group=PACK_GROUP) if ep.dist is not None and ep.dist.name == dist})
    for opt in options:
        name = opt.removeprefix("no:")
        if name not in known:
            raise UsageError(f"unknown requirement pack {name!r} (--pack); installed: {', '.join(known) or 'none'}")
        if not opt.startswith("no:") and name not in wanted:
            wanted.append(name)
    excluded = {o[3:] for o in options if o.startswith("no:")}  # no:NAME wins, wherever it stands
    return [w for w in wanted if w not in excluded]


def adapter_entry_name(adapter_cls: type) -> str | None:
    """The entry-point name an adapter class is installed under (it was loaded already)."""
    from conformance.api import ADAPTER_GROUP
    from conformance.plugins import load_group

    for name, cls in load_group(ADAPTER_GROUP).items():
        if cls is adapter_cls:
            return name
    return None


def activate(names: Iterable[str]) -> list[Pack]:
    """Load the named packs and make their rules, requirements and cases part of the requirements.

    Everything is checked here, so a pack with an unknown capability, a MUST without a MUST rule or
    an id the core already has stops the run before anything is launched, in one line naming it."""
    added = []
    for name in names:
        if active_packs.get(name) is not None:
            continue
        eps = list(entry_points(group=PACK_GROUP, name=name))
        if not eps:
            raise UsageError(f"unknown requirement pack {name!r}; installed: {', '.join(installed()) or 'none'}")
        pack = _from_entry_point(eps[0])
        active_packs.add(pack)
        added.append(pack)
    if added:
        _reset_caches()
        try:
            rules.all_rules()
            requirements.catalogue()
        except UsageError as exc:
            for pack in added:
                active_packs.remove(pack.name)
            _reset_caches()
            raise _fail(added[0].name if len(added) == 1 else ", ".join(p.name for p in added), str(exc)) from None
    return [p for p in map(active_packs.get, names) if p is not None]


def deactivate_all() -> None:
    """Back to the core catalogue (tests)."""
    active_packs.clear()
    _reset_caches()


def _reset_caches() -> None:
    rules.all_rules.cache_clear()
    requirements.catalogue.cache_clear()
    requirements.catalogue_digest.cache_clear()
