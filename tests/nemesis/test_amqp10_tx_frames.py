"""AMQP 1.0 transaction frames as the proxy names them (adapters/amqp10/wire.py): a coordinator link's
declare and discharge, the dispositions answering them, and transactional work on ordinary links.

The frames are encoded with python-qpid-proton's codec the way a client and a broker send them:
the client's channel 0 is the broker's channel 3 (joined by the broker's begin), handles differ per
side, the declare uses the symbolic descriptor the proton adapter sends.
"""

from __future__ import annotations

import struct
from typing import Any

from proton import Data, Described, Message, symbol, ubyte, uint, ulong, ushort

from adapters.amqp10.wire import Amqp10Codec, performative_of

CLIENT_CH, BROKER_CH = 0, 3
TXN = b"txn-1"


def frame(code: int, fields: list[Any], channel: int, payload: bytes = b"") -> bytes:
    data = Data()
    data.put_object(Described(ulong(code), fields))
    body = data.encode() + payload
    return struct.pack(">IBBH", 8 + len(body), 2, 0, channel) + body


def begin(channel: int, remote: int | None) -> bytes:
    """A begin; the broker's answer names the client's channel (remote-channel)."""
    return frame(0x11, [None if remote is None else ushort(remote), uint(0), uint(100), uint(100)], channel)


def attach(name: str, handle: int, role: bool, channel: int, target: Any) -> bytes:
    return frame(0x12, [name, uint(handle), role, ubyte(0), ubyte(0), None, target], channel)


def coordinator() -> Described:
    return Described(ulong(0x30), [[symbol("amqp:local-transactions")]])


def transfer(handle: int, delivery: int | None, channel: int, payload: bytes, *, state: Any = None, more: bool = False) -> bytes:
    return frame(0x14, [uint(handle), None if delivery is None else uint(delivery), None if delivery is None else str(delivery).encode(),
                        None if delivery is None else uint(0), False, more, None, state], channel, payload)


def disposition(first: int, channel: int, state: Any, *, role: bool = True, last: int | None = None) -> bytes:
    return frame(0x15, [role, uint(first), None if last is None else uint(last), True, state], channel)


def control(body: Described) -> bytes:
    return Message(body=body).encode()


def txn_state(outcome: Any = None) -> Described:
    return Described(ulong(0x34), [TXN, outcome])


def sequence(steps: list[tuple[str, bytes]]) -> list[tuple[str, str]]:
    c, s = Amqp10Codec.pair()
    return [(side, f.name) for side, raw in steps for f in (c if side == "C" else s).feed(raw)]


def opening() -> list[tuple[str, bytes]]:
    return [
        ("C", begin(CLIENT_CH, None)),
        ("S", begin(BROKER_CH, CLIENT_CH)),
        ("C", attach("txn-ctl", 5, False, CLIENT_CH, coordinator())),
        ("S", attach("txn-ctl", 0, True, BROKER_CH, coordinator())),
        ("C", attach("sender", 6, False, CLIENT_CH, Described(ulong(0x29), ["q"]))),
    ]


def test_a_commit_is_named_declare_declared_transfer_txn_discharge_discharge_accepted() -> None:
    declare = control(Described(symbol("amqp:declare:list"), [None]))
    commit = control(Described(symbol("amqp:discharge:list"), [TXN, False]))
    steps = [
        *opening(),
        ("C", transfer(5, 0, CLIENT_CH, declare)),
        ("S", disposition(0, BROKER_CH, Described(ulong(0x33), [TXN]))),
        ("C", transfer(6, 1, CLIENT_CH, b"\x00\x53\x77\xa1\x02m1", state=txn_state())),
        ("S", disposition(1, BROKER_CH, txn_state(Described(ulong(0x24), [])))),
        ("C", transfer(5, 2, CLIENT_CH, commit)),
        ("S", disposition(2, BROKER_CH, Described(ulong(0x24), []))),
        ("C", transfer(6, 3, CLIENT_CH, b"\x00\x53\x77\xa1\x02m2")),
        ("S", disposition(3, BROKER_CH, Described(ulong(0x24), []))),
    ]
    assert [n for _, n in sequence(steps)][5:] == [
        "declare", "declared", "transfer(txn)", "disposition(txn)", "discharge", "discharge-accepted", "transfer", "disposition"]


def test_rollback_rejections_and_a_coordinator_that_is_not_one() -> None:
    rollback = control(Described(ulong(0x32), [TXN, True]))
    declare = control(Described(ulong(0x31), [None]))
    error = Described(ulong(0x25), [Described(ulong(0x1D), [symbol("amqp:transaction:unknown-id"), "no such txn", None])])
    steps = [
        *opening(),
        ("C", transfer(5, 7, CLIENT_CH, rollback)),
        ("S", disposition(7, BROKER_CH, Described(ulong(0x24), []))),
        ("C", transfer(5, 8, CLIENT_CH, rollback)),
        ("S", disposition(8, BROKER_CH, error)),
        ("C", transfer(5, 9, CLIENT_CH, declare)),
        ("S", disposition(9, BROKER_CH, Described(ulong(0x24), []))),  # proton's example broker
        ("C", transfer(5, 10, CLIENT_CH, declare)),
        ("S", disposition(10, BROKER_CH, None)),
    ]
    assert [n for _, n in sequence(steps)][5:] == [
        "discharge(fail)", "discharge(fail)-accepted", "discharge(fail)", "discharge(fail)-rejected",
        "declare", "declare-accepted", "declare", "declare-no-outcome"]


def test_continuations_a_consumers_txn_accept_and_names_after_the_coordinator_detaches() -> None:
    declare = control(Described(symbol("amqp:declare:list"), [None]))
    steps = [
        *opening(),
        ("C", transfer(5, 0, CLIENT_CH, declare)),
        ("S", disposition(0, BROKER_CH, Described(ulong(0x33), [TXN]))),
        # a large transactional publish over three frames: every frame is the transaction's
        ("C", transfer(6, 1, CLIENT_CH, b"\x00\x53\x77\xa0\x10" + b"x" * 8, state=txn_state(), more=True)),
        ("C", transfer(6, None, CLIENT_CH, b"x" * 8, more=True)),
        ("C", transfer(6, None, CLIENT_CH, b"x" * 8)),
        # the broker's delivery to a consumer, accepted by the client inside the transaction
        ("S", transfer(1, 0, BROKER_CH, b"\x00\x53\x77\xa1\x02m9")),
        ("C", disposition(0, CLIENT_CH, txn_state(Described(ulong(0x24), [])))),
        # the detach of the coordinator: its handle is an ordinary link's again if reused
        ("C", frame(0x16, [uint(5), True], CLIENT_CH)),
        ("C", attach("plain", 5, False, CLIENT_CH, Described(ulong(0x29), ["q"]))),
        ("C", transfer(5, 2, CLIENT_CH, declare)),
    ]
    assert [n for _, n in sequence(steps)][7:] == [
        "transfer(txn)", "transfer(txn)", "transfer(txn)", "transfer", "disposition(txn)", "detach", "attach", "transfer"]


def test_without_a_coordinator_nothing_is_renamed_and_every_name_maps_to_its_performative() -> None:
    declare = control(Described(symbol("amqp:declare:list"), [None]))
    steps = [("C", begin(CLIENT_CH, None)), ("S", begin(BROKER_CH, CLIENT_CH)),
             ("C", attach("sender", 6, False, CLIENT_CH, Described(ulong(0x29), ["q"]))),
             ("C", transfer(6, 0, CLIENT_CH, declare, state=txn_state())),
             ("S", disposition(0, BROKER_CH, Described(ulong(0x33), [TXN])))]
    assert [n for _, n in sequence(steps)] == ["begin", "begin", "attach", "transfer", "disposition"]
    assert Amqp10Codec().conversation.transactional is False
    for name in Amqp10Codec.frame_names:
        assert performative_of(name) in {"open", "begin", "attach", "flow", "transfer", "disposition", "detach", "end", "close",
                                         "sasl-mechanisms", "sasl-init", "sasl-challenge", "sasl-response", "sasl-outcome",
                                         "protocol-header", "empty"}


def test_traces_decode_the_controls_and_their_outcomes() -> None:
    c, s = Amqp10Codec.pair()
    for side, raw in opening():
        (c if side == "C" else s).feed(raw)
    commit = c.feed(transfer(5, 4, CLIENT_CH, control(Described(symbol("amqp:discharge:list"), [TXN, False]))))[0]
    assert commit.name == "discharge" and "discharge txn-id=0x74786e2d31 fail=false" in commit.detail()
    declare = c.feed(transfer(5, 5, CLIENT_CH, control(Described(ulong(0x31), [None]))))[0]
    assert declare.detail().endswith(" declare")
    declared = s.feed(disposition(5, BROKER_CH, Described(ulong(0x33), [TXN])))[0]
    assert declared.name == "declared" and "state=declared(0x74786e2d31)" in declared.detail()
    work = c.feed(transfer(6, 6, CLIENT_CH, b"\x00\x53\x77\xa1\x01x", state=txn_state()))[0]
    assert "state=transactional-state(0x74786e2d31, none)" in work.detail()
    ctl = c.conversation
    assert ("client", CLIENT_CH, 5) in ctl.coordinators
    att = Amqp10Codec().feed(attach("txn-ctl", 5, False, CLIENT_CH, coordinator()))[0]
    assert "target=coordinator" in att.detail()
