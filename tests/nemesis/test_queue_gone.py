"""Ending the wait for a queue after a broker fault when the queue is gone for good.

A 404 alone once came from a broker whose queue answered afterwards (in CI, on the process
target), so the wait ends only on two pieces of evidence: the protocol's 404 and the broker's own
metadata (Target.queue_known), then a 404 again after that listing. Pure logic against a scripted
broker; the real path runs in the self-test (durable-flipped: the persist and tx cases' queues are
gone after the restart) and in tests/runner/test_selftest_lanes.py's two-node run.
"""

from __future__ import annotations

import time

import pytest

from conformance.api import QueueStats
from conformance.errors import ChannelClosed, OperationTimeout
from conformance.kit.context.broker_faults import BrokerFaults
from conformance.kit.history import History

NOT_FOUND = "NOT_FOUND - no queue 'q' in vhost '/'"
HOME_DOWN = "NOT_FOUND - home node 'rabbit@a' of durable queue 'q' in vhost '/' is down or inaccessible"


class Broker:
    """Answers the passive declares in turn (the last repeats) and what its listing says."""

    def __init__(self, answers: list[ChannelClosed | QueueStats], known: bool | None) -> None:
        self.answers, self.known, self.declares, self.listings = answers, known, 0, 0

    def queue_known(self, queue: str) -> bool | None:
        self.listings += 1
        return self.known


class Faults(BrokerFaults):
    def __init__(self, broker: Broker) -> None:  # only what await_queue reads
        self.target, self.history, self.fault_kind, self._admin = broker, History(), "restart", None
        self.broker = broker

    def stats(self, queue: str) -> QueueStats:
        b = self.broker
        b.declares += 1
        answer = b.answers[min(b.declares, len(b.answers)) - 1]
        if isinstance(answer, ChannelClosed):
            raise answer
        return answer


def test_a_404_and_a_listing_without_the_queue_end_the_wait_at_the_next_404() -> None:
    broker = Broker([ChannelClosed(404, NOT_FOUND)], known=False)
    with pytest.raises(OperationTimeout, match=r"404 NOT_FOUND.*before and after its own queue listing had no q.*the queue is gone"):
        Faults(broker).await_queue("q", timeout=5.0)
    assert broker.declares == 2 and broker.listings == 1  # decided on the answer after the listing, not the window


def test_a_listed_queue_keeps_the_wait_going_until_it_answers() -> None:
    stats = QueueStats(ready=3, consumers=0)
    broker = Broker([ChannelClosed(404, NOT_FOUND)] * 3 + [stats], known=True)
    ctx = Faults(broker)
    assert ctx.await_queue("q", timeout=5.0) == stats
    assert broker.listings == 1
    assert any(e.actor == "node" and "listed by the broker" in e.detail for e in ctx.history.events)


@pytest.mark.parametrize("known", [None, True])
def test_without_the_broker_s_word_that_it_is_gone_the_window_decides(known: bool | None) -> None:
    broker = Broker([ChannelClosed(404, NOT_FOUND)], known=known)
    start = time.monotonic()
    with pytest.raises(OperationTimeout, match=r"timed out after 0.3s.*the broker's last answer: 404"):
        Faults(broker).await_queue("q", timeout=0.3)
    assert time.monotonic() - start >= 0.3


def test_a_404_for_a_queue_whose_home_node_is_down_waits_on_its_listed_record() -> None:
    """The reply text is never read: the broker's listing (the durable record is there) decides."""
    broker = Broker([ChannelClosed(404, HOME_DOWN)], known=True)
    with pytest.raises(OperationTimeout, match=r"timed out after 0.3s"):
        Faults(broker).await_queue("q", timeout=0.3)
    assert broker.listings == 1


def _listed(node, queue: str) -> bool | None:
    """The listing's answer; None (rabbitmqctl's VM did not answer within its 15 s, as on a machine
    busy with the other test workers' brokers) is asked again, up to three times: what is judged
    here is what the listing says, not how fast the tool starts."""
    for _ in range(3):
        known = node.queue_known(queue)
        if known is not None:
            return known
    return None


def test_the_private_node_lists_a_declared_queue_and_not_an_unknown_one(rabbit) -> None:
    """The real listing (rabbitmqctl list_queues on the session's private node)."""
    import pika

    conn = pika.BlockingConnection(pika.URLParameters(rabbit.url))
    try:
        conn.channel().queue_declare("conformance.test-queue-known", durable=True)
        assert _listed(rabbit, "conformance.test-queue-known") is True
        assert _listed(rabbit, "conformance.test-queue-known.never-declared") is False
    finally:
        conn.channel().queue_delete("conformance.test-queue-known")
        conn.close()
