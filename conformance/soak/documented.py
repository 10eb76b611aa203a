"""What the target's profile documents about a soak: faults whose documented effect leaves the soak
nothing to judge (refused before it runs), and anomalies a documented behaviour across a broker
fault explains (a deviation, or a fail naming its open upstream bug).

A soak judges the same promises as the catalogue's cases, over a longer and randomized history. So
where a case's requirement has a profile entry (``deviations`` or ``known_bugs``, with its
``when_target`` facts of the run's target), the soak reads the same entry, by the requirement and the
observation key that case records: never by the broker's name.

- Premises (:func:`refusal`): the soak keeps one durable queue through every fault. A restart or kill
  whose profile entry says the durable queue is gone after it (qpidd without a store module: the
  target's ``no-store``, PERSIST-DECLARED-QUEUE-SURVIVES-KILL ``queue-gone-after-restart``) would leave
  a soak that only records refusals after its first fault: the kind is refused in one line citing
  the entry, as a catalogue case that cannot pose its scenario is not run.
- Anomalies across a fault (:func:`annotate`): an anomaly whose operations span a restart or kill
  (a fault's invoke to its heal lies between its first and last op) and whose checker kind the
  catalogue observes across the same fault (:data:`ACROSS_FAULT`) takes the profile's entry for that
  requirement: a deviation entry makes it documented; a known bug keeps it a fail naming the bug.
  A checker whose every anomaly is a documented deviation has the verdict deviation; any other
  anomaly keeps it a fail. The counts are kept either way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: Fault kinds that take the broker down (the others leave its state alone).
BROKER_DOWN = ("restart", "kill")

#: What the soak needs to survive each broker fault: the requirement whose case observes it and the
#: observation key that case records when the durable queue is gone after the fault.
PREMISES: dict[str, tuple[str, str]] = {
    "restart": ("PERSIST-CONFIRMED-SURVIVES", "queue-gone-after-restart"),
    "kill": ("PERSIST-DECLARED-QUEUE-SURVIVES-KILL", "queue-gone-after-restart"),
}

#: (checker, anomaly kind) -> (requirement, observation key) of the catalogue case that observes the
#: same behaviour across a restart or kill.
ACROSS_FAULT: dict[tuple[str, str], tuple[str, str]] = {
    # a message delivered before the fault comes back after it with redelivered=false
    ("redelivery", "redelivered-flag-missing"): ("PERSIST-REQUEUED-REDELIVERED", "redelivered-cleared-by-restart"),
}


@dataclass(frozen=True)
class Entry:
    """One profile entry as the soak cites it."""

    as_: str            # "deviation" or "known-bug"
    requirement: str
    observed: str
    reason: str
    source: str
    when_target: tuple[str, ...] = ()

    def cite(self) -> str:
        cond = f", when_target {', '.join(self.when_target)}" if self.when_target else ""
        return f"{self.as_} {self.requirement} ({self.observed}{cond}): {_one_line(self.reason)} [{_first_url(self.source)}]"

    def to_dict(self) -> dict[str, Any]:
        return {"as": self.as_, "requirement": self.requirement, "observed": self.observed, "reason": _one_line(self.reason),
                "source": _one_line(self.source), "when_target": list(self.when_target)}


def lookup(profile: Any, requirement: str, queue_type: str | None, observed: str) -> Entry | None:
    """The profile's deviation or known bug for ``requirement`` with ``observed`` on this target, if any."""
    if profile is None:
        return None
    for as_, find in (("deviation", profile.deviation), ("known-bug", profile.known_bug)):
        d = find(requirement, queue_type, observed)
        if d is not None:
            return Entry(as_, requirement, observed, str(getattr(d, "reason", "")), str(getattr(d, "source", "")),
                         tuple(getattr(d, "when_target", None) or ()))
    return None


def refusal(kinds: list[str] | tuple[str, ...], profile: Any, queue_type: str | None, target_name: str,
            notes: dict[str, str] | None = None) -> str | None:
    """Why the soak cannot take one of ``kinds`` on this target (one line citing the profile entry),
    or None. ``notes``: what the target says about each kind of fault (the fault kind's note)."""
    for k in kinds:
        note = (notes or {}).get(k, "")
        premise = PREMISES.get(k)
        if premise is None:
            continue
        entry = lookup(profile, premise[0], queue_type, premise[1])
        if entry is not None and entry.as_ == "deviation":
            return (f"--nemesis {k}: the soak's durable queue would be gone after the first {k} on {target_name}"
                    + (f" ({note})" if note else "") + f"; the profile {getattr(profile, 'id', '?')} documents it: {entry.cite()}. "
                    f"Nothing after it could be judged; soak this target with cut and pause, or a build with a store")
    return None


def fault_windows(ops: list[dict[str, Any]]) -> list[tuple[int, int, str]]:
    """(fault invoke index, heal ok index, kind) of each restart or kill in the history."""
    out: list[tuple[int, int, str]] = []
    started: dict[str, int] = {}
    for op in ops:
        if op["process"] != "nemesis" or op["value"].get("kind") not in BROKER_DOWN:
            continue
        k = op["value"]["kind"]
        if op["f"] == "fault" and op["type"] == "invoke":
            started[k] = op["index"]
        elif op["f"] == "heal" and op["type"] == "ok" and k in started:
            out.append((started.pop(k), op["index"], k))
    return out


def across(anomaly_ops: list[int], windows: list[tuple[int, int, str]]) -> str | None:
    """The kind of the first restart or kill the anomaly's operations span, or None."""
    if not anomaly_ops:
        return None
    lo, hi = min(anomaly_ops), max(anomaly_ops)
    for start, end, k in windows:
        if lo < end and start < hi:
            return k
    return None


def annotate(results: dict[str, Any], ops: list[dict[str, Any]], profile: Any, queue_type: str | None) -> dict[str, dict[str, Any]]:
    """For each checker with anomalies: how many the profile documents (by entry) and how many it does
    not, and the verdict that follows (deviation when every anomaly is a documented deviation).
    Each documented anomaly gets ``documented`` (the entry) in place; the listed anomalies are judged,
    and a checker whose count exceeds its list keeps the fail (the unlisted ones are not judged)."""
    windows = fault_windows(ops)
    out: dict[str, dict[str, Any]] = {}
    for name, r in results.items():
        if not r.anomalies:
            continue
        by_entry: dict[str, dict[str, Any]] = {}
        undocumented = 0
        for a in r.anomalies:
            key = ACROSS_FAULT.get((name, a.kind))
            k = across(a.ops, windows) if key else None
            entry = lookup(profile, key[0], queue_type, key[1]) if key and k else None
            if entry is None:
                undocumented += 1
                continue
            a.documented = entry.to_dict()
            slot = by_entry.setdefault(entry.cite(), {**entry.to_dict(), "anomalies": 0, "across": {}})
            slot["anomalies"] += 1
            slot["across"][k] = slot["across"].get(k, 0) + 1
        total = r.counts.get("anomalies", len(r.anomalies))
        undocumented += total - len(r.anomalies)
        entries = list(by_entry.values())
        all_deviations = bool(entries) and not undocumented and all(e["as"] == "deviation" for e in entries)
        out[name] = {"verdict": "deviation" if all_deviations else r.verdict, "undocumented": undocumented, "entries": entries}
    return out


def _one_line(text: str) -> str:
    return " ".join(str(text or "").split())


def _first_url(source: str) -> str:
    for word in str(source).split():
        if word.startswith("http"):
            return word.rstrip(").,;\"'")
    return _one_line(source)[:120]
