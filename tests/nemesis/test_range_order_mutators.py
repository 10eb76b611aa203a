"""AMQP 1.0 operators on disposition ranges (adapters/amqp10/mutations.py) and on the messages a
broker sends (adapters/amqp10/mutators/ordering.py), on synthetic frames: each output is re-split by
the codec, so a rewrite keeps frames valid."""

from __future__ import annotations

import struct
from typing import Any

from proton import Described, Message, uint, ulong

from adapters.amqp10.mutations import split
from adapters.amqp10.wire import Amqp10Codec
from conformance.nemesis.wire import Frame
from tests.nemesis.test_mutations import C, S, fields10, perf10, run

TRANSFER, DISPOSITION = 0x14, 0x15
ACCEPTED = Described(ulong(0x24), [])


def transfer(delivery_id: int, msg: Message, *, state: Any = None, channel: int = 0) -> Frame:
    """A one-frame transfer carrying ``msg`` (its performative, then the encoded message)."""
    from proton import Data

    d = Data()
    d.put_object(Described(ulong(TRANSFER), [uint(0), uint(delivery_id), b"t%d" % delivery_id, uint(0), False, False, None, state]))
    body = d.encode() + msg.encode()
    return Amqp10Codec().feed(struct.pack(">IBBH", 8 + len(body), 2, 0, channel) + body)[0]


def body(raw: bytes) -> Any:
    msg = Message()
    msg.decode(split(Amqp10Codec().feed(raw)[0].raw)[2])
    return bytes(msg.body)


def test_disposition_ranges_narrowed_and_widened() -> None:
    ranged = perf10(DISPOSITION, [True, uint(1), uint(4), True, ACCEPTED])
    single = perf10(DISPOSITION, [True, uint(5), None, True, ACCEPTED])
    sender_side = perf10(DISPOSITION, [False, uint(1), uint(4), True, ACCEPTED])
    to_server, _, _, m = run("disposition-range-narrowed", [(C, ranged), (C, single), (C, sender_side)])
    assert [fields10(r)[1:3] for r in to_server] == [[1, None], [5, None], [1, 4]] and m.rewritten == 1
    to_server, _, _, m = run("disposition-range-widened", [(C, ranged), (C, single), (C, sender_side)])
    assert [fields10(r)[1:3] for r in to_server] == [[1, 4], [0, 5], [1, 4]] and m.rewritten == 1




def test_transient_overtakes_durable_swaps_messages_not_delivery_ids() -> None:
    durable = transfer(0, Message(body=b"m1", durable=True))
    transient = transfer(1, Message(body=b"m2", durable=False))
    alone = transfer(2, Message(body=b"m3", durable=False))
    _, to_client, _, m = run("transient-overtakes-durable", [(S, durable), (S, transient), (S, alone)])
    assert [fields10(r)[1] for r in to_client] == [0, 1, 2]
    assert [body(r) for r in to_client] == [b"m2", b"m1", b"m3"] and m.rewritten == 1


def test_split_transfer_altered_flips_only_the_first_frame_of_a_split_message() -> None:
    from proton import Data

    def frame_of(delivery_id: int | None, more: bool, data: bytes) -> Frame:
        d = Data()
        d.put_object(Described(ulong(TRANSFER), [uint(0), None if delivery_id is None else uint(delivery_id), b"t", uint(0), False, more]))
        body = d.encode() + data
        return Amqp10Codec().feed(struct.pack(">IBBH", 8 + len(body), 2, 0, 0) + body)[0]

    first, rest, whole = frame_of(4, True, b"abc"), frame_of(None, False, b"def"), frame_of(5, False, b"ghi")
    _, to_client, _, m = run("split-transfer-altered", [(S, first), (S, rest), (S, whole)])
    assert to_client[0][:-1] == first.raw[:-1] and to_client[0][-1] == ord("c") ^ 0xFF
    assert to_client[1:] == [rest.raw, whole.raw] and m.rewritten == 1
