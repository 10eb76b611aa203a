"""The basic.cancel operator (adapters/amqp091/mutators/cancel.py) on synthetic frames: the
cancelled consumer's unacknowledged deliveries nacked with requeue=true at basic.cancel-ok, and the
client's later settlement of those tags kept from the broker."""

from __future__ import annotations

from pamqp import commands

from conformance.nemesis.faults import Sender
from tests.nemesis.test_consumer_mutators import c, consume, deliver, s
from tests.nemesis.test_mutations import decoded, run

C, S = Sender.CLIENT, Sender.SERVER


def test_cancel_ok_requeues_what_the_consumer_holds_and_its_later_acks_are_swallowed() -> None:
    stream = [*consume("a"), *deliver("a", 1, mid="m1"), *deliver("a", 2, mid="m2"),
              *c(commands.Basic.Ack(delivery_tag=1)),
              *c(commands.Basic.Cancel("a")), *s(commands.Basic.CancelOk("a")),
              *c(commands.Basic.Ack(delivery_tag=2)), *c(commands.Basic.Ack(delivery_tag=3))]
    to_server, to_client, io, m = run("cancel-requeues-unacked", stream)
    sent = decoded(to_server)
    nacks = decoded(io.server)
    assert [(n.delivery_tag, n.requeue, n.multiple) for n in nacks] == [(2, True, False)], "only the unacked m2"
    acks = [f.delivery_tag for f in sent if isinstance(f, commands.Basic.Ack)]
    assert acks == [1, 3], "the ack of tag 2 (requeued at the cancel) never reaches the broker"
    assert any(isinstance(f, commands.Basic.CancelOk) for f in decoded(to_client))
    assert m.rewritten == 2


def test_a_multiple_ack_over_a_requeued_tag_is_split_into_the_others_and_no_ack_consumers_are_left_alone() -> None:
    stream = [*c(commands.Basic.Consume(queue="q", consumer_tag="n", no_ack=True)), *s(commands.Basic.ConsumeOk("n")),
              *deliver("n", 1), *consume("a"), *consume("b"), *deliver("a", 2), *deliver("b", 3), *deliver("b", 4),
              *c(commands.Basic.Cancel("n")), *s(commands.Basic.CancelOk("n")),
              *c(commands.Basic.Cancel("b")), *s(commands.Basic.CancelOk("b")),
              *c(commands.Basic.Ack(delivery_tag=4, multiple=True))]
    to_server, _, io, _ = run("cancel-requeues-unacked", stream)
    sent = decoded(to_server)
    assert [n.delivery_tag for n in decoded(io.server)] == [3, 4], "nothing for the no-ack consumer, nor for a"
    assert [(a.delivery_tag, a.multiple) for a in sent if isinstance(a, commands.Basic.Ack)] == [(2, False)]
