"""A quorum queue losing a node: confirmed messages, unacked deliveries, a commit in flight.

Each scenario picks the victim from where the broker says the queue lives (leader or a follower),
connects the client under test through the victim's node, kills that node (kill -9) at a moment
proved by evidence (confirms counted, deliveries held, a commit-ok withheld by the proxy), observes
through a surviving node, and restarts the victim before it returns. The history names both nodes.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from typing import Any

from conformance.api import AckMode, Session
from conformance.cases.failover import NodeLossCase
from conformance.catalogue.profiles import Profile
from conformance.errors import ConnectionLost, OperationTimeout
from conformance.kit.case import WAIT_S, CaseContext, Obs, ScenarioVoid, delivery_obs
from conformance.kit.verdicts import Verdict, first_failure, fmt, holds
from conformance.nemesis.cluster import Nodes, until_accepted
from conformance.nemesis.faults import Action
from conformance.nemesis.points import fault_at

#: Confirmed publishes before the kill (the evidence the stream is flowing) and after the failover.
BEFORE_KILL, AFTER_FAILOVER = 20, 20
#: Bound on publishes (a node that never dies would otherwise let the publisher run on).
MAX_PUBLISHES = 5000
#: A quorum queue elects a new leader within seconds; a busy machine gets a generous window.
RECOVERY_S = 45.0
HELD = 5


def pick(nodes: Nodes, queue: str, role: str) -> tuple[str, str, dict[str, Any]]:
    """(victim, observer): the queue's leader or a follower as victim, and another member to observe through."""
    info = nodes.replicas(queue)
    leader = info.get("leader")
    members = info.get("members") or nodes.names
    if not leader:
        raise ScenarioVoid(f"{queue}: the broker names no leader ({info})")
    victim = leader if role == "leader" else next(m for m in members if m != leader)
    observer = next(n for n in members if n not in (victim, leader)) if role == "leader" else leader
    return victim, observer, info


class TestConfirmedSurviveNodeLoss(NodeLossCase):
    """A confirming publisher streams through the victim's node; the node dies mid-stream; the
    publisher fails over and resends what was in flight; everything confirmed must be there."""

    requirement = "FAILOVER-QQ-CONFIRMED-SURVIVES"
    queue_types = ("quorum",)
    variants = ("leader", "follower")

    def on_nodes(self, ctx: CaseContext, nodes: Nodes) -> Obs:
        q = ctx.queue()
        victim, observer, info = pick(nodes, q, ctx.variant or "leader")
        failover_to = next(n for n in nodes.others(victim) if n != observer) if len(nodes.names) > 2 else observer
        confirmed: list[str] = []
        in_doubt: list[str] = []
        published: list[str] = []
        enough = threading.Event()
        errors: list[BaseException] = []

        def confirming(node: str) -> Session:
            session = nodes.connect("publisher", node, op_timeout=RECOVERY_S).session()
            session.enable_confirms()
            return session

        def publish() -> None:
            node = victim
            session = confirming(node)
            after = 0
            failed_over = False
            for i in range(1, MAX_PUBLISHES + 1):
                mid = f"m{i}"
                published.append(mid)
                while True:
                    try:
                        session, refused = until_accepted(lambda s: s.publish(q, mid.encode(), message_id=mid, persistent=True),
                                                          session, lambda: confirming(node), time.monotonic() + RECOVERY_S)
                        if refused:
                            ctx.history.add("publisher", "refused", f"{mid} nacked {refused} time(s) before it was confirmed")
                        break
                    except (ConnectionLost, OperationTimeout):
                        if failed_over:
                            raise
                        in_doubt.append(mid)  # sent, never confirmed: resent through another node
                        failed_over = True
                        node = failover_to
                        session = confirming(node)
                confirmed.append(mid)
                if len(confirmed) >= BEFORE_KILL:
                    enough.set()
                if failed_over:
                    after += 1
                    if after >= AFTER_FAILOVER:
                        return

        def run() -> None:
            try:
                publish()
            except BaseException as exc:  # noqa: BLE001 - re-raised in the case's thread
                errors.append(exc)
            finally:
                enough.set()

        t = threading.Thread(target=run, name="failover-publisher", daemon=True)
        t.start()
        if not enough.wait(WAIT_S * 3):
            raise ScenarioVoid(f"publisher did not get {BEFORE_KILL} confirms through {victim}")
        nodes.kill(victim, back_at_once=True)
        t.join(RECOVERY_S * 2)
        if t.is_alive():
            raise OperationTimeout(f"publisher did not finish within {RECOVERY_S * 2:.0f}s after the kill of {victim}")
        if errors:
            raise errors[0]
        if not in_doubt:
            raise ScenarioVoid(f"the publisher never noticed the kill of {victim} (it published {len(published)} messages)")
        drained = nodes.drain(q, observer, RECOVERY_S)
        return {"victim": victim, "role": ctx.variant, "observer": observer, "failover_to": failover_to,
                "replicas_before": info, "published": published, "confirmed": confirmed, "in_doubt": in_doubt,
                "drained": [d.message_id for d in drained]}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        return judge_confirmed(obs)


def judge_confirmed(obs: Obs) -> Verdict:
    """No confirmed message lost; a duplicate only of a publish in doubt; nothing never published."""
    counts = Counter(obs["drained"])
    lost = [m for m in obs["confirmed"] if m not in counts]
    dupes = sorted((m for m, n in counts.items() if n > 1), key=_num)
    unexplained = [m for m in dupes if m not in obs["in_doubt"]]
    foreign = sorted(m for m in counts if m not in obs["published"])
    where = f"{obs['role']} {obs['victim']} killed, drained through {obs['observer']}"
    return first_failure(
        holds(not lost, expected=f"every confirmed message survives ({where})",
              observed=f"lost {len(lost)} confirmed: {fmt(lost[:20])}" if lost else f"all {len(obs['confirmed'])} confirmed present",
              key="confirmed-lost" if lost else None),
        holds(not unexplained, expected="a duplicate only of a publish in flight when the node died",
              observed=f"duplicates of confirmed publishes {fmt(unexplained)}" if unexplained else f"duplicates {fmt(dupes)} (in doubt: {fmt(obs['in_doubt'])})",
              key="unexplained-duplicates" if unexplained else None),
        holds(not foreign, expected="only published messages", observed=f"unknown ids {fmt(foreign)}" if foreign else "no unknown ids"),
    )


def _num(mid: str) -> int:
    digits = "".join(c for c in mid if c.isdigit())
    return int(digits) if digits else 0


class TestUnackedRedeliveredElsewhere(NodeLossCase):
    """A consumer holds deliveries unacknowledged through the victim's node; the node dies; the
    deliveries must come back through a surviving node, flagged redelivered."""

    requirement = "FAILOVER-UNACKED-REDELIVERED"
    queue_types = ("quorum",)
    variants = ("leader", "follower")

    def on_nodes(self, ctx: CaseContext, nodes: Nodes) -> Obs:
        q = ctx.queue()
        ids = ctx.publish(q, HELD, persistent=True)
        victim, observer, info = pick(nodes, q, ctx.variant or "leader")
        session = nodes.session("consumer", victim)
        consumer = session.consume(q, ack_mode=AckMode.MANUAL, prefetch=HELD)
        held = ctx.take(consumer, HELD, expected=ids)
        nodes.kill(victim, back_at_once=True)
        nodes.await_ready(q, observer, len(held), RECOVERY_S)
        back = nodes.drain(q, observer, RECOVERY_S)
        return {"victim": victim, "role": ctx.variant, "observer": observer, "replicas_before": info, "published": ids,
                "held": [delivery_obs(d) for d in held], "after": [delivery_obs(d) for d in back]}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        return judge_redelivered(obs)


def judge_redelivered(obs: Obs) -> Verdict:
    held = [d["id"] for d in obs["held"]]
    after = {d["id"]: d for d in obs["after"]}
    missing = [m for m in held if m not in after]
    unflagged = [m for m in held if m in after and not after[m]["redelivered"]]
    where = f"consumer's node ({obs['role']}) {obs['victim']} killed, observed through {obs['observer']}"
    return first_failure(
        holds(bool(held), expected="the consumer held deliveries when its node died", observed=f"held {fmt(held)}"),
        holds(not missing, expected=f"every unacknowledged delivery comes back ({where})",
              observed=f"missing {fmt(missing)}" if missing else f"all {len(held)} back", key="lost" if missing else None),
        holds(not unflagged, expected="each comes back with redelivered=true",
              observed=f"redelivered=false on {fmt(unflagged)}" if unflagged else "all redelivered=true",
              key="redelivered-false" if unflagged else None),
    )


class TestCommitInFlightLeaderDies(NodeLossCase):
    """A transacted publisher on the leader's node commits; the proxy withholds the broker's
    commit-ok (the client has no answer: the commit is in flight for it) and the leader's node is
    killed. Draining through a surviving node must show all of the transaction or none of it."""

    requirement = "FAILOVER-TX-COMMIT-IN-FLIGHT"
    queue_types = ("quorum",)
    N = 5

    def on_nodes(self, ctx: CaseContext, nodes: Nodes) -> Obs:
        q = ctx.queue()
        control = ctx.publish(q, 1, prefix="control-", persistent=True)
        victim, observer, info = pick(nodes, q, "leader")
        proxy = nodes.proxy(victim)
        withheld = proxy.arm(fault_at(proxy.protocol, "commit-answer", action=Action.STALL))
        session = ctx.connect("tx-publisher", url=nodes.urls[victim], via=proxy, op_timeout=RECOVERY_S).session()
        ctx.history.add("tx-publisher", "node", f"connected through {victim} via the proxy")
        session.select_tx()
        tag = uuid.uuid4().hex[:4]
        ids = [f"tx{tag}-{i}" for i in range(1, self.N + 1)]
        for mid in ids:
            session.publish(q, mid.encode(), message_id=mid, persistent=True)
        answer: list[str] = []

        def commit() -> None:
            try:
                session.commit()
                answer.append("commit-ok")
            except (ConnectionLost, OperationTimeout) as exc:
                answer.append(f"no answer: {type(exc).__name__}")

        t = threading.Thread(target=commit, name="tx-commit", daemon=True)
        t.start()
        hit = ctx.expect_fired(withheld)  # the broker answered the commit; the client has not seen it
        nodes.kill(victim, back_at_once=True)
        t.join(RECOVERY_S + 5)
        drained = nodes.drain(q, observer, RECOVERY_S)
        return {"victim": victim, "observer": observer, "replicas_before": info, "fault": hit, "tx": ids, "control": control,
                "client_answer": answer[0] if answer else "still waiting", "drained": [d.message_id for d in drained]}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        return judge_tx_in_flight(obs)


def judge_tx_in_flight(obs: Obs) -> Verdict:
    got = Counter(obs["drained"])
    of_tx = [m for m in obs["tx"] if got[m]]
    twice = sorted(m for m in obs["tx"] if got[m] > 1)
    missing_control = [m for m in obs["control"] if not got[m]]
    n = len(obs["tx"])
    outcome = "all" if len(of_tx) == n else "none" if not of_tx else f"{len(of_tx)} of {n}"
    answered = obs["client_answer"] == "commit-ok"
    where = f"leader {obs['victim']} killed with the commit in flight, drained through {obs['observer']}"
    return first_failure(
        holds(not missing_control, expected="the confirmed control message survives",
              observed=f"control missing {fmt(missing_control)}" if missing_control else "control present"),
        holds(outcome in ("all", "none"), expected=f"the transaction takes effect all or nothing ({where})",
              observed=f"{outcome} of the transaction delivered: {fmt(of_tx)}", key="partial" if outcome not in ("all", "none") else None),
        holds(not twice, expected="each message of the transaction at most once", observed=f"twice: {fmt(twice)}" if twice else "no duplicates"),
        holds(outcome == "all" or not answered, expected="a commit the client saw answered takes effect in full",
              observed=f"client got {obs['client_answer']}; outcome {outcome}"),
    )
