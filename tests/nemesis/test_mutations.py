"""Mutation operators on synthetic frames (pure rewriting logic), then one through the proxy on a real broker.

Every rewritten stream is re-split by the wire codec: a mutation must keep frames valid, or the client
library would crash instead of observing a faulty broker.
"""

from __future__ import annotations

import struct
import subprocess
from typing import Any, Callable

import pytest
from pamqp import body as pbody
from pamqp import commands
from pamqp import frame as pframe
from pamqp import header as pheader

from adapters.amqp091.wire import Amqp091Codec
from adapters.amqp10.wire import Amqp10Codec
from conformance.errors import UsageError
from conformance.nemesis import mutations
from conformance.nemesis.faults import Sender
from conformance.nemesis.mutations import Probe, available, expectations, make
from conformance.nemesis.wire import Frame
from tests.conftest import conformance_cmd

C, S = Sender.CLIENT, Sender.SERVER


class IO:
    """Records what an operator writes around the stream."""

    def __init__(self) -> None:
        self.conn = 1
        self.server: list[bytes] = []
        self.client: list[bytes] = []
        self.notes: list[str] = []
        self.timers: list[Callable[[], None]] = []

    def to_server(self, raws: list[bytes]) -> None:
        self.server += raws

    def to_client(self, raws: list[bytes]) -> None:
        self.client += raws

    def note(self, text: str) -> None:
        self.notes.append(text)

    def later(self, delay_s: float, fn: Callable[[], None]) -> None:
        self.timers.append(fn)


def frames091(*values: tuple[Any, int]) -> list[Frame]:
    data = b"".join(pframe.marshal(v, ch) for v, ch in values)
    return Amqp091Codec().feed(data)


def decoded(raws: list[bytes]) -> list[Any]:
    """Re-split the output with the codec (proves valid framing) and decode each frame."""
    return [pframe.unmarshal(f.raw)[2] for f in Amqp091Codec().feed(b"".join(raws))]


def run(spec: str, stream: list[tuple[Sender, Frame]], io: IO | None = None) -> tuple[list[bytes], list[bytes], IO, Any]:
    io = io or IO()
    m = make(spec)
    op = m.mutator(io)
    to_server: list[bytes] = []
    to_client: list[bytes] = []
    for sender, f in stream:
        out = op.rewrite(sender, f)
        out = [f.raw] if out is None else out
        (to_server if sender is C else to_client).extend(out)
    return to_server, to_client, io, m


def deliver(tag: int, redelivered: bool = False, body: bytes = b"hello", ch: int = 1, mid: str = "m1") -> list[Frame]:
    props = commands.Basic.Properties(message_id=mid)
    return frames091((commands.Basic.Deliver("ctag", tag, redelivered, "", "q"), ch),
                     (pheader.ContentHeader(0, len(body), props), ch), (pbody.ContentBody(body), ch))


def test_every_operator_declares_what_it_breaks() -> None:
    declared = expectations()
    assert {m.name for m in available()} == set(declared)
    # the core's two protocols, plus any an installed plugin brings (the STOMP package)
    assert {m.protocol for m in available()} >= {"amqp-0-9-1", "amqp-1.0"}


def test_unknown_mutation_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="unknown mutation 'nope'"):
        make("nope")


def test_cli_refuses_an_unknown_mutation_in_one_line() -> None:
    proc = subprocess.run(conformance_cmd("run", "--target", "amqp://127.0.0.1:1/", "--mutation", "nope"), capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [proc.stderr.strip()] and "unknown mutation 'nope'" in proc.stderr


def test_redelivered_cleared_rewrites_only_redeliveries_and_keeps_the_stream_valid() -> None:
    stream = [(S, f) for f in deliver(1, False) + deliver(2, True)]
    _, to_client, io, m = run("redelivered-cleared", stream)
    out = decoded(to_client)
    assert [type(v).__name__ for v in out] == ["Deliver", "ContentHeader", "ContentBody"] * 2
    assert [out[0].redelivered, out[3].redelivered] == [False, False]
    assert m.rewritten == 1 and "redelivered True -> False" in io.notes[0]


def test_ack_operators_flip_multiple_and_drop() -> None:
    acks = frames091((commands.Basic.Ack(5, True), 1), (commands.Basic.Ack(6, False), 1))
    to_server, *_ = run("ack-multiple-cleared", [(C, f) for f in acks])
    assert [(a.delivery_tag, a.multiple) for a in decoded(to_server)] == [(5, False), (6, False)]
    to_server, *_ = run("ack-multiple-set", [(C, f) for f in acks])
    assert [(a.delivery_tag, a.multiple) for a in decoded(to_server)] == [(5, True), (6, True)]
    to_server, *_ = run("multiple-acks-dropped", [(C, f) for f in acks])
    assert [(a.delivery_tag, a.multiple) for a in decoded(to_server)] == [(6, False)]
    to_server, *_ = run("acks-dropped", [(C, f) for f in acks])
    assert to_server == []


def test_requeue_flips_on_nack_and_reject() -> None:
    frames = frames091((commands.Basic.Nack(1, False, True), 1), (commands.Basic.Reject(2, False), 1))
    to_server, *_ = run("requeue-cleared", [(C, f) for f in frames])
    assert [v.requeue for v in decoded(to_server)] == [False, False]
    to_server, *_ = run("requeue-set", [(C, f) for f in frames])
    assert [v.requeue for v in decoded(to_server)] == [True, True]


def test_argument_stripped_takes_a_parameter() -> None:
    declare = frames091((commands.Queue.Declare(queue="q", durable=True, arguments={"x-delivery-limit": 2, "x-max-length": 5}), 1))
    to_server, *_ = run("argument-stripped", [(C, f) for f in declare])
    assert decoded(to_server)[0].arguments == {"x-max-length": 5}
    to_server, _, _, m = run("argument-stripped:x-max-length", [(C, f) for f in declare])
    assert decoded(to_server)[0].arguments == {"x-delivery-limit": 2} and m.spec == "argument-stripped:x-max-length"


def test_tx_bypassed_answers_for_the_broker() -> None:
    frames = frames091((commands.Tx.Select(), 1), (commands.Tx.Commit(), 1))
    to_server, _, io, _ = run("tx-bypassed", [(C, f) for f in frames])
    assert to_server == []
    assert [type(v).__name__ for v in decoded(io.client)] == ["SelectOk", "CommitOk"]


def test_purge_swallowed_answers_for_the_broker_and_purges_nothing() -> None:
    frames = frames091((commands.Queue.Purge(queue="q"), 1), (commands.Basic.Get(queue="q"), 1))
    to_server, _, io, m = run("purge-swallowed", [(C, f) for f in frames])
    assert [type(v).__name__ for v in decoded(to_server)] == ["Get"]  # only the purge is kept from the broker
    replies = decoded(io.client)
    assert [type(v).__name__ for v in replies] == ["PurgeOk"] and replies[0].message_count == 0


def test_tx_commit_rolls_back_renames_the_reply() -> None:
    stream = [(C, f) for f in frames091((commands.Tx.Commit(), 3))] + [(S, f) for f in frames091((commands.Tx.RollbackOk(), 3))]
    to_server, to_client, *_ = run("tx-commit-rolls-back", stream)
    assert [type(v).__name__ for v in decoded(to_server)] == ["Rollback"]
    assert [type(v).__name__ for v in decoded(to_client)] == ["CommitOk"]


def test_delivery_duplicated_keeps_tags_consistent_for_the_broker() -> None:
    stream = [(S, f) for f in deliver(1) + deliver(2, mid="m2")]
    io = IO()
    m = make("delivery-duplicated")
    op = m.mutator(io)
    to_client: list[bytes] = []
    for _, f in stream:
        out = op.rewrite(S, f)
        to_client += [f.raw] if out is None else out
    out = decoded(to_client)
    tags = [v.delivery_tag for v in out if isinstance(v, commands.Basic.Deliver)]
    assert tags[0] == 1 and tags[1] > 2 and tags[2] == 2
    fresh = tags[1]
    acks = frames091((commands.Basic.Ack(fresh, False), 1), (commands.Basic.Ack(1, False), 1), (commands.Basic.Ack(2, False), 1))
    to_server: list[bytes] = []
    for f in acks:
        r = op.rewrite(C, f)
        to_server += [f.raw] if r is None else r
    # the copy's ack reaches the broker as tag 1; the original's ack (now a double ack) is dropped
    assert [a.delivery_tag for a in decoded(to_server)] == [1, 2]


def test_delivery_swallowed_acks_the_lost_redelivery_to_the_broker() -> None:
    consume = frames091((commands.Basic.Consume(queue="q", consumer_tag="ctag", no_ack=False), 1))
    stream = [(C, f) for f in consume] + [(S, f) for f in deliver(1) + deliver(2, True, mid="m2") + deliver(3, True, mid="m3")]
    _, to_client, io, _ = run("delivery-swallowed", stream)
    assert [v.delivery_tag for v in decoded(to_client) if isinstance(v, commands.Basic.Deliver)] == [1, 3]
    assert [(a.delivery_tag, a.multiple) for a in decoded(io.server)] == [(2, False)]


def test_deliveries_reordered_swaps_the_first_redelivery_with_the_next() -> None:
    stream = [(S, f) for f in deliver(1, True, mid="a") + deliver(2, True, mid="b") + deliver(3, True, mid="c")]
    _, to_client, *_ = run("deliveries-reordered", stream)
    assert [v.delivery_tag for v in decoded(to_client) if isinstance(v, commands.Basic.Deliver)] == [2, 1, 3]


def test_deliveries_reordered_releases_a_lone_redelivery() -> None:
    io = IO()
    _, to_client, io, _ = run("deliveries-reordered", [(S, f) for f in deliver(1, True)], io)
    assert to_client == [] and len(io.timers) == 1
    io.timers[0]()
    assert [type(v).__name__ for v in decoded(io.client)] == ["Deliver", "ContentHeader", "ContentBody"]
    assert "not applied" in io.notes[-1]


def test_confirmed_publish_lost_confirms_it_and_renumbers_the_brokers_confirms() -> None:
    def publish(mid: str, mode: int) -> list[Frame]:
        return frames091((commands.Basic.Publish(exchange="", routing_key="q"), 1),
                         (pheader.ContentHeader(0, 3, commands.Basic.Properties(message_id=mid, delivery_mode=mode)), 1),
                         (pbody.ContentBody(b"abc"), 1))

    stream = [(C, f) for f in frames091((commands.Confirm.Select(), 1)) + publish("t", 1) + publish("p1", 2) + publish("p2", 2) + publish("p3", 2)]
    stream += [(S, f) for f in frames091((commands.Basic.Ack(1, False), 1), (commands.Basic.Ack(2, False), 1), (commands.Basic.Ack(3, False), 1))]
    to_server, to_client, io, _ = run("confirmed-publish-lost", stream)
    published = [v.properties.message_id for v in decoded(to_server) if isinstance(v, pheader.ContentHeader)]
    assert published == ["t", "p1", "p3"]  # the 2nd persistent publish never reaches the broker
    assert [a.delivery_tag for a in decoded(io.client)] == [3]  # ... but the client gets its confirm
    assert [a.delivery_tag for a in decoded(to_client)] == [1, 2, 4]  # broker's 3rd confirm is the client's 4th


def test_tx_publish_dropped_makes_each_commit_partial() -> None:
    def publish(mid: str, ch: int = 1) -> list[Frame]:
        return frames091((commands.Basic.Publish(exchange="", routing_key="q"), ch),
                         (pheader.ContentHeader(0, 3, commands.Basic.Properties(message_id=mid, delivery_mode=2)), ch),
                         (pbody.ContentBody(b"abc"), ch))

    stream = publish("plain") + publish("plain2") + frames091((commands.Tx.Select(), 1)) + publish("a1") + publish("a2") + publish("a3")
    stream += frames091((commands.Tx.Commit(), 1)) + publish("b1") + publish("b2")
    to_server, _, _, m = run("tx-publish-dropped", [(C, f) for f in stream])
    published = [v.properties.message_id for v in decoded(to_server) if isinstance(v, pheader.ContentHeader)]
    assert published == ["plain", "plain2", "a1", "a3", "b1"]  # the 2nd of each transaction, nothing outside one
    assert m.rewritten == 2


def test_torn_publish_is_completed_when_the_client_vanishes() -> None:
    frames = frames091((commands.Basic.Publish(exchange="", routing_key="q"), 1), (pheader.ContentHeader(0, 10, commands.Basic.Properties()), 1),
                       (pbody.ContentBody(b"abcd"), 1))
    io = IO()
    op = make("torn-publish-completed").mutator(io)
    for f in frames:
        assert op.rewrite(C, f) is None
    filler = decoded(op.closing(C))
    assert [len(v.value) for v in filler] == [6]


def test_torn_publish_filler_respects_the_agreed_frame_max() -> None:
    """A body frame the client left half sent never passed the proxy (it forwards whole frames), so
    the filler stands for it whole; it is cut to the frame-max of connection.tune-ok, which the
    broker enforces."""
    frames = frames091((commands.Connection.TuneOk(channel_max=0, frame_max=4096, heartbeat=0), 0),
                       (commands.Basic.Publish(exchange="", routing_key="q"), 1), (pheader.ContentHeader(0, 10000, commands.Basic.Properties()), 1),
                       (pbody.ContentBody(b"a" * 4088), 1))
    op = make("torn-publish-completed").mutator(IO())
    for f in frames:
        assert op.rewrite(C, f) is None
    filler = decoded(op.closing(C))
    assert [len(v.value) for v in filler] == [4088, 1824]
    assert op.closing(C) == []


def test_a_probe_records_which_operators_would_touch_a_named_connection() -> None:
    found: dict[str, set[str]] = {}
    probe_mutation = mutations.Mutation("probe", "amqp-0-9-1", "", Probe)
    probe = Probe(probe_mutation, IO(), None, "amqp-0-9-1", found)
    start_ok = frames091((commands.Connection.StartOk(client_properties={"connection_name": "conformance ACK-SINGLE-ONLY-TAG consumer"}, response="x"), 0))
    for f in start_ok:
        assert probe.rewrite(C, f) is None
    for f in deliver(1, True):
        assert probe.rewrite(S, f) is None  # the stream is never changed
    assert found["redelivered-cleared"] == {"conformance ACK-SINGLE-ONLY-TAG consumer"}
    assert "redelivered-set" not in found


# -- AMQP 1.0 ------------------------------------------------------------------------------------

def transfer10(delivery_id: int, *, first_acquirer: bool | None, delivery_count: int = 0, settled: bool = False, channel: int = 0) -> Frame:
    from proton import Data, Described, uint, ulong

    perf = Data()
    perf.put_object(Described(ulong(0x14), [uint(0), uint(delivery_id), b"\x01", uint(0), settled]))
    body = perf.encode()
    if first_acquirer is not None:
        header = Data()
        header.put_object(Described(ulong(0x70), [True, None, None, first_acquirer, uint(delivery_count)]))
        body += header.encode()
    value = Data()
    value.put_object(Described(ulong(0x77), "payload"))
    body += value.encode()
    raw = struct.pack(">IBBH", 8 + len(body), 2, 0, channel) + body
    return Amqp10Codec().feed(raw)[0]


def header10(raw: bytes) -> list[Any]:
    from proton import Data

    f = Amqp10Codec().feed(raw)[0]  # still one valid frame
    body = f.raw[8:]
    d = Data()
    used = d.decode(body)
    d2 = Data()
    d2.decode(body[used:])
    return list(d2.get_object().value)


def test_first_acquirer_flipped_both_ways_and_inserts_a_missing_header() -> None:
    _, to_client, io, m = run("first-acquirer-flipped", [(S, transfer10(0, first_acquirer=True)), (S, transfer10(1, first_acquirer=None))])
    assert header10(to_client[0])[3] is False
    assert header10(to_client[1])[3] is True
    assert m.rewritten == 2


def test_delivery_count_zeroed_leaves_zero_alone() -> None:
    _, to_client, _, m = run("delivery-count-zeroed", [(S, transfer10(0, first_acquirer=False, delivery_count=2)), (S, transfer10(1, first_acquirer=True))])
    assert int(header10(to_client[0])[4]) == 0 and m.rewritten == 1


def test_settled_early_accepts_at_the_broker_and_drops_the_clients_late_settlement() -> None:
    from proton import Data, Described, uint, ulong

    def perf(code: int, fields: list[Any], channel: int) -> Frame:
        d = Data()
        d.put_object(Described(ulong(code), fields))
        body = d.encode()
        return Amqp10Codec().feed(struct.pack(">IBBH", 8 + len(body), 2, 0, channel) + body)[0]

    begin = perf(0x11, [7, uint(0), uint(100), uint(100)], 3)  # broker's channel 3 answers the client's 7
    stream = [(S, begin), (S, transfer10(4, first_acquirer=True, channel=3)),
              (C, perf(0x15, [True, uint(4), None, True, Described(ulong(0x24), [])], 7))]
    to_server, _, io, _ = run("settled-early", stream)
    assert to_server == []  # the client's own accept is dropped: the delivery is already settled
    injected = Amqp10Codec().feed(b"".join(io.server))
    assert [(f.name, f.channel) for f in injected] == [("disposition", 7)]


# -- through the proxy, on a real broker ----------------------------------------------------------

def test_redelivered_cleared_through_the_proxy_on_a_real_broker(rabbit) -> None:
    import pika

    from conformance.nemesis.proxy_isolated import IsolatedFaultProxy

    with IsolatedFaultProxy.for_url(rabbit.url, mutation="redelivered-cleared") as proxy:
        conn = pika.BlockingConnection(pika.URLParameters(proxy.url(rabbit.url)))
        ch = conn.channel()
        q = ch.queue_declare("", exclusive=True).method.queue
        ch.confirm_delivery()
        ch.basic_publish("", q, b"x")
        first = ch.basic_get(q)[0]
        ch.basic_nack(first.delivery_tag, requeue=True)
        again = ch.basic_get(q)[0]
        conn.close()
        stats = proxy.mutation_stats()
        trace = proxy.trace.render()
    assert first.redelivered is False
    assert again.redelivered is False  # RabbitMQ set it; the mutation cleared it on the wire
    assert stats is not None and stats["rewritten"] == 1
    assert "MUTATION redelivered-cleared: basic.get-ok on channel 1: redelivered True -> False" in trace


def perf10(code: int, fields: list[Any], channel: int = 0) -> Frame:
    from proton import Data, Described, ulong

    d = Data()
    d.put_object(Described(ulong(code), fields))
    body = d.encode()
    return Amqp10Codec().feed(struct.pack(">IBBH", 8 + len(body), 2, 0, channel) + body)[0]


def fields10(raw: bytes) -> list[Any]:
    from adapters.amqp10.mutations import split

    f = Amqp10Codec().feed(raw)[0]
    return split(f.raw)[1]


def test_outcome_swaps_and_dropped_accepts() -> None:
    from proton import Described, uint, ulong

    released = perf10(0x15, [True, uint(1), None, True, Described(ulong(0x26), [])])
    accepted = perf10(0x15, [True, uint(2), None, True, Described(ulong(0x24), [])])
    to_server, *_ = run("released-as-rejected", [(C, released), (C, accepted)])
    assert [int(fields10(r)[4].descriptor) for r in to_server] == [0x25, 0x24]
    to_server, *_ = run("accepts-dropped", [(C, released), (C, accepted)])
    assert [int(fields10(r)[4].descriptor) for r in to_server] == [0x26]


def test_unreliable_made_reliable_rewrites_both_attaches_and_settles_for_the_client() -> None:
    from proton import ubyte, uint

    attach_c = perf10(0x12, ["recv", uint(0), True, ubyte(1), ubyte(0)])
    attach_s = perf10(0x12, ["recv", uint(0), False, ubyte(0), ubyte(0)])
    to_server, to_client, _, m = run("unreliable-made-reliable", [(C, attach_c), (S, attach_s), (S, transfer10(0, first_acquirer=True))])
    assert int(fields10(to_server[0])[3]) == 0  # the broker is asked for an unsettled (reliable) link
    assert int(fields10(to_client[0])[3]) == 1  # the client is told it got the settled link it asked for
    assert fields10(to_client[1])[4] is True  # and the broker's unsettled transfer reaches it settled
    assert Amqp10Codec().feed(to_client[1])[0].name == "transfer" and m.rewritten == 2


def test_a_swallowed_get_ok_is_answered_get_empty() -> None:
    get = frames091((commands.Basic.Get(queue="q", no_ack=False), 1))
    get_ok = frames091((commands.Basic.GetOk(7, True, "", "q", 0), 1), (pheader.ContentHeader(0, 1, commands.Basic.Properties()), 1),
                       (pbody.ContentBody(b"x"), 1))
    _, to_client, io, _ = run("delivery-swallowed", [(C, f) for f in get] + [(S, f) for f in get_ok])
    assert [type(v).__name__ for v in decoded(to_client)] == ["GetEmpty"]
    assert [a.delivery_tag for a in decoded(io.server)] == [7]


def test_argument_refused_closes_the_channel_on_both_sides() -> None:
    declare = frames091((commands.Queue.Declare(queue="q", durable=True, arguments={"x-delivery-limit": 2}), 5))
    stream = [(C, f) for f in declare] + [(S, f) for f in frames091((commands.Channel.CloseOk(), 5))]
    stream += [(C, f) for f in frames091((commands.Channel.CloseOk(), 5))]
    to_server, to_client, io, _ = run("argument-refused", stream)
    assert [(type(v).__name__, v.reply_code) for v in decoded(to_server)] == [("Close", 200)]
    assert [(type(v).__name__, v.reply_code, v.class_id, v.method_id) for v in decoded(io.client)] == [("Close", 406, 50, 10)]
    assert to_client == []  # both close-oks swallowed


def test_qos_operators() -> None:
    qos = frames091((commands.Basic.Qos(prefetch_count=0, global_=False), 1), (commands.Basic.Qos(prefetch_count=3, global_=True), 1))
    to_server, *_ = run("qos-global-flipped", [(C, f) for f in qos])
    assert [q.global_ for q in decoded(to_server)] == [True, False]
    to_server, *_ = run("prefetch-raised", [(C, f) for f in qos])
    assert [q.prefetch_count for q in decoded(to_server)] == [1, 4]


def test_durable_cleared_rewrites_the_clients_transfers_only() -> None:
    to_server, to_client, _, m = run("durable-cleared", [(C, transfer10(0, first_acquirer=False)), (S, transfer10(1, first_acquirer=False))])
    assert header10(to_server[0])[0] is False and header10(to_client[0])[0] is True and m.rewritten == 1


# -- operators for single spec rules (persistence order, basic.get-empty, delivery tags, ...) -------

def persistent_deliver(tag: int, mode: int, mid: str) -> list[Frame]:
    props = commands.Basic.Properties(message_id=mid, delivery_mode=mode)
    return frames091((commands.Basic.Deliver("ctag", tag, False, "", "q"), 1),
                     (pheader.ContentHeader(0, 1, props), 1), (pbody.ContentBody(b"x"), 1))


def test_transient_overtakes_persistent_swaps_only_a_persistent_then_transient_pair() -> None:
    stream = [(S, f) for f in persistent_deliver(1, 1, "m1") + persistent_deliver(2, 2, "m2") + persistent_deliver(3, 1, "m3")
              + persistent_deliver(4, 2, "m4") + persistent_deliver(5, 2, "m5")]
    io = IO()
    _, to_client, io, _ = run("transient-overtakes-persistent", stream, io)
    for fire in io.timers:
        fire()
    tags = [v.delivery_tag for v in decoded(to_client + io.client) if isinstance(v, commands.Basic.Deliver)]
    assert tags == [1, 3, 2, 4, 5]  # m3 (transient) overtook m2 (persistent); m4 and m5 in order


def test_first_get_tag_zeroed_maps_the_clients_settlement_back() -> None:
    get_ok = frames091((commands.Basic.GetOk(1, False, "", "q", 0), 1), (pheader.ContentHeader(0, 1, commands.Basic.Properties()), 1),
                       (pbody.ContentBody(b"x"), 1))
    ack0 = frames091((commands.Basic.Ack(0, False), 1))
    ack_all = frames091((commands.Basic.Ack(0, True), 1))
    to_server, to_client, *_ = run("first-get-tag-zeroed", [(S, f) for f in get_ok] + [(C, f) for f in ack0 + ack_all])
    assert [v.delivery_tag for v in decoded(to_client) if isinstance(v, commands.Basic.GetOk)] == [0]
    assert [(a.delivery_tag, a.multiple) for a in decoded(to_server)] == [(1, False), (0, True)]


def test_first_get_ok_emptied_answers_only_the_first_fresh_get() -> None:
    def get_ok(tag: int, redelivered: bool = False) -> list[Frame]:
        return frames091((commands.Basic.GetOk(tag, redelivered, "", "q", 0), 1),
                         (pheader.ContentHeader(0, 1, commands.Basic.Properties()), 1), (pbody.ContentBody(b"x"), 1))
    _, to_client, *_ = run("first-get-ok-emptied", [(S, f) for f in get_ok(1) + get_ok(2)])
    assert [type(v).__name__ for v in decoded(to_client)] == ["GetEmpty", "GetOk", "ContentHeader", "ContentBody"]


def test_reply_code_shifted_and_exclusive_cleared() -> None:
    close = frames091((commands.Channel.Close(405, "RESOURCE_LOCKED", 50, 10), 1), (commands.Channel.Close(320, "forced", 0, 0), 2))
    _, to_client, *_ = run("reply-code-shifted", [(S, f) for f in close])
    assert [c.reply_code for c in decoded(to_client)] == [406, 320]
    declare = frames091((commands.Queue.Declare(queue="q", exclusive=True), 1), (commands.Basic.Consume(queue="q", exclusive=True), 1))
    to_server, *_ = run("exclusive-cleared", [(C, f) for f in declare])
    assert [v.exclusive for v in decoded(to_server)] == [False, False]


def test_first_delivery_counted_stamps_only_first_deliveries_without_a_count() -> None:
    props = commands.Basic.Properties(headers={"x-delivery-count": 1})
    counted = frames091((commands.Basic.GetOk(3, True, "", "q", 0), 1), (pheader.ContentHeader(0, 2, props), 1), (pbody.ContentBody(b"hi"), 1))
    ret = frames091((commands.Basic.Return(312, "NO_ROUTE", "", "q"), 1), (pheader.ContentHeader(0, 2, commands.Basic.Properties()), 1), (pbody.ContentBody(b"hi"), 1))
    stream = [(S, f) for f in deliver(1, False) + deliver(2, True) + counted + ret]
    _, to_client, io, m = run("first-delivery-counted", stream)
    headers = [(v.properties.headers or {}).get("x-delivery-count") for v in decoded(to_client) if isinstance(v, pheader.ContentHeader)]
    assert headers == [0, None, 1, None]
    assert m.rewritten == 1 and "x-delivery-count 0 added" in io.notes[0]


def test_cancelled_consumer_forgotten_refuses_only_a_cancelled_consumers_tags() -> None:
    ack = lambda tag, multiple=False: frames091((commands.Basic.Ack(tag, multiple), 1))  # noqa: E731
    stream = ([(S, f) for f in deliver(1) + deliver(2)] + [(C, f) for f in ack(1)]
              + [(C, f) for f in frames091((commands.Basic.Cancel("ctag"), 1))]
              + [(S, f) for f in frames091((commands.Basic.CancelOk("ctag"), 1))] + [(C, f) for f in ack(2)]
              + [(S, f) for f in frames091((commands.Channel.CloseOk(), 1))] + [(C, f) for f in frames091((commands.Channel.CloseOk(), 1))])
    to_server, to_client, io, m = run("cancelled-consumer-forgotten", stream)
    sent = decoded(to_server)
    assert [type(v).__name__ for v in sent] == ["Ack", "Cancel", "Close"] and sent[2].reply_code == 200
    refusal = decoded(io.client)
    assert [(type(v).__name__, v.reply_code) for v in refusal] == [("Close", 406)] and "unknown delivery tag 2" in refusal[0].reply_text
    assert [type(v).__name__ for v in decoded(to_client)].count("CloseOk") == 0 and m.rewritten == 1
