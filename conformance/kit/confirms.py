"""Judging what a publisher was told: publisher confirms and returns, as plain data.

A confirm names a sequence number (the delivery tag of basic.ack or basic.nack); with
``multiple=true`` it covers every sequence number up to it that is still unconfirmed (AMQP 0-9-1
basic.ack multiple: "up to and including", over what is outstanding). So a multiple confirm whose
range passes over a number confirmed earlier does not confirm it again; a confirm that *names* a
number already confirmed, or one never published, does. Pure functions: observations in, a ledger
or a Verdict out, so each path is tested on synthetic events.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from conformance.kit.verdicts import fmt

CONFIRMS = ("ack", "nack")


def event_obs(e: Any) -> dict[str, Any]:
    """One conformance.api.PublisherEvent as the plain data a verdict judges."""
    if e.kind in CONFIRMS:  # an AMQP 1.0 confirm names its transfer's message too (and the outcome)
        return {"kind": e.kind, "tag": e.tag, "multiple": e.multiple, **({"id": e.message_id, "outcome": e.text} if e.message_id else {})}
    if e.kind == "return":
        return {"kind": "return", "code": e.code, "id": e.message_id}
    if e.kind == "unsettled-outcome":  # AMQP 1.0: an outcome the broker stated without settling the transfer
        return {"kind": e.kind, "tag": e.tag, "text": e.text}
    return {"kind": e.kind}


def brief(e: dict[str, Any]) -> str:
    if e["kind"] in CONFIRMS:
        return f"{e['kind']}({e['tag']}{', multiple' if e.get('multiple') else ''})"
    if e["kind"] == "return":
        return f"return({e.get('id')}, {e.get('code')})"
    if e["kind"] == "closed":
        return f"closed({e.get('code')} {e.get('text')})"
    if e["kind"] == "unsettled-outcome":
        return f"{e.get('text')}({e.get('tag')})"
    return str(e["kind"])


def sequence(events: list[dict[str, Any]], limit: int = 12) -> str:
    """The events as the client saw them, shortened in the middle when long."""
    shown = [brief(e) for e in events]
    if len(shown) > limit:
        shown = shown[: limit // 2] + [f"... {len(shown) - limit} more ..."] + shown[-limit // 2:]
    return "[" + ", ".join(shown) + "]"


@dataclass
class Ledger:
    """Each sequence number's outcome, and every way the confirms broke "exactly once"."""

    published: int
    outcome: dict[int, str] = field(default_factory=dict)
    #: confirms naming a sequence number already confirmed: (tag, first outcome, this one)
    again: list[tuple[int, str, str]] = field(default_factory=list)
    #: confirms naming 0 or a number past the last publish
    unknown: list[str] = field(default_factory=list)

    @property
    def missing(self) -> list[int]:
        return [t for t in range(1, self.published + 1) if t not in self.outcome]

    def tags(self, kind: str) -> list[int]:
        return sorted(t for t, k in self.outcome.items() if k == kind)

    @property
    def contradicted(self) -> list[int]:
        return sorted({t for t, first, then in self.again if first != then})

    def problems(self) -> list[str]:
        """What breaks "every publish confirmed exactly once", in the client's words."""
        out = []
        if self.missing:
            out.append(f"no confirm for sequence number(s) {_ranges(self.missing)}")
        both = self.contradicted
        if both:
            out.append(f"both acked and nacked: {_ranges(both)}")
        twice = sorted({t for t, first, then in self.again if first == then})
        if twice:
            out.append(f"confirmed twice: {_ranges(twice)}")
        if self.unknown:
            out.append(f"confirm(s) for a sequence number never published: {fmt(self.unknown)}")
        return out


def ledger(events: list[dict[str, Any]], published: int) -> Ledger:
    """Replay a session's ``events`` over its sequence numbers 1..``published``."""
    led = Ledger(published)
    for e in events:
        if e["kind"] not in CONFIRMS:
            continue
        tag, kind = int(e["tag"]), e["kind"]
        if tag < 1 or tag > published:
            led.unknown.append(brief(e))
            continue
        if tag in led.outcome:
            led.again.append((tag, led.outcome[tag], kind))
            continue
        led.outcome[tag] = kind
        if e.get("multiple"):
            for t in range(1, tag):
                led.outcome.setdefault(t, kind)
    return led


def _ranges(tags: list[int]) -> str:
    """[1, 2, 3, 7] -> "1-3, 7"."""
    out: list[str] = []
    start = prev = None
    for t in sorted(tags):
        if start is None:
            start = prev = t
        elif t == prev + 1:
            prev = t
        else:
            out.append(f"{start}-{prev}" if start != prev else str(start))
            start = prev = t
    if start is not None:
        out.append(f"{start}-{prev}" if start != prev else str(start))
    return ", ".join(out)
