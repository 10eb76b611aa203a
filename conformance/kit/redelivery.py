"""What marks a delivery as a redelivery, and which marks the specifications make normative.

AMQP 0-9-1 has one flag: basic.deliver ``redelivered`` ("has been previously delivered to this or
another client"), so a first delivery must carry false and a redelivery true.

AMQP 1.0 has two header fields (messaging 3.2.1), and the spec binds them unequally:

* ``delivery-count``: "The number of unsuccessful previous attempts to deliver this message ... On
  first delivery, the value is zero." A first delivery with delivery-count >= 1 is wrong. Whether a
  return after a consumer's disconnect increments it depends on the outcome the source applies (its
  default-outcome, 3.5.3), so a redelivery with delivery-count 0 is not wrong by the spec alone.
* ``first-acquirer``: "If this value is true, then this message has not been acquired by any other
  link. If this value is false, then the message MAY have previously been acquired by another link
  or links." It defaults to false, so a broker that sends no header at all says false on every
  delivery, which the spec permits. Only a true first-acquirer on a message another link acquired is
  wrong.

A message returned to the very link that held it (a nack or reject with requeue, which the AMQP 1.0
adapter sends as the released outcome) is another matter: released leaves it "unchanged at the node"
(3.4.4: its delivery-count MUST NOT be incremented), and no other link acquired it, so neither field
need mark it as a redelivery: its delivery-count must be what it was, and first-acquirer may be either
(:func:`wrong_on_requeue`).

A profile's ``redelivery.signal`` (redelivered | first-acquirer | delivery-count) says which mark a
broker documents that it sets; only then does the absence of that mark fail (a vendor verdict, not a
spec one). Without a profile entry a broker is judged by the spec rules above.

Observations are plain delivery dicts (:func:`conformance.kit.case.delivery_obs`); an AMQP 1.0 delivery
is recognised by its ``first_acquirer`` key, which only the AMQP 1.0 adapter records.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from conformance.catalogue.profiles import Profile
from conformance.kit.verdicts import fmt

#: The signal used when the profile documents none: the spec's own rules.
SPEC_SIGNAL = "redelivered"
SIGNALS = ("redelivered", "first-acquirer", "delivery-count")
#: The AMQP 1.0 rule of :func:`wrong_on_requeue`, in words, for the Expected line.
REQUEUE_RULE_AMQP10 = "delivery-count as before, AMQP 1.0 3.4.4 released; first-acquirer not judged: no other link acquired it"


@dataclass(frozen=True)
class WrongMark:
    """One delivery whose redelivery marks contradict what it is (a first delivery or a redelivery)."""

    delivery: str
    why: str
    #: True when the specification itself is violated; False when only the profile's documented signal is.
    spec: bool


def signal_of(profile: Profile, queue_type: str | None) -> str:
    entry = profile.entry("redelivery.signal", queue_type)
    return str(entry.value) if entry is not None else SPEC_SIGNAL


def is_amqp10(d: dict[str, Any]) -> bool:
    return "first_acquirer" in d


def marks(d: dict[str, Any]) -> str:
    """A delivery's id and every redelivery mark it carried, for expected/observed texts."""
    if not is_amqp10(d):
        return f"{d['id']}(redelivered={fmt(d['redelivered'])})"
    return f"{d['id']}(first-acquirer={fmt(d['first_acquirer'])}, delivery-count={fmt(d.get('delivery_count'))})"


def _count(d: dict[str, Any]) -> int:
    return int(d.get("delivery_count") or 0)


def wrong_on_first(d: dict[str, Any], signal: str = SPEC_SIGNAL) -> WrongMark | None:
    """Why a first delivery's marks say "delivered before", or None when they are allowed."""
    if not is_amqp10(d):
        return WrongMark(marks(d), "redelivered=true", True) if d["redelivered"] else None
    if _count(d) >= 1:
        return WrongMark(marks(d), f"delivery-count={_count(d)} (AMQP 1.0 3.2.1: zero on first delivery)", True)
    if signal == "first-acquirer" and d["first_acquirer"] is False:
        return WrongMark(marks(d), "first-acquirer=false, though the profile documents that the broker sets it", False)
    return None


def wrong_on_redelivery(d: dict[str, Any], signal: str = SPEC_SIGNAL) -> WrongMark | None:
    """Why a redelivery (a message another link or channel acquired before) is not marked as one."""
    if not is_amqp10(d):
        return None if d["redelivered"] else WrongMark(marks(d), "redelivered=false", True)
    if d["first_acquirer"] is True:
        return WrongMark(marks(d), "first-acquirer=true, though another link acquired the message (AMQP 1.0 3.2.1)", True)
    if signal == "delivery-count" and _count(d) < 1:
        return WrongMark(marks(d), "delivery-count 0, though the profile documents that the broker counts returns", False)
    return None


def wrong_on_requeue(d: dict[str, Any], before: dict[str, Any] | None) -> WrongMark | None:
    """Why a delivery that came back to the very link or channel that returned it (a nack or reject
    with requeue, ``before`` its earlier delivery there) is wrongly marked.

    AMQP 0-9-1: redelivered=true ("previously delivered to this or another client"). AMQP 1.0: the
    adapter returns it with the released outcome, and "The message is unchanged at the node (i.e.,
    the delivery-count of the header of the released message MUST NOT be incremented)" (3.4.4);
    a true first-acquirer is allowed by 3.2.1, since no other link acquired it."""
    if not is_amqp10(d):
        return wrong_on_redelivery(d)
    was = _count(before) if before is not None else 0
    if _count(d) != was:
        return WrongMark(marks(d), f"delivery-count {was} -> {_count(d)} after released (AMQP 1.0 3.4.4: MUST NOT be incremented)", True)
    return None


def describe(wrong: list[WrongMark]) -> str:
    return ", ".join(f"{w.delivery}: {w.why}" for w in wrong)


def expectation(first: bool, signal: str, amqp10: bool) -> str:
    """The rule applied, in words, for the Expected line."""
    if not amqp10:
        return "redelivered=false on a first delivery" if first else "redelivered=true on a redelivery"
    if first:
        rule = "delivery-count 0 on a first delivery"
        return rule + (" and first-acquirer=true (profile)" if signal == "first-acquirer" else " (first-acquirer=false is allowed)")
    rule = "first-acquirer not true on a redelivery"
    return rule + (" and delivery-count >= 1 (profile)" if signal == "delivery-count" else "")
