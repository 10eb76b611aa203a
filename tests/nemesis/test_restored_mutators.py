"""The operators of what a node restores (adapters/amqp091/mutators/restored.py) on synthetic frames:
a durable queue's delete answered but never done, a publish's priority removed."""

from __future__ import annotations

from typing import Any

from pamqp import body as pbody
from pamqp import commands
from pamqp import header as pheader

from adapters.amqp091.mutators.limits import _SHARED
from conformance.nemesis.faults import Sender
from tests.nemesis.test_mutations import decoded, frames091, run

C, S = Sender.CLIENT, Sender.SERVER


def c(*values: Any, ch: int = 1) -> list[tuple[Sender, Any]]:
    return [(C, f) for f in frames091(*((v, ch) for v in values))]


def s(*values: Any, ch: int = 1) -> list[tuple[Sender, Any]]:
    return [(S, f) for f in frames091(*((v, ch) for v in values))]


def declare(queue: str, durable: bool = True) -> list[tuple[Sender, Any]]:
    return c(commands.Queue.Declare(queue=queue, durable=durable)) + s(commands.Queue.DeclareOk(queue, 0, 0))


def publish(priority: int | None, mid: str = "m1") -> list[tuple[Sender, Any]]:
    body = mid.encode()
    return [(C, f) for f in frames091((commands.Basic.Publish(exchange="", routing_key="q"), 1),
                                      (pheader.ContentHeader(0, len(body), commands.Basic.Properties(message_id=mid, priority=priority)), 1),
                                      (pbody.ContentBody(body), 1))]


def test_queue_delete_ignored_answers_a_durable_queues_delete_with_its_message_count_and_keeps_it() -> None:
    _SHARED.pop("queue-delete-ignored", None)
    stream = (declare("d") + c(commands.Queue.Delete(queue="d"))
              + s(commands.Queue.DeclareOk("d", 2, 0)))  # the broker's answer to the passive declare sent in its place
    to_server, to_client, _, m = run("queue-delete-ignored", stream)
    sent = decoded(to_server)
    assert not any(isinstance(f, commands.Queue.Delete) for f in sent)
    assert isinstance(sent[-1], commands.Queue.Declare) and sent[-1].passive and sent[-1].queue == "d"
    answers = decoded(to_client)
    assert isinstance(answers[-1], commands.Queue.DeleteOk) and answers[-1].message_count == 2
    assert m.rewritten == 1


def test_queue_delete_ignored_leaves_transient_and_unknown_queues_and_later_declare_oks_alone() -> None:
    _SHARED.pop("queue-delete-ignored", None)
    stream = (declare("t", durable=False) + c(commands.Queue.Delete(queue="t")) + s(commands.Queue.DeleteOk(0))
              + c(commands.Queue.Delete(queue="never-declared")) + s(commands.Queue.DeleteOk(0)) + declare("d2"))
    to_server, to_client, _, m = run("queue-delete-ignored", stream)
    assert sum(isinstance(f, commands.Queue.Delete) for f in decoded(to_server)) == 2
    assert [type(f).__name__ for f in decoded(to_client)] == ["DeclareOk", "DeleteOk", "DeleteOk", "DeclareOk"]
    assert m.rewritten == 0


def test_queue_delete_ignored_knows_a_queue_declared_durable_on_another_connection() -> None:
    _SHARED.pop("queue-delete-ignored", None)
    run("queue-delete-ignored", declare("d"))
    to_server, to_client, _, m = run("queue-delete-ignored", c(commands.Queue.Delete(queue="d", nowait=True)))
    [sent] = decoded(to_server)
    assert isinstance(sent, commands.Queue.Declare) and sent.passive and sent.nowait  # no answer owed: none expected
    assert to_client == [] and m.rewritten == 1


def test_priority_cleared_removes_the_priority_of_each_publish_only() -> None:
    to_server, _, _, m = run("priority-cleared", publish(9) + publish(0, "m2") + publish(None, "m3"))
    headers = [f for f in decoded(to_server) if isinstance(f, pheader.ContentHeader)]
    assert [h.properties.priority for h in headers] == [None, None, None]
    assert [h.properties.message_id for h in headers] == ["m1", "m2", "m3"]
    assert m.rewritten == 2
