"""Applicability by capability: what a case needs, and who offers it.

A case needs its requirement's ``needs`` (what the protocol must express) and the ability of every
kind of fault it inflicts (conformance.nemesis.kinds: what the target must take). The adapter offers
the protocol's ``capabilities``, the target its abilities, and a profile's ``lacks`` names what the
broker's dialect cannot express. A case applies when every capability it needs is offered and none
is lacked (:func:`applicability` for the protocol's side; the target's side is the nemesis's,
:func:`conformance.nemesis.kinds.fault_applicability`, and the runner asks both); one that does not
is unsupported, ``cannot-express`` or ``no-fault``. So a new protocol's adapter gets every
requirement it can express, and a new fault kind every case that names it, with no edit of the
catalogue. The vocabulary is data (``capabilities.yaml``) so a typo in a requirement, an adapter or a profile is
refused at load in one line instead of silently making a requirement "not apply".
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any, Iterable

from conformance import yamlio
from conformance.errors import UsageError

#: Capabilities named so are a target's abilities (what a fault kind needs), never a protocol's.
ABILITY_PREFIX = "fault."


@cache
def vocabulary() -> dict[str, str]:
    """Every capability name and what it means."""
    raw = yamlio.safe_load((resources.files("conformance.catalogue") / "data" / "capabilities.yaml").read_text())
    return {str(k): str(v) for k, v in raw.items()}


def check_names(names: Iterable[str], who: str) -> frozenset[str]:
    """The names as a set, or a one-line UsageError naming ``who`` and the unknown name."""
    known = vocabulary()
    out = frozenset(str(n) for n in names)
    unknown = sorted(out - known.keys())
    if unknown:
        raise UsageError(f"{who}: unknown capability {unknown[0]!r} (known: see conformance/catalogue/data/capabilities.yaml)")
    abilities = sorted(n for n in out if n.startswith(ABILITY_PREFIX))
    if abilities:
        raise UsageError(f"{who}: {abilities[0]!r} is a target's ability; a case needs it by naming its fault kind (conformance/nemesis/kinds.py)")
    return out


def adapter_capabilities(adapter: Any) -> frozenset[str] | None:
    """What the adapter declares, validated; None for an adapter written before capabilities
    existed (the runner then falls back to the requirement's protocol list)."""
    caps = getattr(adapter, "capabilities", None)
    if caps is None:
        return None
    return check_names(caps, f"adapter {getattr(adapter, 'name', type(adapter).__name__)!r}")


def server_capabilities(adapter: Any, server: Any) -> frozenset[str] | None:
    """What the adapter offers against the run's server (``Adapter.server_capabilities``: its
    protocol's capabilities plus what depends on the server, such as an admin backend's), validated;
    None for an adapter that declares none."""
    ask = getattr(adapter, "server_capabilities", None)
    caps = ask(server) if callable(ask) else getattr(adapter, "capabilities", None)
    if caps is None:
        return None
    return check_names(caps, f"adapter {getattr(adapter, 'name', type(adapter).__name__)!r} on {getattr(server, 'product', 'its server')}")


def missing(needs: Iterable[str], offered: frozenset[str], lacked: Iterable[str] = ()) -> tuple[list[str], list[str]]:
    """(needed but not offered by the adapter, needed but lacked by the broker)."""
    needs = list(needs)
    lacked_set = set(lacked)
    return [n for n in needs if n not in offered], [n for n in needs if n in offered and n in lacked_set]


def applicability(req: Any, adapter: Any, profile: Any, offered: frozenset[str] | None = None) -> str | None:
    """Why ``req`` does not apply to this adapter and broker (a reason for an ``unsupported``
    record), or None when it applies. ``offered``: what the adapter offers against the run's server
    (:func:`server_capabilities`, the run keeps it); None: the adapter's declared capabilities.

    An adapter that declares no capabilities (written before they existed) keeps the old rule: the
    requirement's protocol list. A requirement of a pack whose cases speak a protocol's frames
    themselves (conformance.catalogue.packs ``PROTOCOLS``) applies to adapters of that protocol only."""
    wire = getattr(req, "wire_protocols", ())
    if wire and adapter.protocol not in wire:
        return (f"requirement does not apply to {adapter.protocol}: its cases (pack {req.pack}) speak "
                f"{', '.join(wire)} on the wire")
    if offered is None:
        offered = adapter_capabilities(adapter)
    if offered is None:
        if req.protocols and adapter.protocol not in req.protocols:
            return f"requirement does not apply to {adapter.protocol}"
        return None
    not_offered, lacked = missing(req.needs, offered, getattr(profile, "lacks", {}) or {})
    if not_offered:
        return (f"requirement does not apply to {adapter.protocol}: it needs {', '.join(not_offered)}, "
                f"which adapter {adapter.name} does not offer")
    if lacked:
        doc = profile.lacks[lacked[0]]
        return f"requirement needs {lacked[0]}, which {profile.id} lacks: {doc.reason} [{doc.source}]"
    return None
