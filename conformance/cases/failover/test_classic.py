"""A durable classic queue losing its home node, without and with a mirroring policy.

Judged against the requirement's reference (FAILOVER-CLASSIC-NODE-LOSS, key failover.classic-node-loss):
RabbitMQ 3.10 keeps a non-mirrored queue's messages on its node's disk, so the queue is refused
through other nodes until that node is back (unavailable, not lost); with an ``ha-mode`` policy a
synchronised mirror is promoted and serves the confirmed messages at once. A broker that replicates
every queue serves it at once either way. Another fate a profile documents is a deviation.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Mapping

from conformance.api import AckMode, Consumer, Session
from conformance.cases.failover.test_quorum import HELD, RECOVERY_S
from conformance.catalogue.profiles import Profile
from conformance.errors import ChannelClosed, OperationTimeout, TargetError
from conformance.kit.case import Case, CaseContext, Obs, ScenarioVoid
from conformance.kit.reference import judge
from conformance.kit.verdicts import Verdict, first_failure, fmt, holds
from conformance.nemesis.cluster import Nodes
from conformance.nemesis.kinds import NODE_KILL

ENTRY = "failover.classic-node-loss"
#: Bound on a new mirror's synchronisation (an empty queue's mirrors are in sync at once).
SYNC_S = 30.0


class TestClassicQueueHomeNodeLoss(Case):
    requirement = "FAILOVER-CLASSIC-NODE-LOSS"
    queue_types = ("classic",)
    variants = ("unmirrored", "mirrored")
    disrupts_broker = True
    faults = (NODE_KILL,)

    def scenario(self, ctx: CaseContext) -> Obs:
        nodes = Nodes(ctx)
        policy = f"conformance-ha-{uuid.uuid4().hex[:6]}" if ctx.variant == "mirrored" else None
        name = ctx.queue_name()
        try:
            if policy:
                nodes.ops.set_policy(policy, f"^{name.replace('.', '[.]')}$", {"ha-mode": "all", "ha-sync-mode": "automatic"})
                ctx.history.add("suite", "policy", f"{policy}: ha-mode all, ha-sync-mode automatic on {name}")
            try:
                return self._run(ctx, nodes, name, mirrored=bool(policy))
            finally:
                nodes.heal()
        finally:
            if policy:
                nodes.ops.clear_policy(policy)

    def _run(self, ctx: CaseContext, nodes: Nodes, name: str, *, mirrored: bool) -> Obs:
        q = ctx.queue(name=name)
        info = nodes.replicas(q)
        home = info.get("home")
        if not home:
            raise ScenarioVoid(f"{q}: the broker names no home node ({info})")
        if mirrored:
            info = self._await_mirrors(ctx, nodes, q, home)
        ids = ctx.publish(q, HELD, persistent=True)
        observer = nodes.others(home)[0]
        nodes.kill(home)
        session = nodes.session("observer", observer)
        during: list[str] = []
        refused: dict[str, object] = {"closed": False, "code": None, "text": ""}
        try:
            consumer = session.consume(q, ack_mode=AckMode.MANUAL, prefetch=100)
            during = _take_available(session, consumer, len(ids), RECOVERY_S if mirrored else 5.0)
        except ChannelClosed as exc:
            refused = {"closed": True, "code": exc.code, "text": exc.text}
            ctx.history.add("observer", "refused", f"{exc.code} {exc.text} through {observer}")
        try:
            session.close()
        except Exception:  # noqa: BLE001 - a channel the broker closed may fail to close again
            pass
        nodes.heal()
        after = [d.message_id for d in nodes.drain(q, observer, RECOVERY_S)]
        return {"variant": "mirrored" if mirrored else "unmirrored", "home": home, "observer": observer, "replicas_before": info,
                "published": ids, "during": during, "refused": refused, "after_restart": after}

    def _await_mirrors(self, ctx: CaseContext, nodes: Nodes, q: str, home: str) -> dict[str, object]:
        """Evidence that every other node holds a synchronised mirror before publishing."""
        end = time.monotonic() + SYNC_S
        want = set(nodes.others(home))
        while True:
            info = nodes.replicas(q)
            if want <= set(info.get("synchronised") or []):
                return info
            if time.monotonic() >= end:
                raise TargetError(f"{q}: mirrors on {sorted(want)} not synchronised within {SYNC_S:.0f}s ({info})")
            time.sleep(0.2)  # allowed: polling the broker's own report with a deadline

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        return judge_classic(obs, profile, queue_type)


def _take_available(session: Session, consumer: Consumer, n: int, window: float) -> list[str]:
    """Ids of up to ``n`` deliveries within ``window``, each acknowledged (fewer is an observation:
    the queue may be unavailable)."""
    out: list[str] = []
    end = time.monotonic() + window
    while len(out) < n:
        try:
            d = consumer.next(max(0.0, end - time.monotonic()))
        except OperationTimeout:
            break
        session.ack(d.tag)
        out.append(d.message_id or "")
    if out:
        session.sync()
    return out


def judge_classic(obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
    def check(values: Mapping[str, Any]) -> Verdict:
        value = values[ENTRY]
        return _classic_against(obs, value.get(obs["variant"]) if isinstance(value, dict) else value)

    return judge("FAILOVER-CLASSIC-NODE-LOSS", profile, queue_type, [ENTRY], check)


def _classic_against(obs: Obs, value: str) -> Verdict:
    """The observation against one documented fate of the queue (``ENTRY``'s values)."""
    ids, during, after = obs["published"], obs["during"], obs["after_restart"]
    where = f"home node {obs['home']} killed, observed through {obs['observer']}"
    refused = obs["refused"]
    if value == "unavailable-until-restart":
        return first_failure(
            holds(bool(refused["closed"]) and not during, expected=f"the queue is refused while its node is down ({where}; profile: {value})",
                  observed=f"refused {refused['code']} {refused['text']}" if refused["closed"] else f"served {fmt(during)}", spec=False),
            holds(sorted(after) == sorted(ids), expected=f"every confirmed persistent message there once the node is back ({where})",
                  observed=f"after the restart: {fmt(after)}", key="lost" if sorted(after) != sorted(ids) else None, spec=False),
        )
    if value == "mirror-promoted":
        missing = [m for m in ids if m not in during]
        return first_failure(
            holds(not refused["closed"], expected=f"a promoted mirror serves the queue ({where}; profile: {value})",
                  observed=f"refused {refused['code']} {refused['text']}" if refused["closed"] else "served", spec=False),
            holds(not missing, expected=f"every confirmed message served by the promoted mirror ({where})",
                  observed=f"missing {fmt(missing)} (served {fmt(during)})" if missing else f"all {len(ids)} served", key="lost" if missing else None,
                  spec=False),
            holds(not after, expected="nothing left once they were consumed", observed=f"left {fmt(after)}" if after else "none left", spec=False),
        )
    return holds(not during and not after, expected=f"queue and messages gone ({where}; profile: {value})",
                 observed=f"served {fmt(during)}, after restart {fmt(after)}", spec=False)
