"""Node-level faults for cases that need a cluster: the nemesis and client sides, broker-neutral.

A cluster target (a launcher such as ``rabbitmq-cluster``) offers the operations in
:class:`~conformance.nemesis.kinds.ClusterOps` (the ability of the node kinds, conformance.nemesis.kinds);
the core names no broker. A case gets a :class:`Nodes` from its context: it
connects to a chosen node, kills one (kill -9), observes through another, and brings the node back
before it ends, and every one of those steps lands in the case's history naming the node, so a
record shows which node died and through which node the outcome was seen.

Where the self-test runs a mutation, the runner puts a mutation proxy in front of every node
(:func:`mutated_node_urls`), so observations through any node pass through the mutated stream.
"""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any, Callable, cast

from conformance.api import AckMode, Connection, Delivery, Session
from conformance.errors import (
    ChannelClosed,
    ConnectionLost,
    DeliveriesMissing,
    OperationTimeout,
    PublishNotConfirmed,
    TargetCannot,
    TargetError,
)
from conformance.kit.case import sentinel_body
from conformance.nemesis.kinds import NODE_KILL, ClusterOps

#: Bound on bringing a killed node back (boot and rejoin on a busy 2-core machine).
NODE_BACK_S = 120.0


def cluster_ops(target: object) -> ClusterOps:
    """The target as a cluster, or TargetCannot in the node kind's words. The runner asks before a
    case runs (the case names :data:`NODE_KILL`), so this answers only a scenario that did not."""
    if not NODE_KILL.offered_by(target):
        raise TargetCannot(NODE_KILL.cannot_take(target))
    return cast(ClusterOps, target)


class Nodes:
    """The cluster as a case sees it: named nodes to connect to, kill, restart and ask about."""

    def __init__(self, ctx: Any) -> None:
        self.ctx = ctx
        self.ops = cluster_ops(ctx.target)
        self.names = self.ops.node_names()
        #: Per-node URLs the runner chose (mutation proxies during a self-test), else the target's own.
        self.urls: dict[str, str] = getattr(ctx, "node_urls", None) or self.ops.node_urls()
        self.killed: list[str] = []
        self._booting: dict[str, tuple[threading.Thread, list[BaseException | float]]] = {}

    def short(self, name: str) -> str:
        return name.split("@")[0]

    def connect(self, actor: str, node: str, *, op_timeout: float | None = None) -> Connection:
        conn = cast(Connection, self.ctx.connect(actor, url=self.urls[node], op_timeout=op_timeout))
        self.ctx.history.add(actor, "node", f"connected through {node}")
        return conn

    def session(self, actor: str, node: str) -> Session:
        return self.connect(actor, node).session()

    def others(self, *nodes: str) -> list[str]:
        return [n for n in self.names if n not in nodes]

    def kill(self, node: str, *, back_at_once: bool = False) -> None:
        """kill -9 of one node; the case's connections to other nodes live on. ``back_at_once``
        starts the node again at once, in the background, for a case that observes only through
        the survivors: its 8-30 s boot overlaps the observation instead of following it."""
        NODE_KILL.fire(self.ops, node)
        self.killed.append(node)
        self.ctx.history.add("nemesis", NODE_KILL.fired_event, node)
        if back_at_once:
            started = time.monotonic()
            box: list[BaseException | float] = []

            def boot() -> None:
                try:
                    NODE_KILL.heal(self.ops, node)
                    box.append(time.monotonic() - started)
                except BaseException as exc:  # noqa: BLE001 - reported by heal()
                    box.append(exc)

            t = threading.Thread(target=boot, name=f"start {node}", daemon=True)
            t.start()
            self._booting[node] = (t, box)

    def heal(self) -> None:
        """Start every node this case killed (or wait for its background start) until it answers
        again: the next case needs the whole cluster. Done in the case's cleanup path too, so a
        failing case leaves no node down."""
        for node in list(self.killed):
            start = time.monotonic()
            booting = self._booting.pop(node, None)
            try:
                if booting is None:
                    NODE_KILL.heal(self.ops, node)
                    took = time.monotonic() - start
                else:
                    booting[0].join(NODE_BACK_S)
                    outcome = booting[1][0] if booting[1] else TargetError(f"{node} not back within {NODE_BACK_S:.0f}s")
                    if isinstance(outcome, BaseException):
                        raise outcome
                    took = outcome  # the background boot's own duration, counted from the kill
            except BaseException as exc:
                self.ctx.history.add("nemesis", "start", node, error=str(exc))
                raise
            self.killed.remove(node)
            self.ctx.history.add("nemesis", "start", f"{node} accepting connections after {took:.1f}s")

    def proxy(self, node: str) -> Any:
        """A fault proxy in front of one node (see CaseContext.proxy); its trace joins the case's report."""
        from conformance.nemesis.proxy_isolated import IsolatedFaultProxy

        url = self.urls[node]
        p = IsolatedFaultProxy.for_url(url, on_event=lambda text: self.ctx.history.add("proxy", "event", text))
        p.protocol = self.ctx.adapter.protocol  # a fault on a frame the protocol lacks is cannot-express, as on CaseContext.proxy
        p.start()
        self.ctx.proxies.append(p)
        self.ctx.history.add("suite", "proxy", f"127.0.0.1:{p.port} -> {node}")
        return p

    def drain(self, queue: str, node: str, window: float = 30.0) -> list[Delivery]:
        """Everything deliverable from ``queue`` now, read through ``node``, proven complete by a
        sentinel published through the same node (the run's usual admin node may be the dead one).
        ``window`` covers a quorum queue electing a new leader after its old one died."""
        def confirming() -> Session:
            s = self.connect("observer", node, op_timeout=window).session()
            s.enable_confirms()
            return s

        end = time.monotonic() + window
        sentinels: list[str] = []

        def send(s: Session) -> None:
            sentinels.append(f"sentinel-{uuid.uuid4().hex[:8]}")
            s.publish(queue, sentinel_body(sentinels[-1]), message_id=sentinels[-1], persistent=True)

        session, _ = until_accepted(send, confirming(), confirming, end)
        consumer = session.consume(queue, ack_mode=AckMode.MANUAL, prefetch=1000)
        out: list[Delivery] = []
        while True:
            try:
                d = consumer.next(max(0.0, end - time.monotonic()))
            except OperationTimeout:
                raise DeliveriesMissing(queue, len(out) + 1, [x.message_id or "" for x in out], window,
                                        [*(x.message_id or "" for x in out), sentinels[-1]]) from None
            session.ack(d.tag)
            if d.message_id == sentinels[-1]:
                break
            if d.message_id not in sentinels:  # a refused sentinel the broker kept after all: not the case's
                out.append(d)
        session.sync()
        self.ctx.history.add("observer", "drained", f"{len(out)} message(s) from {queue} through {node}")
        return out

    def await_ready(self, queue: str, node: str, n: int, timeout: float) -> bool:
        """Barrier before draining what a dead consumer held: the queue, asked through ``node``,
        reports at least ``n`` ready messages (the leader has seen the consumer's node go and
        returned its deliveries). Without it a sentinel published at once could be enqueued ahead
        of the returns. False when the deadline passed (the drain then shows what is missing)."""
        end = time.monotonic() + timeout
        session: Session | None = None
        last = "no answer"
        polls = 0
        while time.monotonic() < end:
            polls += 1
            try:
                session = session or self.connect("observer", node, op_timeout=5.0).session()
                raw = getattr(session, "_target", session)
                ready = raw.queue_stats(queue).ready
                last = f"{ready} ready"
                if ready >= n:
                    self.ctx.history.add("observer", "barrier", f"{queue} reports {ready} ready through {node} ({polls} polls)")
                    return True
            except (ChannelClosed, ConnectionLost, OperationTimeout) as exc:  # no leader yet: ask again on a fresh session
                session, last = None, f"{type(exc).__name__}: {exc}"
            time.sleep(RETRY_S)  # allowed: polling the broker's own count with a deadline
        self.ctx.history.add("observer", "barrier", f"{queue} through {node}", error=f"not {n} ready within {timeout:.0f}s (last: {last})")
        return False

    def replicas(self, queue: str) -> dict[str, Any]:
        """Where the broker says ``queue`` lives (leader, members, mirrors); recorded in the history."""
        info = self.ops.queue_replicas(queue)
        self.ctx.history.add("suite", "replicas", f"{queue}: " + ", ".join(f"{k}={v}" for k, v in info.items() if v))
        return info

    def await_leader(self, queue: str, not_on: str, timeout: float = 30.0) -> str:
        """After the leader's node died: poll until another member is leader (one CLI call a poll)."""
        end = time.monotonic() + timeout
        while True:
            info = self.ops.queue_replicas(queue)
            leader = info.get("leader")
            if leader and leader != not_on:
                self.ctx.history.add("suite", "replicas", f"{queue}: new leader {leader}")
                return str(leader)
            if time.monotonic() >= end:
                raise TargetError(f"{queue}: no new leader within {timeout:.0f}s (last: {leader})")
            time.sleep(0.2)  # allowed: polling the broker's own report with a deadline


#: Pause between publishes a leaderless queue refused (polling with the caller's deadline).
RETRY_S = 0.05


def until_accepted(publish: Callable[[Session], None], session: Session, reopen: Callable[[], Session],
                   deadline: float) -> tuple[Session, int]:
    """Publish until the broker confirms, returning the session that succeeded and the refusals.

    A quorum queue refuses publishes (nack) while it elects a new leader, and on RabbitMQ 3.10.8 a
    channel that was refused keeps being refused after the election (seen here: 30 s of nacks on
    one channel, a fresh channel accepted at once), so each retry goes over a fresh session from
    ``reopen``. The last refusal past ``deadline`` (monotonic) is raised."""
    refused = 0
    while True:
        try:
            publish(session)
            return session, refused
        except PublishNotConfirmed:
            refused += 1
            if time.monotonic() >= deadline:
                raise
            try:
                session.close()
            except Exception:  # noqa: BLE001 - the refused session is dropped either way
                pass
            time.sleep(RETRY_S)  # allowed: retrying a refused publish until a deadline
            session = reopen()


def with_healing(nodes: Nodes, body: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Run a scenario body, then bring back whatever node it killed, whatever happened."""
    try:
        return body()
    finally:
        nodes.heal()


def mutated_node_urls(node_urls: dict[str, str], first: tuple[str, str] | None,
                      make_proxy: Callable[[str], Any]) -> tuple[dict[str, str], list[Any]]:
    """A mutation proxy in front of every node: ``first`` is (node URL, URL through the run's own
    mutation proxy), reused for that node; ``make_proxy(url)`` starts another and returns it."""
    out: dict[str, str] = {}
    proxies: list[Any] = []
    for name, url in node_urls.items():
        if first is not None and url == first[0]:
            out[name] = first[1]
            continue
        p = make_proxy(url)
        proxies.append(p)
        out[name] = p.url(url)
    return out, proxies


def merge_mutation_stats(stats: list[dict[str, Any] | None]) -> dict[str, Any] | None:
    """One run's mutation stats over several proxies: frames rewritten add up, probe touches unite."""
    real = [s for s in stats if s]
    if not real:
        return None
    out = dict(real[0])
    if "touches" in out:
        touches: dict[str, set[str]] = {}
        for s in real:
            for name, conns in (s.get("touches") or {}).items():
                touches.setdefault(name, set()).update(conns)
        out["touches"] = {k: sorted(v) for k, v in touches.items()}
    if "rewritten" in out:
        out["rewritten"] = sum(int(s.get("rewritten") or 0) for s in real)
    return out
