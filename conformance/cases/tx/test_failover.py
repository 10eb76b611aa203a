"""The AMQ JMS failover seed as a case: a transacted producer and consumer that reconnect.

Faults at fault points (conformance/nemesis/fault_points.yaml; the second of each pair counts only
once the first has fired):
producer: reset on the 5th message body (inside its 2nd transaction), then withhold the next
commit-ok after reconnecting (the broker committed; the client is told the transaction rolled back
and resends: duplicates). consumer: reset before its 4th ack (inside its 2nd transaction; acks
lost), then withhold the next commit-ok after reconnecting (acks committed; the client reprocesses
nothing but is told rolled back).
"""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

from conformance.catalogue.profiles import Profile
from conformance.kit.case import WAIT_S, Case, CaseContext, Obs, sentinel_body
from conformance.kit.clients.failover import FailoverConsumer, FailoverProducer, TransactionRolledBack
from conformance.kit.verdicts import Verdict, first_failure, fmt, holds
from conformance.nemesis.points import fault_at

BATCHES, BATCH = 4, 3
#: Bound on transactions a client may try; a correct run needs about BATCHES + 2.
MAX_TRANSACTIONS = 40


class TestFailoverNoLoss(Case):
    requirement = "TX-FAILOVER-NO-LOSS"

    def scenario(self, ctx: CaseContext) -> Obs:
        q = ctx.queue()
        pproxy, cproxy = ctx.proxy(), ctx.proxy()
        f1 = pproxy.arm(fault_at(pproxy.protocol, "tx-publish-content", nth=5, connection=1))
        f2 = pproxy.arm(fault_at(pproxy.protocol, "commit-answer", following=f1))
        producer = FailoverProducer(lambda: ctx.session("producer", via=pproxy), queue=q)
        produced: list[str] = []
        producer_rolled_back: list[str] = []
        for b in range(1, BATCHES + 1):
            ids = [f"b{b}-m{i}" for i in range(1, BATCH + 1)]
            for _ in range(MAX_TRANSACTIONS):
                for mid in ids:
                    producer.send(mid, mid.encode())
                try:
                    producer.commit()
                    break
                except TransactionRolledBack as exc:
                    producer_rolled_back += exc.ids
            produced += ids
        sentinel = f"end-{uuid.uuid4().hex[:6]}"
        ctx.admin.publish(q, sentinel_body(sentinel), message_id=sentinel)

        f3 = cproxy.arm(fault_at(cproxy.protocol, "tx-ack", nth=4, connection=1))
        f4 = cproxy.arm(fault_at(cproxy.protocol, "commit-answer", following=f3))
        consumer = FailoverConsumer(lambda: ctx.session("consumer", via=cproxy), queue=q)
        processed: list[dict[str, Any]] = []
        consumer_rolled_back: list[str] = []
        done = False
        for _ in range(MAX_TRANSACTIONS):
            batch = []
            while len(batch) < BATCH:
                d = consumer.receive(WAIT_S)
                processed.append({"id": d.message_id, "redelivered": d.redelivered})
                consumer.ack(d)
                batch.append(d.message_id)
                if d.message_id == sentinel:
                    break
            try:
                consumer.commit()
            except TransactionRolledBack as exc:
                consumer_rolled_back += exc.ids
                continue
            if sentinel in batch:
                done = True
                break
        consumer.close()
        hits = [ctx.expect_fired(f) for f in (f1, f2, f3, f4)]
        leftover = [d.message_id for d in ctx.drain(q)]
        return {
            "produced": produced,
            "producer_rolled_back": producer_rolled_back,
            "processed": [p for p in processed if p["id"] != sentinel],
            "consumer_rolled_back": [m for m in consumer_rolled_back if m != sentinel],
            "finished": done,
            "leftover": leftover,
            "faults": hits,
            "reconnects": {"producer": producer.reconnects, "consumer": consumer.reconnects},
        }

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        seen = [p["id"] for p in obs["processed"]] + obs["leftover"]
        counts = Counter(seen)
        lost = [m for m in obs["produced"] if m not in counts]
        explained = set(obs["producer_rolled_back"]) | set(obs["consumer_rolled_back"])
        unexplained = sorted(m for m, n in counts.items() if n > 1 and m not in explained)
        foreign = sorted(m for m in counts if m not in obs["produced"])
        dupes = sorted(m for m, n in counts.items() if n > 1)
        return first_failure(
            holds(obs["finished"], expected="the consumer reaches the end of the stream", observed="end marker committed" if obs["finished"] else "it never committed the end marker"),
            holds(not lost, expected="every produced message is consumed at least once", observed=f"lost {fmt(lost)}" if lost else "none lost", key="lost" if lost else None),
            holds(not foreign, expected="only produced messages are consumed", observed=f"unknown ids {fmt(foreign)}" if foreign else "no unknown ids"),
            holds(
                not unexplained,
                expected="every duplicate belongs to a transaction the client was told rolled back",
                observed=f"unexplained duplicates {fmt(unexplained)}" if unexplained else f"duplicates {fmt(dupes)} all from rolled-back transactions",
                key="unexplained-duplicates" if unexplained else None,
            ),
        )
