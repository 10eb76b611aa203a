"""Checkers: reusable judgements over recorded deliveries (the Jepsen checker role).

Inputs are plain observation data (lists of delivery dicts from :func:`conformance.kit.case.delivery_obs`),
so every checker is unit-testable with synthetic histories.
"""

from __future__ import annotations

from typing import Any, Sequence

from conformance.kit.redelivery import (
    REQUEUE_RULE_AMQP10,
    SPEC_SIGNAL,
    describe,
    expectation,
    is_amqp10,
    wrong_on_first,
    wrong_on_redelivery,
    wrong_on_requeue,
)
from conformance.kit.verdicts import Verdict, first_failure, fmt, holds

Deliveries = Sequence[dict[str, Any]]


def ids_of(ds: Deliveries) -> list[str]:
    return [d["id"] for d in ds]


def returned_exactly(returned: Deliveries, expected_ids: Sequence[str], *, what: str) -> Verdict:
    """The set of messages that came back is exactly ``expected_ids``: none lost, none extra, no dupes."""
    got = ids_of(returned)
    missing = [m for m in expected_ids if m not in got]
    extra = [m for m in got if m not in expected_ids]
    dupes = sorted({m for m in got if got.count(m) > 1})
    problems = []
    if missing:
        problems.append(f"missing {fmt(missing)}")
    if extra:
        problems.append(f"unexpected {fmt(extra)}")
    if dupes:
        problems.append(f"duplicated {fmt(dupes)}")
    return holds(
        not problems,
        expected=f"{what}: exactly {fmt(list(expected_ids))} come back",
        observed=f"{what}: came back {fmt(got)}" + (f" ({'; '.join(problems)})" if problems else ""),
        key="returned=" + fmt(sorted(got)),
    )


def all_redelivered(returned: Deliveries, *, flag: bool = True, signal: str = SPEC_SIGNAL) -> Verdict:
    """Every delivery is marked as a redelivery (``flag``) or as a first delivery (``not flag``), by
    the rules of its protocol (:mod:`conformance.kit.redelivery`; AMQP 1.0 header fields as the spec and
    the profile's ``signal`` make them binding)."""
    judge = wrong_on_redelivery if flag else wrong_on_first
    wrong = [w for w in (judge(d, signal) for d in returned) if w is not None]
    amqp10 = any(is_amqp10(d) for d in returned)
    return holds(
        not wrong,
        expected=f"every returned delivery has redelivered={fmt(flag)}" + (f" ({expectation(not flag, signal, True)})" if amqp10 else ""),
        observed=("all " + f"redelivered={fmt(flag)}") if not wrong else "wrong flag on " + describe(wrong),
        key="redelivered-flag-wrong" if wrong else None,
        spec=all(w.spec for w in wrong),
    )


def all_requeued(returned: Deliveries, held: Deliveries) -> Verdict:
    """Every delivery that came back to the link or channel that returned it (``held``: their
    earlier deliveries there) is marked as its protocol requires after a requeue: 0-9-1
    redelivered=true; AMQP 1.0, where the return is a released outcome, the message unchanged
    (:func:`conformance.kit.redelivery.wrong_on_requeue`)."""
    before = {d["id"]: d for d in held}
    wrong = [w for w in (wrong_on_requeue(d, before.get(d["id"])) for d in returned) if w is not None]
    amqp10 = any(is_amqp10(d) for d in returned)
    return holds(
        not wrong,
        expected=f"every returned delivery is unchanged ({REQUEUE_RULE_AMQP10})" if amqp10 else "every returned delivery has redelivered=true",
        observed=("all unchanged" if amqp10 else "all redelivered=true") if not wrong else "wrong flag on " + describe(wrong),
        key="redelivered-flag-wrong" if wrong else None,
        spec=all(w.spec for w in wrong),
    )


def channel_closed_with(answer: dict[str, Any], code: int, *, what: str) -> Verdict:
    """The broker answered with a channel (not connection) exception carrying ``code``."""
    if not answer.get("closed"):
        observed = f"{what}: no channel exception (channel stayed open)"
        key = "no-error"
    else:
        scope = "connection" if answer.get("hard") else "channel"
        observed = f"{what}: {scope} closed with {answer['code']} {answer.get('text', '')}".rstrip()
        key = f"{scope}-{answer['code']}"
    ok = bool(answer.get("closed")) and not answer.get("hard") and answer.get("code") == code
    return holds(ok, expected=f"{what}: channel closed with {code}", observed=observed, key=key)


def accepted(answer: dict[str, Any], *, what: str) -> Verdict:
    """The broker took the operation without closing the channel or connection."""
    if not answer.get("closed"):
        return holds(True, expected=f"{what}: accepted", observed=f"{what}: accepted")
    scope = "connection" if answer.get("hard") else "channel"
    return holds(
        False,
        expected=f"{what}: accepted (channel stays open)",
        observed=f"{what}: {scope} closed with {answer['code']} {answer.get('text', '')}".rstrip(),
        key=f"{scope}-{answer['code']}",
    )


def held_ids(obs: dict[str, Any], *positions: int) -> list[str]:
    """Ids of the held deliveries at ``positions`` (0-based, in delivery order) of a settle_and_watch
    observation: how a verdict names what a settlement should have returned or removed."""
    return [obs["held"][i]["id"] for i in positions]


def settled_as_expected(obs: dict[str, Any], what: str, *, back: tuple[int, ...] = (), gone: tuple[int, ...] = ()) -> Verdict:
    """Judge :func:`conformance.kit.scenarios.settle_and_watch`: the settlement was accepted, exactly the
    held deliveries at positions ``back`` came back at once (redelivered), and after channel.close the
    queue holds exactly the held deliveries that were neither settled for good (``gone``) nor returned.
    The expectation is the verdict's (positions), never the scenario's."""
    expected_back = held_ids(obs, *back)
    settled = set(expected_back) | set(held_ids(obs, *gone))
    still_held = [d["id"] for d in obs["held"] if d["id"] not in settled]
    return first_failure(
        accepted(obs["channel"], what=what),
        returned_exactly(obs["back"], expected_back, what=f"redelivered at once after {what}"),
        all_requeued(obs["back"], obs["held"]),
        returned_exactly(obs["remaining"], still_held, what=f"left in the queue after {what} and channel.close"),
    )


def no_node_refused(a: dict[str, Any], what: str = "from") -> Verdict:
    """An attach from (a receiver's source) or to (a sender's target) an address with no node behind it,
    as the adapter reported the broker's answer: its attach naming no terminus, then at once a detach
    of the link carrying the error (transport 2.6.3, 2.6.5), unless the broker created the node."""
    attach, detach, error = a.get("attach", ""), a.get("detach"), a.get("error")
    terminus = "target" if attach in ("target", "no target") else "source"
    created = attach == terminus and detach is None  # the adapter detaches a link the broker took
    cond = (error or {}).get("condition")
    answered = attach in (terminus, f"no {terminus}")
    return first_failure(
        holds(answered, expected=f"the broker answers the attach {what} {a['address']} with its own attach",
              observed=attach, key=None if answered else "attach-" + attach.split(" ")[0]),
        # 2.6.3 MAY: a broker that creates the node attaches it like any other (nothing more to judge).
        holds(created or detach == "detached", expected="an attach with no terminus, then at once a detach of the link (2.6.3)",
              observed=f"attach with {attach}, then {detach or 'the link stayed attached'}",
              key=None if created or detach == "detached" else "no-detach" if (detach or "").startswith("no detach") else "session-ended"),
        holds(created or cond is not None, expected="the detach carries the error in its error field (2.6.5)",
              observed=f"detach {'with error ' + str(cond) if cond else 'without an error'}", key=None if created or cond else "detach-without-error"),
    )
