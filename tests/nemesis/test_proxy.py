"""The fault proxy against a real broker: frame-exact faults, traces, and bad input.

Cut-at-frame faults must hit the intended frame every time (the trace shows the fault note right
after that frame and nothing of the connection after it is forwarded); garbage, truncated frames and
vanishing peers close only their own connection and are reported.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
import uuid

import pytest

from adapters.amqp091.pika_adapter import PikaAdapter
from adapters.amqp091.wire import Amqp091Codec
from adapters.amqp10.wire import Amqp10Codec
from adapters.rabbitmq.launcher import RabbitMQLocalNode
from conformance.api import QueueSpec
from conformance.errors import ConnectionLost
from conformance.nemesis.faults import Action, Fault, Moment, Sender, cut
from conformance.nemesis.proxy import FaultProxy, ProxyBase, first_half
from conformance.nemesis.proxy_isolated import IsolatedFaultProxy
from conformance.nemesis.wire import MalformedFrame

KINDS = {"thread": FaultProxy, "process": IsolatedFaultProxy}


@pytest.fixture(params=sorted(KINDS))
def kind(request: pytest.FixtureRequest) -> type[ProxyBase]:
    """Every proxy test runs on both relays: the in-thread one and the isolated one cases use."""
    return KINDS[request.param]


@pytest.fixture
def proxy(rabbit: RabbitMQLocalNode, kind: type[ProxyBase]):  # type: ignore[no-untyped-def]
    with kind.for_url(rabbit.url) as p:
        yield p


def queue(session) -> str:  # type: ignore[no-untyped-def]
    name = f"proxy-test-{uuid.uuid4().hex[:8]}"
    session.declare_queue(QueueSpec(name=name, durable=False, auto_delete=True))
    return name


def frames_then_fault(p: ProxyBase) -> tuple[list[str], list[str]]:
    entries = p.trace.entries()
    i = next(i for i, e in enumerate(entries) if e.note.startswith("FAULT"))
    return [e.name for e in entries[:i] if not e.note], [e.name for e in entries[i + 1 :] if not e.note]


@pytest.mark.parametrize("nth", [1, 2, 5])
def test_cut_before_the_nth_commit_hits_that_frame(rabbit: RabbitMQLocalNode, proxy: ProxyBase, nth: int) -> None:
    session = PikaAdapter().connect(proxy.url(rabbit.url)).session()
    q = queue(session)
    session.select_tx()
    fault = proxy.arm(cut("tx.commit", nth=nth))
    with pytest.raises(ConnectionLost):
        for i in range(nth):
            session.publish(q, b"x", message_id=f"m{i}")
            session.commit()
    assert fault.wait(5) and fault.hit is not None and " tx.commit on channel 1" in fault.hit
    before, _ = frames_then_fault(proxy)
    assert before[-1] == "tx.commit" and before.count("tx.commit") == nth
    assert before.count("tx.commit-ok") == nth - 1, "the held-back commit was never answered"
    assert any("not forwarded" in n or "FAULT cut" in n for n in proxy.trace.notes())


def test_cut_after_forwarding_relays_nothing_more(rabbit: RabbitMQLocalNode, proxy: ProxyBase) -> None:
    """'After' means the broker's TCP stack has the frame and the client sees no reply to it."""
    session = PikaAdapter().connect(proxy.url(rabbit.url)).session()
    q = queue(session)
    session.select_tx()
    session.publish(q, b"x", message_id="m1")
    fault = proxy.arm(cut("tx.commit", after=True))
    with pytest.raises(ConnectionLost):
        session.commit()
    assert fault.wait(5)
    check = PikaAdapter().connect(rabbit.url).session()
    assert check.queue_stats(q).ready in (0, 1)
    _, after = frames_then_fault(proxy)
    # commit-ok may have been read from the broker, but it is never relayed to the client
    assert all(name == "tx.commit-ok" for name in after)


def test_a_fault_inside_a_frame_forwards_half_of_it_and_nothing_more(rabbit: RabbitMQLocalNode, kind: type[ProxyBase]) -> None:
    """'Inside' leaves the peer holding part of a frame: a second proxy in front of the broker sees
    the connection close that many bytes into the body frame (half of it, never its end)."""
    with FaultProxy.for_url(rabbit.url) as inner, kind(("127.0.0.1", inner.port)) as outer:
        session = PikaAdapter().connect(outer.url(rabbit.url)).session()
        q = queue(session)
        session.enable_confirms()
        fault = outer.arm(Fault(Action.FIN, "content-body", Sender.CLIENT, moment=Moment.INSIDE))
        with pytest.raises(ConnectionLost):
            session.publish(q, b"x" * 1000, message_id="m1")
        assert fault.wait(5) and "content-body" in (fault.hit or "")
        assert any("after forwarding half of it" in n for n in outer.trace.notes())
        wait_errors(inner, 1)
        assert "client closed the connection 504 bytes into a frame" in inner.errors[0]  # 1008-byte frame
        assert PikaAdapter().connect(rabbit.url).session().queue_stats(q).ready == 0


def test_server_frame_fault_and_nth_delivery(rabbit: RabbitMQLocalNode, proxy: ProxyBase) -> None:
    direct = PikaAdapter().connect(rabbit.url).session()
    q = queue(direct)
    direct.enable_confirms()
    for i in range(5):
        direct.publish(q, b"x", message_id=f"m{i}")
    session = PikaAdapter().connect(proxy.url(rabbit.url)).session()
    fault = proxy.arm(Fault(Action.CUT, "basic.deliver", Sender.SERVER, nth=3))
    got: list[str | None] = []
    with pytest.raises(ConnectionLost):
        consumer = session.consume(q, prefetch=10)
        while True:
            got.append(consumer.next(5).message_id)
    assert fault.wait(5) and fault.hit is not None and "frame" in fault.hit
    before, _ = frames_then_fault(proxy)
    assert before.count("basic.deliver") == 3 and before[-1] == "basic.deliver"
    # pika may drop deliveries it had buffered when the reset arrived, never invent later ones
    assert got == ["m0", "m1"][: len(got)]


def test_stall_is_ended_by_the_adapter_watchdog(rabbit: RabbitMQLocalNode, proxy: ProxyBase) -> None:
    session = PikaAdapter().connect(proxy.url(rabbit.url), op_timeout=1.0).session()
    proxy.arm(Fault(Action.STALL, "basic.consume-ok", Sender.SERVER))
    q = queue(session)
    start = time.monotonic()
    with pytest.raises(ConnectionLost, match="basic.consume: no basic.consume-ok within 1s"):
        session.consume(q)
    assert time.monotonic() - start < 10


def test_drop_and_delay(rabbit: RabbitMQLocalNode, proxy: ProxyBase) -> None:
    session = PikaAdapter().connect(proxy.url(rabbit.url), op_timeout=1.0).session()
    delay = proxy.arm(Fault(Action.DELAY, "queue.declare-ok", Sender.SERVER, delay_s=0.2))
    start = time.monotonic()
    queue(session)
    assert time.monotonic() - start >= 0.2
    assert delay.wait(5), "an isolated proxy reports the fault over its pipe, which may trail the frame"
    proxy.arm(Fault(Action.DROP, "channel.open-ok", Sender.SERVER, moment=Moment.BEFORE))
    with pytest.raises(ConnectionLost):
        session_conn = PikaAdapter().connect(proxy.url(rabbit.url), op_timeout=1.0)
        session_conn.session()


def test_trace_decodes_and_redacts(rabbit: RabbitMQLocalNode, proxy: ProxyBase) -> None:
    session = PikaAdapter().connect(proxy.url(rabbit.url)).session()
    queue(session)
    text = proxy.trace.render()
    assert "connection.start-ok" in text and "response=***" in text
    assert rabbit.password not in text
    assert "queue.declare-ok" in text and "C->S" in text and "S->C" in text


def raw_client(p: ProxyBase) -> socket.socket:
    return socket.create_connection(("127.0.0.1", p.port), timeout=5)


def closed(s: socket.socket) -> bool:
    try:
        return s.recv(4096) == b""
    except ConnectionResetError:
        return True


def wait_errors(p: ProxyBase, n: int) -> None:
    end = time.monotonic() + 5
    while len(p.errors) < n and time.monotonic() < end:
        time.sleep(0.01)  # allowed: polling the proxy's error list with a deadline


def test_garbage_closes_only_that_connection(rabbit: RabbitMQLocalNode, proxy: ProxyBase) -> None:
    good = PikaAdapter().connect(proxy.url(rabbit.url)).session()
    s = raw_client(proxy)
    s.sendall(b"GET / HTTP/1.1\r\n\r\n")
    assert closed(s)
    wait_errors(proxy, 1)
    assert "not an AMQP protocol header" in proxy.errors[0]
    queue(good)  # the other connection still works


def test_bad_frame_after_handshake_is_reported(rabbit: RabbitMQLocalNode, proxy: ProxyBase) -> None:
    s = raw_client(proxy)
    s.sendall(b"AMQP\x00\x00\x09\x01")
    s.recv(4096)  # connection.start
    s.sendall(struct.pack(">BHI", 1, 0, 4) + b"\x00\x0a\x00\x0b" + b"\x00")  # bad frame-end byte
    assert closed(s)
    wait_errors(proxy, 1)
    assert "frame end" in proxy.errors[0]


def test_truncated_frame_and_vanishing_peer(rabbit: RabbitMQLocalNode, proxy: ProxyBase) -> None:
    s = raw_client(proxy)
    s.sendall(b"AMQP\x00\x00\x09\x01")
    s.recv(4096)
    s.sendall(struct.pack(">BHI", 1, 0, 100) + b"\x00\x0a")  # 6 of 108 bytes, then gone
    s.close()
    wait_errors(proxy, 1)
    assert "truncated" in proxy.errors[0]
    s2 = raw_client(proxy)
    s2.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s2.sendall(b"AMQP\x00\x00\x09\x01")
    s2.close()  # RST
    assert PikaAdapter().connect(proxy.url(rabbit.url)).session() is not None


def test_unreachable_broker_is_reported(kind: type[ProxyBase]) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with kind(("127.0.0.1", port)) as p:
        s = raw_client(p)
        assert closed(s)
        wait_errors(p, 1)
        assert "unreachable" in p.errors[0]


def test_codecs_split_frames_across_reads() -> None:
    from pamqp import commands, frame

    raw = b"AMQP\x00\x00\x09\x01" + frame.marshal(commands.Tx.Commit(), 1) + frame.marshal(commands.Basic.Ack(7, True), 1)
    codec = Amqp091Codec()
    names = [f.name for i in range(0, len(raw), 3) for f in codec.feed(raw[i : i + 3])]
    assert names == ["protocol-header", "tx.commit", "basic.ack"] and codec.pending == 0
    with pytest.raises(MalformedFrame):
        Amqp091Codec().feed(struct.pack(">BHI", 9, 0, 0) + b"\xce")
    # AMQP 1.0: SASL header, then an empty frame and an open performative (descriptor 0x10)
    open_body = b"\x00\x53\x10\x45"  # described(smallulong 0x10, list0)
    amqp10 = b"AMQP\x03\x01\x00\x00" + struct.pack(">IBBH", 8, 2, 0, 0) + struct.pack(">IBBH", 8 + len(open_body), 2, 0, 0) + open_body
    c10 = Amqp10Codec()
    assert [f.name for i in range(len(amqp10)) for f in c10.feed(amqp10[i : i + 1])] == ["protocol-header", "empty", "open"]
    with pytest.raises(MalformedFrame):
        Amqp10Codec().feed(struct.pack(">IBBH", 4, 2, 0, 0))


def test_isolated_proxy_keeps_trace_errors_and_counts_after_close(rabbit: RabbitMQLocalNode) -> None:
    """Reports read the trace after the case closed its proxies: the isolated proxy keeps a copy."""
    p = IsolatedFaultProxy.for_url(rabbit.url).start()
    session = PikaAdapter().connect(p.url(rabbit.url)).session()
    q = queue(session)
    fault = p.arm(cut("basic.publish"))
    with pytest.raises(ConnectionLost):
        session.publish(q, b"x", message_id="m0")
        session.declare_queue(QueueSpec(name=q, durable=False, auto_delete=True))
    assert fault.wait(5) and "basic.publish" in (fault.hit or "")
    s = raw_client(p)
    s.sendall(b"garbage!")
    assert closed(s)
    wait_errors(p, 1)
    p.close()
    assert p.connections == 2 and "not an AMQP protocol header" in p.errors[0]
    assert "FAULT cut on 1st basic.publish" in p.trace.render() and p.trace.total > 10
    assert p.trace.frames(conn=1)[-1] == "basic.publish"


def test_isolated_proxy_refuses_a_chain_it_cannot_see_and_reports_its_own_death(rabbit: RabbitMQLocalNode) -> None:
    from conformance.nemesis.proxy_isolated import ProxyProcessError

    with IsolatedFaultProxy.for_url(rabbit.url) as a, IsolatedFaultProxy.for_url(rabbit.url) as b:
        first = a.arm(cut("tx.commit"))
        with pytest.raises(ValueError, match="not armed on this proxy"):
            b.arm(cut("tx.commit-ok", sender=Sender.SERVER, following=first))
        b.arm(cut("tx.commit-ok", sender=Sender.SERVER, following=b.arm(cut("tx.commit"))))
        a._process.kill()
        a._process.join(5)
        with pytest.raises(ProxyProcessError, match="exited|unreachable"):
            end = time.monotonic() + 5
            while time.monotonic() < end:  # the reader notices EOF right after the kill
                a.arm(cut("tx.commit"))


def test_amqp10_frames_through_the_proxy_are_named_cut_and_redacted(rabbit: RabbitMQLocalNode, proxy: ProxyBase) -> None:
    """Real AMQP 1.0 traffic (python-qpid-proton against RabbitMQ's AMQP 1.0 plugin), not synthetic
    frames: SASL, open/begin/attach/flow/transfer/disposition are named, a cut on the 2nd transfer
    hits it, and the SASL PLAIN response (the password) never reaches the trace."""
    from urllib.parse import urlsplit

    from proton import Message
    from proton.utils import BlockingConnection

    u = urlsplit(proxy.url(rabbit.url))
    address = f"/queue/proxy10-{uuid.uuid4().hex[:8]}"
    conn = BlockingConnection(f"amqp://{u.username}:{u.password}@127.0.0.1:{u.port}", timeout=5, allowed_mechs="PLAIN")
    receiver = conn.create_receiver(address, credit=10)
    sender = conn.create_sender(address)
    fault = proxy.arm(cut("transfer", nth=2))  # frames are counted from arming on
    sender.send(Message(body="one", id="m1"))
    assert receiver.receive(timeout=5).id == "m1"
    receiver.accept()
    with pytest.raises(Exception):  # proton reports the reset as a ConnectionException or a timeout
        sender.send(Message(body="two", id="m2"), timeout=5)
    assert fault.wait(5) and fault.hit is not None and " transfer on channel" in fault.hit
    client, server = proxy.trace.frames(sender="client"), proxy.trace.frames(sender="server")
    assert client[:2] == ["protocol-header", "sasl-init"] and server[:2] == ["protocol-header", "sasl-mechanisms"]
    assert {"open", "begin", "attach", "flow", "transfer"} <= set(client)
    assert {"sasl-outcome", "open", "begin", "attach", "flow", "transfer", "disposition"} <= set(server)
    before, after = frames_then_fault(proxy)
    assert before[-1] == "transfer" and not [f for f in after if f == "transfer"], "nothing after the cut frame"
    text = proxy.trace.render()
    assert u.password and u.password not in text and "***" in text
    # fields read as the spec writes them: names for roles and outcomes, tags in hex
    assert "delivery-id=0 delivery-tag=0x" in text and "state=accepted" in text and "role=receiver" in text, text[-2000:]
    assert "mechanism='PLAIN' initial-response=***" in text
    try:
        conn.close()
    except Exception:
        pass


def test_inside_a_frame_is_half_of_it_and_never_a_delay() -> None:
    assert first_half(b"0123456789") == b"01234" and first_half(b"ab") == b"a"
    assert "after forwarding half of it" in Fault(Action.CUT, "content-body", moment=Moment.INSIDE).describe()
    with pytest.raises(ValueError, match="whole frames"):
        Fault(Action.DELAY, "content-body", moment=Moment.INSIDE, delay_s=1)


def test_a_fault_on_a_frame_the_protocol_does_not_have_is_unsupported_when_armed() -> None:
    """A scenario written in 0-9-1 frames cannot be put to an AMQP 1.0 broker: the case is
    unsupported (cannot-express) at once, not an error after waiting for a frame that never comes."""
    from conformance.errors import Unsupported

    proxy = FaultProxy(("127.0.0.1", 1))
    proxy.protocol = "amqp-1.0"
    with pytest.raises(Unsupported) as exc:
        proxy.arm(Fault(Action.CUT, "tx.commit-ok", Sender.SERVER))
    assert exc.value.kind == "cannot-express" and "'tx.commit-ok', which amqp-1.0 does not have" in str(exc.value)
    first = Fault(Action.CUT, "disposition", Sender.SERVER)
    with pytest.raises(Unsupported):  # a fault it follows counts too
        proxy.arm(Fault(Action.CUT, "basic.deliver", Sender.SERVER, following=first))
    for ok in (first, Fault(Action.STALL, "*"), Fault(Action.CUT, "transfer", Sender.SERVER)):
        assert proxy.arm(ok) is ok
    proxy.protocol = "amqp-0-9-1"
    assert proxy.arm(Fault(Action.CUT, "tx.commit-ok", Sender.SERVER)).frame == "tx.commit-ok"
    proxy.protocol = None  # a proxy that does not know its protocol checks nothing
    assert proxy.arm(Fault(Action.CUT, "no-such-frame")).frame == "no-such-frame"


def test_a_delay_is_struck_before_it_has_fired(rabbit: RabbitMQLocalNode, proxy: ProxyBase) -> None:
    """`struck` marks the start of the fault's act (a case acts while the peer is held), `fired` its end."""
    session = PikaAdapter().connect(proxy.url(rabbit.url), op_timeout=2.0).session()
    hold = proxy.arm(Fault(Action.DELAY, "queue.declare-ok", Sender.SERVER, delay_s=0.5))
    done = threading.Thread(target=queue, args=(session,), daemon=True)
    done.start()
    assert hold.struck.wait(5), "the hold began"
    assert not hold.fired.is_set(), "fired only once the hold is over"
    assert hold.wait(5) and hold.hit and "queue.declare-ok" in hold.hit
    done.join(5)


def test_a_hold_until_a_frame_spans_that_frame_however_late_it_comes(rabbit: RabbitMQLocalNode, proxy: ProxyBase) -> None:
    """A delay with ``until`` holds the broker's deliveries until the client's basic.cancel has passed
    (not for a guessed time), so the broker gets the cancel while its delivery is still held; the
    bound only ends a hold whose frame never comes, and the hit says which ended it."""
    publisher = PikaAdapter().connect(rabbit.url).session()
    q = queue(publisher)
    session = PikaAdapter().connect(proxy.url(rabbit.url), op_timeout=5.0).session()
    hold = proxy.arm(Fault(Action.DELAY, "basic.deliver", Sender.SERVER, delay_s=30, until=("basic.cancel",)))
    assert "until basic.cancel from the client passed (at most 30s)" in hold.describe()
    consumer = session.consume(q, prefetch=1)
    publisher.publish(q, b"held", message_id="m1")
    assert hold.struck.wait(5), "the delivery is held"
    time.sleep(0.5)  # allowed: a client slower than any fixed hold the case could have guessed
    assert not hold.fired.is_set(), "still held: no basic.cancel yet"
    start = time.monotonic()
    consumer.cancel()
    assert time.monotonic() - start < 10 and hold.wait(5) and hold.held_to_event, hold.hit
    assert "basic.deliver on channel" in (hold.hit or "") and " basic.cancel passed" in (hold.hit or "")
    bounded = proxy.arm(Fault(Action.DELAY, "queue.declare-ok", Sender.SERVER, delay_s=0.3, until=("basic.cancel",)))
    start = time.monotonic()
    queue(session)
    assert time.monotonic() - start >= 0.3 and bounded.wait(5) and not bounded.held_to_event
    assert "its bound: no basic.cancel passed" in (bounded.hit or "")
    with pytest.raises(ValueError, match="only a delay"):
        Fault(Action.CUT, "basic.deliver", Sender.SERVER, until=("basic.cancel",))
