"""The consumer operators (adapters/amqp091/mutators/consumers.py) on synthetic frames: what each
rewrites, withholds or injects, and that the stream stays valid for the client."""

from __future__ import annotations

from typing import Any

from pamqp import body as pbody
from pamqp import commands
from pamqp import header as pheader

from conformance.nemesis.faults import Sender
from tests.nemesis.test_mutations import IO, decoded, frames091, run

C, S = Sender.CLIENT, Sender.SERVER


def c(*values: Any, ch: int = 1) -> list[tuple[Sender, Any]]:
    return [(C, f) for f in frames091(*((v, ch) for v in values))]


def s(*values: Any, ch: int = 1) -> list[tuple[Sender, Any]]:
    return [(S, f) for f in frames091(*((v, ch) for v in values))]


def consume(tag: str, answer: str | None = None, queue: str = "q", ch: int = 1, args: dict[str, Any] | None = None) -> list[tuple[Sender, Any]]:
    return c(commands.Basic.Consume(queue=queue, consumer_tag=tag, arguments=args or {}), ch=ch) + \
        s(commands.Basic.ConsumeOk(answer if answer is not None else tag), ch=ch)


def deliver(ctag: str, tag: int, redelivered: bool = False, ch: int = 1, mid: str = "m1") -> list[tuple[Sender, Any]]:
    body = mid.encode()
    return [(S, f) for f in frames091((commands.Basic.Deliver(ctag, tag, redelivered, "", "q"), ch),
                                      (pheader.ContentHeader(0, len(body), commands.Basic.Properties(message_id=mid)), ch),
                                      (pbody.ContentBody(body), ch))]


def delivered(to_client: list[bytes]) -> list[Any]:
    return [f for f in decoded(to_client) if isinstance(f, commands.Basic.Deliver)]


def test_consumer_tag_repeated_gives_later_broker_named_consumers_the_first_tag() -> None:
    stream = consume("", "amq.ctag-a") + consume("", "amq.ctag-b") + consume("mine") + deliver("amq.ctag-b", 1)
    _, to_client, _, m = run("consumer-tag-repeated", stream)
    oks = [f.consumer_tag for f in decoded(to_client) if isinstance(f, commands.Basic.ConsumeOk)]
    assert oks == ["amq.ctag-a", "amq.ctag-a", "mine"]  # a client-chosen tag is left alone
    assert [d.consumer_tag for d in delivered(to_client)] == ["amq.ctag-a"]
    assert m.rewritten == 1


def test_reconsume_first_withheld_keeps_the_first_fresh_delivery_after_a_cancel() -> None:
    stream = (consume("t") + deliver("t", 1, mid="m1") + c(commands.Basic.Cancel("t")) + s(commands.Basic.CancelOk("t"))
              + consume("t") + deliver("t", 2, mid="m6") + deliver("t", 3, mid="m7"))
    _, to_client, _, m = run("reconsume-first-withheld", stream)
    assert [d.delivery_tag for d in delivered(to_client)] == [1, 3]
    assert m.rewritten == 1
    _, to_client, _, m = run("reconsume-first-withheld", consume("t") + deliver("t", 1) + deliver("t", 2))
    assert len(delivered(to_client)) == 2 and m.rewritten == 0  # no cancel: nothing withheld


def test_takeover_withheld_keeps_redeliveries_from_a_consumer_that_had_no_first_delivery() -> None:
    stream = consume("b") + deliver("b", 1, redelivered=True) + deliver("b", 2, redelivered=True)
    _, to_client, _, m = run("takeover-withheld", stream)
    assert delivered(to_client) == [] and m.rewritten == 2
    stream = consume("a") + deliver("a", 1) + deliver("a", 2, redelivered=True)
    _, to_client, _, m = run("takeover-withheld", stream)
    assert len(delivered(to_client)) == 2 and m.rewritten == 0  # a consumer fed first deliveries keeps its redeliveries


def test_priority_consumer_halts_only_after_a_higher_priority_consumer_of_the_same_queue() -> None:
    stream = (consume("low", args={"x-priority": 0}) + deliver("low", 1) + consume("other", queue="r", ch=2)
              + consume("high", ch=2, args={"x-priority": 100}) + deliver("low", 2, redelivered=True) + deliver("high", 1, ch=2))
    _, to_client, _, m = run("priority-consumer-halts", stream)
    assert [d.delivery_tag for d in delivered(to_client)] == [1]
    assert m.rewritten == 2
    _, to_client, _, m = run("priority-consumer-halts", consume("x") + consume("y") + deliver("x", 1))
    assert len(delivered(to_client)) == 1 and m.rewritten == 0  # equal priorities: nothing halts


def test_queue_deleted_at_cancel_deletes_an_expiring_queue_and_swallows_the_delete_ok() -> None:
    io = IO()
    stream = (c(commands.Queue.Declare(queue="q", arguments={"x-expires": 600})) + s(commands.Queue.DeclareOk("q", 0, 0))
              + consume("t") + c(commands.Basic.Cancel("t")) + s(commands.Basic.CancelOk("t")) + s(commands.Queue.DeleteOk(2)))
    _, to_client, io, m = run("queue-deleted-at-cancel", stream, io)
    injected = decoded(io.server)
    assert len(injected) == 1 and isinstance(injected[0], commands.Queue.Delete) and injected[0].queue == "q"
    assert not any(isinstance(f, commands.Queue.DeleteOk) for f in decoded(to_client))
    assert m.rewritten == 1
    io = IO()
    stream = (c(commands.Queue.Declare(queue="q")) + consume("t") + c(commands.Basic.Cancel("t")) + s(commands.Basic.CancelOk("t")))
    _, _, io, m = run("queue-deleted-at-cancel", stream, io)
    assert io.server == [] and m.rewritten == 0  # no x-expires: the queue stays
