"""The reconnecting clients (AMQ JMS failover rules, conformance.kit.clients) with a node list, on a
real node loss.

TX-FAILOVER-NO-LOSS checks the reconnecting client against one node whose connections a proxy
cuts; here the client's node really dies and the client carries on through another node, so what
the broker must do (discard the failed transaction's sends, keep what was confirmed, requeue what
was unacknowledged) happens across nodes.
"""

from __future__ import annotations

import threading
from collections import Counter

from conformance.cases.failover import NodeLossCase
from conformance.cases.failover.test_quorum import RECOVERY_S, pick
from conformance.catalogue.profiles import Profile
from conformance.errors import OperationTimeout
from conformance.kit.case import WAIT_S, CaseContext, Obs, ScenarioVoid
from conformance.kit.clients.failover import FailoverProducer, TransactionRolledBack
from conformance.kit.clients.node_failover import ConfirmingProducer, DedupConsumer, NodeList
from conformance.kit.verdicts import Verdict, first_failure, fmt, holds
from conformance.nemesis.cluster import Nodes

BATCH = 3
#: Bound on transaction attempts per batch (a correct run needs at most 2).
MAX_ATTEMPTS = 5


def node_list(ctx: CaseContext, nodes: Nodes, actor: str, first: str) -> NodeList:
    """The client's node list, starting with ``first`` (the node about to die)."""
    order = [first, *nodes.others(first)]
    return NodeList(lambda node: nodes.connect(actor, node, op_timeout=RECOVERY_S).session(), order)


class TestTransactionRolledBackAfterFailover(NodeLossCase):
    """Batch 1 commits; two sends of batch 2, kill the producer's node, the third send fails over;
    commit must raise the rolled-back error; the resent batch 2 and batch 3 commit elsewhere."""

    requirement = "FAILOVER-CLIENT-TX-ROLLED-BACK"
    queue_types = ("quorum",)

    def on_nodes(self, ctx: CaseContext, nodes: Nodes) -> Obs:
        q = ctx.queue()
        victim, observer, info = pick(nodes, q, "follower")
        links = node_list(ctx, nodes, "tx-producer", victim)
        producer = FailoverProducer(links.connect, queue=q)
        batches = [[f"b{b}-m{i}" for i in range(1, BATCH + 1)] for b in (1, 2, 3)]
        rolled_back: list[list[str]] = []
        commits: list[str] = []
        for b, ids in enumerate(batches, 1):
            for attempt in range(1, MAX_ATTEMPTS + 1):
                for i, mid in enumerate(ids):
                    if b == 2 and attempt == 1 and i == BATCH - 1:
                        assert producer.session is not None
                        producer.session.sync()  # evidence the node's channel has the two sends
                        nodes.kill(victim, back_at_once=True)  # inside the transaction: two sends done, one to go
                        links.failed()
                    producer.send(mid, mid.encode())
                try:
                    producer.commit()
                    commits.append(f"batch {b} attempt {attempt}: committed through {links.current}")
                    break
                except TransactionRolledBack as exc:
                    rolled_back.append(exc.ids)
                    commits.append(f"batch {b} attempt {attempt}: rolled back ({exc})")
        drained = nodes.drain(q, observer, RECOVERY_S)
        return {"victim": victim, "observer": observer, "replicas_before": info, "batches": batches,
                "rolled_back": rolled_back, "commits": commits, "nodes_used": links.used,
                "drained": [d.message_id for d in drained]}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        return judge_tx_rolled_back(obs)


def judge_tx_rolled_back(obs: Obs) -> Verdict:
    failed = obs["batches"][1]
    told = any(set(failed) <= set(r) for r in obs["rolled_back"])
    counts = Counter(obs["drained"])
    produced = [m for b in obs["batches"] for m in b]
    lost = [m for m in produced if not counts[m]]
    twice = sorted(m for m, n in counts.items() if n > 1)
    foreign = sorted(m for m in counts if m not in produced)
    moved = len(set(obs["nodes_used"])) > 1
    where = f"producer's node {obs['victim']} killed inside batch 2, drained through {obs['observer']}"
    return first_failure(
        holds(moved, expected="the client failed over to another node", observed=f"nodes used {fmt(obs['nodes_used'])}"),
        holds(told, expected=f"commit of the interrupted transaction raises the rolled-back error ({where})",
              observed=f"rolled back: {fmt(obs['rolled_back'])}; {'; '.join(obs['commits'])}", key="commit-not-rolled-back" if not told else None),
        holds(not lost, expected=f"every message of every (re)committed transaction delivered ({where})", observed=f"lost {fmt(lost)}" if lost else "none lost",
              key="lost" if lost else None),
        holds(not twice, expected="each exactly once: the failed transaction's uncommitted sends were discarded",
              observed=f"twice: {fmt(twice)}" if twice else "no duplicates", key="uncommitted-sends-delivered" if twice else None),
        holds(not foreign, expected="only produced messages", observed=f"unknown ids {fmt(foreign)}" if foreign else "no unknown ids"),
    )


class TestResendAndDedupAcrossNodes(NodeLossCase):
    """A confirming producer and a deduplicating consumer, both through the victim's node, stream
    40 messages; the node dies once the consumer has 10; both fail over; the consumer must end
    with each of the 40 exactly once after filtering."""

    requirement = "FAILOVER-CLIENT-RESEND-DEDUP"
    queue_types = ("quorum",)
    TOTAL, KILL_AT = 40, 10

    def on_nodes(self, ctx: CaseContext, nodes: Nodes) -> Obs:
        q = ctx.queue()
        victim, observer, info = pick(nodes, q, "follower")
        producer = ConfirmingProducer(node_list(ctx, nodes, "producer", victim), queue=q)
        consumer = DedupConsumer(node_list(ctx, nodes, "consumer", victim), queue=q)
        ids = [f"m{i}" for i in range(1, self.TOTAL + 1)]
        errors: list[BaseException] = []
        half = threading.Event()

        def produce() -> None:
            try:
                for n, mid in enumerate(ids, 1):
                    if n == self.TOTAL // 2 + 1 and not half.wait(WAIT_S * 3):
                        raise ScenarioVoid("the consumer never reached the kill point")
                    producer.send(mid, mid.encode())
            except BaseException as exc:  # noqa: BLE001 - re-raised in the case's thread
                errors.append(exc)

        t = threading.Thread(target=produce, name="failover-producer", daemon=True)
        t.start()
        seen: list[str] = []
        try:
            while len(seen) < self.TOTAL:
                d = consumer.receive(RECOVERY_S)
                seen.append(d.message_id or "")
                if len(seen) == self.KILL_AT:
                    nodes.kill(victim, back_at_once=True)  # producer and consumer both lose their node mid-stream
                    half.set()
        except OperationTimeout:
            pass  # fewer than TOTAL within the window: judged as lost
        finally:
            half.set()
            t.join(RECOVERY_S)
        consumer.close()
        if errors:
            raise errors[0]
        leftover = nodes.drain(q, observer, RECOVERY_S)
        return {"victim": victim, "observer": observer, "replicas_before": info, "produced": ids,
                "confirmed": producer.confirmed, "in_doubt": producer.in_doubt, "seen": seen, "raw": consumer.raw,
                "consumer_nodes": consumer.nodes.used, "producer_nodes": producer.nodes.used,
                "leftover": [d.message_id for d in leftover]}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        return judge_dedup(obs)


def judge_dedup(obs: Obs) -> Verdict:
    seen = Counter(obs["seen"])
    lost = [m for m in obs["produced"] if not seen[m]]
    twice = sorted(m for m, n in seen.items() if n > 1)
    # a resent in-doubt message may be stored twice: its second copy can be left in the queue (the
    # application's filter would drop it); anything never produced is a fault wherever it shows
    foreign = sorted({m for m in [*seen, *obs["leftover"]] if m not in obs["produced"]})
    moved = len(set(obs["consumer_nodes"])) > 1 and len(set(obs["producer_nodes"])) > 1
    n_raw = len(obs["raw"])
    where = f"node {obs['victim']} killed under producer and consumer; leftovers drained through {obs['observer']}"
    return first_failure(
        holds(moved, expected="producer and consumer failed over to other nodes",
              observed=f"producer nodes {fmt(obs['producer_nodes'])}, consumer nodes {fmt(obs['consumer_nodes'])}"),
        holds(not lost, expected=f"the consumer sees every produced message ({where})",
              observed=f"lost {fmt(lost)} (in doubt at the producer: {fmt(obs['in_doubt'])})" if lost else f"all {len(obs['produced'])} seen",
              key="lost" if lost else None),
        holds(not twice, expected="after the message-id filter, each exactly once", observed=f"twice: {fmt(twice)}" if twice else
              f"each once ({n_raw} raw deliveries, {len(obs['leftover'])} left in the queue)"),
        holds(not foreign, expected="only produced messages", observed=f"unknown ids {fmt(foreign)}" if foreign else "no unknown ids"),
    )
