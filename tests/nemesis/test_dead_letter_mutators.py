"""The dead-lettering operators (adapters/amqp091/mutators/dead_letter.py) on synthetic frames: what
each drops, rewrites, answers or reorders, and that the stream stays valid."""

from __future__ import annotations

from typing import Any

from pamqp import body as pbody
from pamqp import commands
from pamqp import header as pheader

from conformance.nemesis.faults import Sender
from conformance.nemesis.mutations import make
from conformance.nemesis.wire import Frame
from tests.nemesis.test_mutations import IO, decoded, frames091, run

C, S = Sender.CLIENT, Sender.SERVER


def death(queue: str, reason: str = "rejected", count: int = 1) -> dict[str, Any]:
    return {"queue": queue, "reason": reason, "count": count, "exchange": "", "routing-keys": [queue]}


def message(method: Any, mid: str, headers: dict[str, Any] | None = None, ch: int = 1, body: bytes | None = None) -> list[Frame]:
    body = body if body is not None else mid.encode()
    props = commands.Basic.Properties(message_id=mid, headers=headers)
    return frames091((method, ch), (pheader.ContentHeader(0, len(body), props), ch), (pbody.ContentBody(body), ch))


def deliver(tag: int, mid: str, headers: dict[str, Any] | None = None, redelivered: bool = False, ctag: str = "ctag") -> list[Frame]:
    return message(commands.Basic.Deliver(ctag, tag, redelivered, "", "q"), mid, headers)


def get_ok(tag: int, mid: str, headers: dict[str, Any] | None = None, redelivered: bool = False) -> list[Frame]:
    return message(commands.Basic.GetOk(tag, redelivered, "", "q", 0), mid, headers)


def c(*values: Any, ch: int = 1) -> list[tuple[Sender, Frame]]:
    return [(C, f) for f in frames091(*((v, ch) for v in values))]


def s(*frames: Frame) -> list[tuple[Sender, Frame]]:
    return [(S, f) for f in frames]


def consume(queue: str) -> list[tuple[Sender, Frame]]:
    return c(commands.Basic.Consume(queue=queue, consumer_tag="ctag")) + s(*frames091((commands.Basic.ConsumeOk("ctag"), 1)))


def mids(raws: list[bytes]) -> list[str]:
    return [v.properties.message_id for v in decoded(raws) if isinstance(v, pheader.ContentHeader)]


def test_cycle_dropped_drops_only_a_copy_whose_x_death_names_its_own_queue_and_acks_it() -> None:
    stream = consume("work") + s(*deliver(1, "m1", {"x-death": [death("delay", "expired"), death("work")]}),
                                  *deliver(2, "m2", {"x-death": [death("other")]}), *deliver(3, "m3"))
    to_server, to_client, io, _ = run("dead-letter-cycle-dropped", stream)
    assert mids(to_client) == ["m2", "m3"]
    acks = [v for v in decoded(io.server) if isinstance(v, commands.Basic.Ack)]
    assert [a.delivery_tag for a in acks] == [1], "the dropped copy is acked to the broker: gone for good"


def test_cycle_dropped_answers_a_get_with_get_empty() -> None:
    stream = c(commands.Basic.Get(queue="work")) + s(*get_ok(1, "m1", {"x-death": [death("work")]}))
    _, to_client, _, _ = run("dead-letter-cycle-dropped", stream)
    assert [type(v) for v in decoded(to_client)] == [commands.Basic.GetEmpty]


def test_queue_ttl_ignored_removes_x_message_ttl_and_leaves_passive_declares() -> None:
    stream = c(commands.Queue.Declare(queue="q", arguments={"x-message-ttl": 200, "x-dead-letter-exchange": ""}),
               commands.Queue.Declare(queue="q", passive=True))
    to_server, _, _, _ = run("queue-ttl-ignored", stream)
    declares = decoded(to_server)
    assert declares[0].arguments == {"x-dead-letter-exchange": ""}
    assert declares[1].passive


def test_max_length_ignored_removes_x_max_length_only() -> None:
    to_server, _, _, _ = run("max-length-ignored", c(commands.Queue.Declare(queue="q", arguments={"x-max-length": 2, "x-overflow": "drop-head"})))
    assert decoded(to_server)[0].arguments == {"x-overflow": "drop-head"}


def test_requeued_dead_letter_crash_closes_the_channel_on_reject_false_of_a_redelivery_only() -> None:
    stream = s(*get_ok(1, "m1")) + c(commands.Basic.Reject(1, requeue=False))
    to_server, _, io, _ = run("requeued-dead-letter-crash", stream)
    assert isinstance(decoded(to_server)[-1], commands.Basic.Reject) and not io.client, "a first delivery dies normally"
    stream = s(*get_ok(2, "m1", redelivered=True)) + c(commands.Basic.Nack(2, requeue=True))
    to_server, _, io, _ = run("requeued-dead-letter-crash", stream)
    assert isinstance(decoded(to_server)[-1], commands.Basic.Nack) and not io.client, "a requeue is no death"
    io = IO()
    op = make("requeued-dead-letter-crash").mutator(io)
    outs = [op.rewrite(sender, f) for sender, f in s(*get_ok(2, "m1", redelivered=True)) + c(commands.Basic.Reject(2, requeue=False))]
    close = decoded(io.client)[0]
    assert isinstance(close, commands.Channel.Close) and close.reply_code == 541
    assert isinstance(decoded(outs[-1])[0], commands.Channel.Close), "the broker never sees the reject: m1 goes back"
    assert op.rewrite(C, frames091((commands.Channel.CloseOk(), 1))[0]) == []
    assert op.rewrite(S, frames091((commands.Channel.CloseOk(), 1))[0]) == []


def test_republished_dead_letter_crash_picks_the_message_its_connection_published_with_x_death() -> None:
    publish = [(C, f) for f in message(commands.Basic.Publish(exchange="", routing_key="q"), "m1", {"x-death": [death("q")]})]
    stream = publish + s(*get_ok(5, "m1")) + c(commands.Basic.Reject(5, requeue=False))
    _, _, io, _ = run("republished-dead-letter-crash", stream)
    assert decoded(io.client)[0].reply_code == 541
    plain = [(C, f) for f in message(commands.Basic.Publish(exchange="", routing_key="q"), "m1")]
    _, _, io, _ = run("republished-dead-letter-crash", plain + s(*get_ok(5, "m1")) + c(commands.Basic.Reject(5, requeue=False)))
    assert not io.client, "a message published without x-death dies normally"


def test_headers_stripped_keeps_only_the_x_headers_of_a_dead_letter() -> None:
    headers = {"x-death": [death("q")], "x-first-death-queue": "q", "app": "v", "nested": {"a": 1}}
    _, to_client, _, _ = run("dead-letter-headers-stripped", consume("dlq") + s(*deliver(1, "m1", headers), *deliver(2, "m2", {"app": "v"})))
    kept = [v.properties.headers for v in decoded(to_client) if isinstance(v, pheader.ContentHeader)]
    assert set(kept[0]) == {"x-death", "x-first-death-queue"}
    assert kept[1] == {"app": "v"}, "a message that never died keeps its headers"


def test_dead_letters_reversed_swaps_contents_of_consecutive_maxlen_copies_under_the_same_tags() -> None:
    maxlen = {"x-death": [death("q", "maxlen")]}
    stream = consume("dlq") + s(*deliver(1, "m1", maxlen), *deliver(2, "m2", maxlen), *deliver(3, "m3", maxlen), *deliver(4, "sentinel"))
    _, to_client, io, _ = run("dead-letters-reversed", stream)
    assert mids(to_client) == ["m3", "m2", "m1", "sentinel"]
    tags = [v.delivery_tag for v in decoded(to_client) if isinstance(v, commands.Basic.Deliver)]
    assert tags == [1, 2, 3, 4]
    bodies = [v.value for v in decoded(to_client) if isinstance(v, pbody.ContentBody)]
    assert bodies == [b"m3", b"m2", b"m1", b"sentinel"]


def test_dead_letters_reversed_releases_a_lone_copy_unchanged_on_its_timer() -> None:
    maxlen = {"x-death": [death("q", "maxlen")]}
    _, to_client, io, _ = run("dead-letters-reversed", consume("dlq") + s(*deliver(1, "m1", maxlen)))
    assert mids(to_client) == []
    for fire in io.timers:
        fire()
    assert mids(io.client) == ["m1"]


def test_republished_x_death_ignored_strips_the_death_headers_of_a_publish_only() -> None:
    headers = {"x-death": [death("q")], "x-first-death-queue": "q", "app": "v"}
    publish = [(C, f) for f in message(commands.Basic.Publish(exchange="", routing_key="q"), "m1", headers)]
    to_server, _, _, _ = run("republished-x-death-ignored", publish)
    sent = [v.properties.headers for v in decoded(to_server) if isinstance(v, pheader.ContentHeader)]
    assert sent == [{"app": "v"}]
    _, to_client, _, _ = run("republished-x-death-ignored", consume("dlq") + s(*deliver(1, "m1", headers)))
    got = [v.properties.headers for v in decoded(to_client) if isinstance(v, pheader.ContentHeader)]
    assert set(got[0]) == {"x-death", "x-first-death-queue", "app"}, "deliveries keep their death headers"


def test_repeat_expiry_dropped_drops_only_a_second_expiry() -> None:
    stream = consume("dlq") + s(*deliver(1, "m1", {"x-death": [death("q", "expired", 2)]}),
                                *deliver(2, "m2", {"x-death": [death("q", "expired"), death("w", "rejected", 3)]}))
    _, to_client, io, _ = run("repeat-expiry-dropped", stream)
    assert mids(to_client) == ["m2"]
    assert [a.delivery_tag for a in decoded(io.server) if isinstance(a, commands.Basic.Ack)] == [1]


def test_first_death_exchange_removed_takes_that_header_only_from_dead_letters() -> None:
    headers = {"x-death": [death("q")], "x-first-death-queue": "q", "x-first-death-exchange": "", "app": "v"}
    _, to_client, _, _ = run("first-death-exchange-removed", consume("dlq") + s(*deliver(1, "m1", headers)))
    got = [v.properties.headers for v in decoded(to_client) if isinstance(v, pheader.ContentHeader)]
    assert set(got[0]) == {"x-death", "x-first-death-queue", "app"}
