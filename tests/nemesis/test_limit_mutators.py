"""The delivery-limit, recover and transaction operators (adapters/amqp091/mutators/limits.py) on
synthetic frames: what each forwards, answers and keeps, and that the stream stays valid."""

from __future__ import annotations

from typing import Any

from pamqp import commands

from adapters.amqp091.mutators import limits
from conformance.nemesis.faults import Sender
from conformance.nemesis.mutations import make
from conformance.nemesis.wire import Frame
from tests.nemesis.test_mutations import IO, decoded, deliver, frames091

C, S = Sender.CLIENT, Sender.SERVER


def feed(op: Any, stream: list[tuple[Sender, Frame]]) -> tuple[list[bytes], list[bytes]]:
    to_server: list[bytes] = []
    to_client: list[bytes] = []
    for sender, f in stream:
        out = op.rewrite(sender, f)
        (to_server if sender is C else to_client).extend([f.raw] if out is None else out)
    return to_server, to_client


def fresh(name: str) -> tuple[Any, IO]:
    limits._SHARED.pop(name, None)
    io = IO()
    return make(name).mutator(io), io


def consume(ch: int = 1, queue: str = "q", tag: str = "ctag") -> list[tuple[Sender, Frame]]:
    return [(C, f) for f in frames091((commands.Basic.Consume(queue=queue, consumer_tag=tag), ch))] + \
        [(S, f) for f in frames091((commands.Basic.ConsumeOk(tag), ch))]


def c(*values: Any, ch: int = 1) -> list[tuple[Sender, Frame]]:
    return [(C, f) for f in frames091(*((v, ch) for v in values))]


def s(*frames: Frame) -> list[tuple[Sender, Frame]]:
    return [(S, f) for f in frames]


def test_recover_crashes_closes_the_connection_only_with_deliveries_held_and_requeue_false() -> None:
    op, io = fresh("recover-crashes")
    to_server, _ = feed(op, consume() + s(*deliver(1)) + c(commands.Basic.Recover(requeue=True)))
    assert isinstance(decoded(to_server)[-1], commands.Basic.Recover) and not io.client  # requeue=true passes
    op, io = fresh("recover-crashes")
    to_server, _ = feed(op, consume() + s(*deliver(1)) + c(commands.Basic.Recover(requeue=False)))
    closes = decoded(io.client)
    assert isinstance(closes[0], commands.Connection.Close) and closes[0].reply_code == 541
    assert isinstance(decoded(to_server)[-1], commands.Connection.Close)  # the broker never sees the recover
    assert feed(op, s(*frames091((commands.Connection.CloseOk(), 0))))[1] == []  # the handshake is swallowed
    op, io = fresh("recover-crashes")
    feed(op, consume() + c(commands.Basic.Recover(requeue=False)))
    assert not io.client, "nothing held: nothing to redeliver, no crash"


def test_tx_ack_all_crashes_only_in_a_transaction_with_nothing_outstanding() -> None:
    op, io = fresh("tx-ack-all-crashes")
    feed(op, c(commands.Basic.Ack(0, multiple=True)))
    assert not io.client, "outside a transaction the ack-all is a no-op"
    op, io = fresh("tx-ack-all-crashes")
    feed(op, consume() + s(*deliver(1)) + c(commands.Tx.Select(), commands.Basic.Ack(0, multiple=True)))
    assert not io.client, "with a delivery outstanding the ack-all is committed normally"
    op, io = fresh("tx-ack-all-crashes")
    to_server, _ = feed(op, c(commands.Tx.Select(), commands.Basic.Ack(0, multiple=True), commands.Tx.Commit()))
    assert [type(v) for v in decoded(io.client)] == [commands.Connection.Close]
    assert not any(isinstance(v, (commands.Basic.Ack, commands.Tx.Commit)) for v in decoded(to_server))


def test_concurrent_commit_fails_only_the_commit_sent_while_another_is_in_flight() -> None:
    limits._SHARED.pop("concurrent-commit-fails", None)
    m = make("concurrent-commit-fails")
    a_io, b_io = IO(), IO()
    a, b = m.mutator(a_io), m.mutator(b_io)
    feed(a, c(commands.Tx.Select(), commands.Tx.Commit()))
    feed(b, c(commands.Tx.Select(), commands.Tx.Commit()))
    assert not a_io.client and [type(v) for v in decoded(b_io.client)] == [commands.Connection.Close]
    feed(a, s(*frames091((commands.Tx.CommitOk(), 1))))
    c_io = IO()
    feed(m.mutator(c_io), c(commands.Tx.Select(), commands.Tx.Commit()))
    assert not c_io.client, "a commit after the other's commit-ok does not race it"
    d_io = IO()
    feed(m.mutator(d_io), c(commands.Tx.Commit(), ch=2))
    assert not d_io.client, "a commit on a channel never made transactional is the broker's to refuse"


def test_concurrent_commit_fails_holds_the_first_commit_ok_until_a_second_commit_fails() -> None:
    limits._SHARED.pop("concurrent-commit-fails", None)
    m = make("concurrent-commit-fails")
    a_io, b_io = IO(), IO()
    a, b = m.mutator(a_io), m.mutator(b_io)
    feed(b, c(commands.Tx.Select()))
    feed(a, c(commands.Tx.Select(), commands.Tx.Commit()))
    _, to_client = feed(a, s(*frames091((commands.Tx.CommitOk(), 1))))
    assert to_client == [] and not a_io.client, "b could still commit: a's commit-ok is held"
    feed(b, c(commands.Tx.Commit()))
    assert [type(v) for v in decoded(b_io.client)] == [commands.Connection.Close], "commits serialised by the client still race"
    assert [type(v) for v in decoded(a_io.client)] == [commands.Tx.CommitOk], "the first commit is answered once the second failed"
    a_io.timers[0]()
    assert len(decoded(a_io.client)) == 1, "the hold's deadline sends nothing twice"


def test_concurrent_commit_fails_releases_a_lone_commit() -> None:
    limits._SHARED.pop("concurrent-commit-fails", None)
    m = make("concurrent-commit-fails")
    a_io, b_io = IO(), IO()
    a = m.mutator(a_io)
    feed(a, c(commands.Tx.Select(), commands.Tx.Commit()))
    _, to_client = feed(a, s(*frames091((commands.Tx.CommitOk(), 1))))
    assert [type(v) for v in decoded(to_client)] == [commands.Tx.CommitOk], "nobody else in a transaction: nothing held"
    b = m.mutator(b_io)
    feed(b, c(commands.Tx.Select()))
    feed(a, c(commands.Tx.Commit()))
    _, to_client = feed(a, s(*frames091((commands.Tx.CommitOk(), 1))))
    assert to_client == [] and len(a_io.timers) == 1
    a_io.timers[0]()
    assert [type(v) for v in decoded(a_io.client)] == [commands.Tx.CommitOk], "held at most HOLD_S, then answered"
    feed(b, c(commands.Tx.Commit()))
    assert not b_io.client, "a commit after the other's commit-ok does not race it"


def test_delivery_limit_early_removes_the_message_at_its_nth_delivery() -> None:
    op, io = fresh("delivery-limit-early")
    declare = c(commands.Queue.Declare(queue="q", arguments={"x-delivery-limit": 2}))
    to_server, _ = feed(op, declare + consume() + s(*deliver(1)) + c(commands.Basic.Nack(1, requeue=True)))
    assert not io.server and isinstance(decoded(to_server)[-1], commands.Basic.Nack)  # first delivery: left alone
    to_server, to_client = feed(op, s(*deliver(2, True)) + c(commands.Basic.Nack(2, requeue=True)))
    rejected = decoded(io.server)
    assert len(rejected) == 1 and isinstance(rejected[0], commands.Basic.Reject) and not rejected[0].requeue
    assert isinstance(decoded(to_client)[0], commands.Basic.Deliver), "the client still gets the delivery"
    assert to_server == [], "its own return of the removed message is swallowed"


def test_delivery_limit_early_splits_a_multiple_settlement_covering_the_removed_tag() -> None:
    op, io = fresh("delivery-limit-early")
    declare = c(commands.Queue.Declare(queue="q", arguments={"x-delivery-limit": 2}))
    # m1 reaches its limit at its second delivery (tag 2, removed); m2 (tag 3) does not
    feed(op, declare + consume() + s(*deliver(1), *deliver(2, True), *deliver(3, mid="m2")))
    assert [v.delivery_tag for v in decoded(io.server)] == [2]
    to_server, _ = feed(op, c(commands.Basic.Ack(3, multiple=True)))
    assert [(type(v), v.delivery_tag, v.multiple) for v in decoded(to_server)] == [(commands.Basic.Ack, 1, False), (commands.Basic.Ack, 3, False)], \
        "the removed tag 2 never reaches the broker; the others are settled singly"
    op, io = fresh("delivery-limit-early")
    feed(op, declare + consume() + s(*deliver(1), *deliver(2, True), *deliver(3, mid="m2")))
    to_server, _ = feed(op, c(commands.Basic.Nack(2, multiple=True, requeue=True)))
    assert [(type(v), v.delivery_tag, v.multiple, v.requeue) for v in decoded(to_server)] == [(commands.Basic.Nack, 1, False, True)]
    to_server, _ = feed(op, c(commands.Basic.Nack(0, multiple=True, requeue=False)))
    assert [(type(v), v.delivery_tag, v.multiple) for v in decoded(to_server)] == [(commands.Basic.Nack, 0, True)], \
        "nothing removed is covered any more: forwarded unchanged"
    op, io = fresh("delivery-limit-early")
    feed(op, declare + consume() + s(*deliver(1), *deliver(2, True)))
    feed(op, c(commands.Basic.Ack(1)))
    to_server, _ = feed(op, c(commands.Basic.Ack(0, multiple=True)))
    assert to_server == [], "a multiple ack covering only the removed tag is swallowed"


def test_delivery_limit_early_counts_deliveries_over_every_connection_and_ignores_unlimited_queues() -> None:
    limits._SHARED.pop("delivery-limit-early", None)
    m = make("delivery-limit-early")
    admin = m.mutator(IO())
    feed(admin, c(commands.Queue.Declare(queue="q", arguments={"x-delivery-limit": 2})))
    first_io, second_io = IO(), IO()
    feed(m.mutator(first_io), consume() + s(*deliver(1)))
    feed(m.mutator(second_io), consume() + s(*deliver(1, True)))
    assert not first_io.server and len(decoded(second_io.server)) == 1
    other_io = IO()
    feed(m.mutator(other_io), consume(queue="plain") + s(*deliver(1), *deliver(2, True, mid="m1")))
    assert not other_io.server


def test_limit_return_crashes_closes_the_channel_at_the_return_past_the_limit() -> None:
    op, io = fresh("limit-return-crashes")
    feed(op, c(commands.Queue.Declare(queue="q", arguments={"x-delivery-limit": 1})))

    def get_ok(tag: int) -> list[tuple[Sender, Frame]]:
        frames = deliver(tag, tag > 1)
        ok = frames091((commands.Basic.GetOk(tag, tag > 1, "", "q", 0), 1))
        return c(commands.Basic.Get(queue="q")) + s(*ok, *frames[1:])

    to_server, _ = feed(op, get_ok(1) + c(commands.Basic.Reject(1, requeue=True)))
    assert not io.client
    to_server, _ = feed(op, get_ok(2) + c(commands.Basic.Reject(2, requeue=True)))  # the return that drops it at limit 1
    closes = decoded(io.client)
    assert isinstance(closes[0], commands.Channel.Close) and closes[0].reply_code == 541
    sent = decoded(to_server)
    assert isinstance(sent[-1], commands.Channel.Close) and not any(isinstance(v, commands.Basic.Reject) and v.delivery_tag == 2 for v in sent)


def test_recover_skips_gets_keeps_the_get_message_redelivery_from_the_client() -> None:
    op, io = fresh("recover-skips-gets")
    frames = deliver(1, mid="m1")
    get_ok = frames091((commands.Basic.GetOk(1, False, "", "q", 0), 1))
    feed(op, c(commands.Basic.Get(queue="q")) + s(*get_ok, *frames[1:]) + consume() + s(*deliver(2, mid="m2")))
    feed(op, c(commands.Basic.Recover(requeue=True)))
    _, to_client = feed(op, s(*deliver(3, True, mid="m1"), *deliver(4, True, mid="m2")))
    assert [v.delivery_tag for v in decoded(to_client) if isinstance(v, commands.Basic.Deliver)] == [4]


def test_recover_strands_tx_acked_commits_the_rollback_only_after_a_recover_over_tx_acks() -> None:
    op, io = fresh("recover-strands-tx-acked")
    to_server, _ = feed(op, c(commands.Tx.Select()) + consume() + s(*deliver(1)) + c(commands.Basic.Ack(1), commands.Tx.Rollback()))
    assert isinstance(decoded(to_server)[-1], commands.Tx.Rollback), "no recover: the rollback is left alone"
    to_server, _ = feed(op, c(commands.Basic.Ack(1), commands.Basic.Recover(requeue=True), commands.Tx.Rollback()))
    assert isinstance(decoded(to_server)[-1], commands.Tx.Commit)
    _, to_client = feed(op, s(*frames091((commands.Tx.CommitOk(), 1))))
    assert isinstance(decoded(to_client)[0], commands.Tx.RollbackOk)
