"""Fault points: a case names the protocol moment it breaks a connection at, each protocol its frame.

The points and what they mean are data (``fault_points.yaml`` beside this module); each protocol's
codec names its own map (the codec class's ``fault_points``: a YAML file of ``point: {frame, sender}``
or ``point: {cannot: why}``). :func:`fault_at` turns a point into the :class:`Fault` the proxy arms
for the protocol the case's client speaks, or raises ``Unsupported`` (cannot-express) with the
protocol's own reason: the scenario is not the broker's to fail.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from conformance.errors import AdapterError, Unsupported
from conformance.nemesis.faults import Action, Fault, Moment, Sender
from conformance.nemesis.wire import WIRE_GROUP

SCHEMA = "conformance.fault-points/1"
POINTS_FILE = Path(__file__).with_name("fault_points.yaml")


@dataclass(frozen=True)
class Point:
    name: str
    frame: str | None
    sender: Sender | None
    #: Why the protocol has no frame for the point (the point cannot be expressed), else None.
    cannot: str | None = None


def _load(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text())
    if not isinstance(data, dict) or data.get("schema") != SCHEMA or not isinstance(data.get("points"), dict):
        raise AdapterError(f"{path}: expected schema: {SCHEMA} with a points: mapping")
    return data


@functools.cache
def meanings() -> dict[str, str]:
    """Every fault point and what it means, protocol-neutral."""
    return {str(k): str(v) for k, v in _load(POINTS_FILE)["points"].items()}


@functools.cache
def points(protocol: str) -> dict[str, Point]:
    """The protocol's frame of each fault point (from its codec's ``fault_points`` file)."""
    from conformance.plugins import load_group

    for codec in load_group(WIRE_GROUP).values():
        if getattr(codec, "protocol", None) != protocol:
            continue
        path = getattr(codec, "fault_points", None)
        if path is None:
            return {}
        data = _load(Path(path))
        out = {}
        for name, spec in data["points"].items():
            if name not in meanings():
                raise AdapterError(f"{path}: {name!r} is not a fault point of {POINTS_FILE.name}")
            if "cannot" in spec:
                out[name] = Point(name, None, None, " ".join(str(spec["cannot"]).split()))
            else:
                out[name] = Point(name, str(spec["frame"]), Sender(spec["sender"]))
        return out
    return {}


def frame_size_query(protocol: str | None, size: int) -> dict[str, str]:
    """The URL query that makes a client of ``protocol`` take frames of at most ``size`` bytes from
    the broker (the codec file's ``frame-size-option``), so a case knows how many frames a large
    delivery spans; empty where the protocol's client already agrees that size (0-9-1's pika offers
    frame-max 131072) or names no option."""
    if not protocol:
        return {}
    from conformance.plugins import load_group

    for codec in load_group(WIRE_GROUP).values():
        if getattr(codec, "protocol", None) == protocol and getattr(codec, "fault_points", None) is not None:
            option = _load(Path(codec.fault_points)).get("frame-size-option")
            return {str(option): str(size)} if option else {}
    return {}


def fault_at(protocol: str | None, point: str, *, action: Action = Action.CUT, nth: int = 1,
             moment: Moment = Moment.BEFORE, **kw: Any) -> Fault:
    """The fault acting at ``point`` (the ``nth`` such frame) over ``protocol``; Unsupported
    (cannot-express) when the protocol has no frame for it, in the protocol's words."""
    if point not in meanings():
        raise AdapterError(f"unknown fault point {point!r} (known: {', '.join(sorted(meanings()))})")
    mapped = points(protocol).get(point) if protocol else None
    if mapped is None:
        raise Unsupported(f"{protocol or 'the client protocol'} maps no frame to the fault point {point!r} ({meanings()[point]})")
    if mapped.cannot is not None:
        raise Unsupported(f"the case cuts at {point!r} ({meanings()[point]}), which {protocol} cannot express: {mapped.cannot}")
    assert mapped.frame is not None and mapped.sender is not None
    return Fault(action, mapped.frame, mapped.sender, nth, moment, **kw)
