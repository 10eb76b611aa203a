"""Seed 002's failover rules for transacted clients, on one broker: the suite's failover clients
(conformance.kit.clients.failover) lose their connection inside an uncommitted transaction and
reconnect to the same node.

No node dies and no frame is named: the client's own connection is reset (a crashed network path),
so the case runs over any protocol whose adapter has transactions, AMQP 1.0 included, on a single
broker process (qpidd) as well as a node of a cluster. What the broker answers for is what
happened to the failed transactions: their sends discarded, their acknowledgements dropped.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from conformance.api import Connection, Session
from conformance.catalogue.profiles import Profile
from conformance.kit.case import WAIT_S, Case, CaseContext, Obs, delivery_obs
from conformance.kit.checkers import all_redelivered
from conformance.kit.clients.failover import FailoverConsumer, FailoverProducer, TransactionRolledBack
from conformance.kit.redelivery import signal_of
from conformance.kit.verdicts import Verdict, first_failure, fmt, holds

BATCH = 3


class Reconnecting:
    """The failover client's connect function, keeping each connection so the case can reset it."""

    def __init__(self, ctx: CaseContext, actor: str) -> None:
        self.ctx, self.actor = ctx, actor
        self.connections: list[Connection] = []

    def __call__(self) -> Session:
        conn = self.ctx.connect(f"{self.actor}{len(self.connections) + 1}")
        self.connections.append(conn)
        return conn.session()

    def lose(self) -> None:
        self.connections[-1].cut()


class TestTransactedClientsReconnect(Case):
    requirement = "SEED-FAILOVER-TX-RECONNECT"

    def scenario(self, ctx: CaseContext) -> Obs:
        q = ctx.queue()
        obs: dict[str, Any] = {}
        # -- producer: batch 1 commits; two sends of batch 2 reach the broker, the connection is lost,
        # the third send goes through a new connection; commit must report the transaction failed
        links = Reconnecting(ctx, "producer")
        producer = FailoverProducer(links, queue=q)
        batches = [[f"b{b}-m{i}" for i in range(1, BATCH + 1)] for b in (1, 2)]
        for mid in batches[0]:
            producer.send(mid, mid.encode())
        producer.commit()
        for mid in batches[1][:2]:
            producer.send(mid, mid.encode())
        assert producer.session is not None
        producer.session.sync()  # both sends are at the broker, inside the open transaction
        links.lose()
        producer.send(batches[1][2], batches[1][2].encode())
        try:
            producer.commit()
            obs["producer_commit"] = "committed"
        except TransactionRolledBack as exc:
            obs["producer_commit"] = f"rolled back: {exc}"
        obs["ready_after_failed_commit"] = ctx.stats(q).ready  # nothing of the failed transaction may show
        for mid in batches[1]:  # the application resends the failed transaction
            producer.send(mid, mid.encode())
        producer.commit()
        producer.close()
        obs["produced"] = [m for b in batches for m in b]
        obs["producer_events"] = producer.events
        # -- consumer: receives three in a transaction, acknowledges two, loses its connection
        clinks = Reconnecting(ctx, "consumer")
        consumer = FailoverConsumer(clinks, queue=q)
        first = [consumer.receive(WAIT_S) for _ in range(BATCH)]
        for d in first[:2]:
            consumer.ack(d)
        assert consumer.session is not None
        consumer.session.sync()  # the two acknowledgements are at the broker, inside the transaction
        clinks.lose()
        consumer.ack(first[2])  # after the loss: does nothing (seed 002)
        try:
            consumer.commit()
            obs["consumer_commit"] = "committed"
        except TransactionRolledBack as exc:
            obs["consumer_commit"] = f"rolled back: {exc}"
        obs["failed_tx"] = [delivery_obs(d) for d in first]
        # the application reprocesses: everything again, in one transaction, committed
        again = ctx.take(_Receiver(consumer), len(obs["produced"]))
        for d in again:
            consumer.ack(d)
        consumer.commit()
        consumer.close()
        obs["committed"] = [delivery_obs(d) for d in again]
        obs["consumer_events"] = consumer.events
        obs["left"] = [delivery_obs(d) for d in ctx.drain(q)]
        return obs

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        failed_ids = [d["id"] for d in obs["failed_tx"]]
        committed = Counter(d["id"] for d in obs["committed"])
        lost = [m for m in obs["produced"] if not committed[m]]
        twice = sorted(m for m, n in committed.items() if n > 1)
        foreign = sorted(m for m in committed if m not in obs["produced"])
        back = [d for d in obs["committed"] if d["id"] in failed_ids]
        ready = obs["ready_after_failed_commit"]
        return first_failure(
            holds(obs["producer_commit"].startswith("rolled back") and obs["consumer_commit"].startswith("rolled back"),
                  expected="the failover clients report each interrupted transaction rolled back (the suite's client)",
                  observed=f"producer: {obs['producer_commit']}; consumer: {obs['consumer_commit']}"),
            holds(ready == BATCH,
                  expected=f"when the producer is told its transaction failed, only batch 1 is in the queue ({BATCH} ready): "
                           "the failed transaction's sends were discarded and the new one's are uncommitted",
                  observed=f"{ready} ready", key="failed-tx-sends-visible" if ready > BATCH else "committed-batch-missing" if ready < BATCH else None),
            holds(not lost and not foreign and not twice,
                  expected=f"after the resend, the consumer commits every message once: {fmt(obs['produced'])}",
                  observed=f"committed {fmt(sorted(committed))}" + (f"; lost {fmt(lost)}" if lost else "") + (f"; twice {fmt(twice)}" if twice else "")
                  + (f"; unknown {fmt(foreign)}" if foreign else ""),
                  key="uncommitted-sends-delivered" if twice else "lost" if lost else "unexpected" if foreign else None),
            holds(len(back) == len(failed_ids),
                  expected=f"the consumer's failed transaction ({fmt(failed_ids)}, two of them acknowledged in it) comes back whole: its acknowledgements were dropped",
                  observed=f"came back {fmt([d['id'] for d in back])}", key="tx-acks-applied" if len(back) < len(failed_ids) else None),
            all_redelivered(back, signal=signal_of(profile, queue_type)),
            holds(not obs["left"], expected="nothing left after the consumer committed", observed=f"left {fmt([d['id'] for d in obs['left']])}",
                  key="left" if obs["left"] else None),
        )


class _Receiver:
    """The failover consumer as a consumer ctx.take can read (its receive reconnects as needed)."""

    def __init__(self, consumer: FailoverConsumer) -> None:
        self.consumer = consumer
        self.queue = consumer.queue

    def next(self, timeout: float) -> Any:
        return self.consumer.receive(timeout)
