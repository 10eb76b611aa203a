"""Counting over AMQP 1.0 itself (adapters/amqp10/admin.py ProtocolCounter), against real brokers:
a broker that does not browse is not counted by taking its messages, a broker that grants copy but
acquires is caught doing it, and the departure barrier is a round trip the broker answered."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from adapters.amqp10.admin import ProtocolCounter
from adapters.amqp10.proton_adapter import ProtonAdapter
from adapters.proton_example.launcher import DEFAULT_SCRIPT, ProtonExampleBroker
from adapters.rabbitmq.launcher import RabbitMQLocalNode
from conformance.api import AckMode, QueueSpec
from conformance.errors import TargetCannot
from conformance.targets import wait_until


@pytest.fixture()
def proton_broker() -> Iterator[ProtonExampleBroker]:
    if not Path(DEFAULT_SCRIPT).is_file():
        pytest.skip(f"{DEFAULT_SCRIPT} missing: apt-get install libqpid-proton11-dev-examples")
    broker = ProtonExampleBroker()
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


def test_a_broker_that_does_not_browse_is_not_counted_and_keeps_its_messages(proton_broker: ProtonExampleBroker) -> None:
    conn = ProtonAdapter().connect(proton_broker.url, op_timeout=5)
    try:
        session = conn.session()
        session.enable_confirms()
        for mid in ("m1", "m2"):
            session.publish("counted", mid.encode(), message_id=mid)
        counter = ProtocolCounter("the example broker", proton_broker.url, op_timeout=5, adapter=ProtonAdapter)
        with pytest.raises(TargetCannot, match="asked distribution-mode copy, the example broker granted unspecified"):
            counter.queue_stats("counted")
        with pytest.raises(TargetCannot, match="granted unspecified"):  # found out once, said again at once
            counter.queue_stats("counted")
        got = session.consume("counted", ack_mode=AckMode.MANUAL, prefetch=10).take(2, 5)
        assert [d.message_id for d in got] == ["m1", "m2"]  # the attempt to count took nothing
        how = counter.departure_barrier("counted")
        assert how is not None and "ordering barrier" in how and "answered in" in how
    finally:
        conn.close()


def test_copy_granted_but_acquired_is_caught(rabbit: RabbitMQLocalNode) -> None:
    """RabbitMQ's 3.x AMQP 1.0 plugin echoes distribution-mode copy and acquires: a second browser
    sees nothing of what the first holds, so the counter refuses to count rather than report 0.
    (A quorum queue: on a classic one the plugin's drain crashes the session, rabbitmq-server#7119.)"""
    url = rabbit.url
    conn = ProtonAdapter().connect(url, op_timeout=10)
    try:
        session = conn.session()
        q = session.declare_queue(QueueSpec(name="conformance.counter.copy-acquires", queue_type="quorum",
                                            arguments={"x-queue-type": "quorum"}))
        session.enable_confirms()
        for mid in ("m1", "m2", "m3"):
            session.publish(q, mid.encode(), message_id=mid)
        counter = ProtocolCounter("RabbitMQ 3.10 plugin", url, op_timeout=10, adapter=ProtonAdapter)
        with pytest.raises(TargetCannot, match="second browser saw 0 of the 3 messages the first one holds.*acquires"):
            counter.queue_stats(q)
        # The counter closed its connection: the broker puts what its browsers acquired back.
        assert wait_until(lambda: session.queue_stats(q).ready == 3, 10.0), session.queue_stats(q)
        session.delete_queue(q)
    finally:
        conn.close()
