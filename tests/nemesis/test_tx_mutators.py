"""AMQP 1.0 operators on transactions (adapters/amqp10/mutators/transactions.py), on frames encoded
with python-qpid-proton's codec and named by one connection's pair of codecs, as the proxy does."""

from __future__ import annotations

from proton import Described, Message, symbol, uint, ulong

from adapters.amqp10.wire import Amqp10Codec
from conformance.nemesis.faults import Sender
from conformance.nemesis.wire import Frame
from tests.nemesis.test_amqp10_tx_frames import (
    BROKER_CH, CLIENT_CH, TXN, control, disposition, frame, opening, transfer, txn_state,
)
from tests.nemesis.test_mutations import C, S, fields10, run

DECLARED = Described(ulong(0x33), [TXN])
ACCEPTED = Described(ulong(0x24), [])


def named(steps: list[tuple[str, bytes]]) -> list[tuple[Sender, Frame]]:
    c, s = Amqp10Codec.pair()
    return [(C if side == "C" else S, f) for side, raw in steps for f in (c if side == "C" else s).feed(raw)]


def body(n: int) -> bytes:
    return Message(body=f"m{n}").encode()


def transaction() -> list[tuple[str, bytes]]:
    """declare (id 0), three transactional publishes (ids 1-3), a commit (id 4), the broker's answers."""
    return [
        *opening(),
        ("C", transfer(5, 0, CLIENT_CH, control(Described(symbol("amqp:declare:list"), [None])))),
        ("S", disposition(0, BROKER_CH, DECLARED)),
        *[("C", transfer(6, i, CLIENT_CH, body(i), state=txn_state())) for i in (1, 2, 3)],
        ("C", transfer(5, 4, CLIENT_CH, control(Described(symbol("amqp:discharge:list"), [TXN, False])))),
        ("C", frame(0x13, [uint(5), uint(100), uint(5), uint(100)], CLIENT_CH)),  # session flow: next-outgoing-id 5
        ("S", disposition(1, BROKER_CH, ACCEPTED, last=2)),
        ("S", disposition(3, BROKER_CH, ACCEPTED)),
        ("S", frame(0x13, [uint(4), uint(100), uint(0), uint(100)], BROKER_CH)),  # next-incoming-id 4 (after the drop)
    ]


def test_declared_as_accepted_rewrites_only_the_declare_answer() -> None:
    _, to_client, _, m = run("declared-as-accepted", named(transaction()))
    states = [fields10(r)[4] for r in to_client if Amqp10Codec().feed(r)[0].name == "disposition"]
    assert int(states[0].descriptor) == 0x24 and not list(states[0].value) and m.rewritten == 1


def test_commit_as_rollback_sets_fail_on_the_commit_only() -> None:
    to_server, _, _, m = run("commit-as-rollback", named(transaction()))
    c, s = Amqp10Codec.pair()
    for side, raw in opening():
        (c if side == "C" else s).feed(raw)
    names = [f.name for raw in to_server[len([x for x in opening() if x[0] == "C"]):] for f in c.feed(raw)]
    assert names == ["declare", "transfer(txn)", "transfer(txn)", "transfer(txn)", "discharge(fail)", "flow"] and m.rewritten == 1


def test_tx_work_dropped_renumbers_the_session_both_ways() -> None:
    to_server, to_client, _, m = run("tx-work-dropped", named(transaction()))
    sent = [fields10(r) for r in to_server[3:]]  # after the begin and the two attaches
    assert [int(f[1]) for f in sent[:4]] == [0, 1, 2, 3]  # declare, m1, m3 (was 3), discharge (was 4); m2 dropped
    assert b"m3" in to_server[5] and int(sent[4][2]) == 4  # the client's next-outgoing-id 5 -> 4
    answers = [fields10(r) for r in to_client[2:]]  # after the begin and the attach
    assert [(int(a[1]), None if a[2] is None else int(a[2])) for a in answers[1:3]] == [(1, 3), (4, None)]
    assert int(answers[3][0]) == 5 and m.rewritten == 1  # the broker's next-incoming-id 4 -> the client's 5


def test_tx_state_stripped_keeps_the_outcome_of_a_consumers_accept() -> None:
    steps = [*transaction()[:8], ("C", disposition(0, CLIENT_CH, txn_state(ACCEPTED)))]
    to_server, _, _, m = run("tx-state-stripped", named(steps))
    assert fields10(to_server[-2])[7] is None  # m1's transfer: no state
    assert int(fields10(to_server[-1])[4].descriptor) == 0x24 and m.rewritten == 2


def test_confirmed_transfer_lost_answers_the_client_on_the_brokers_channel() -> None:
    durable = Message(body=b"m", durable=True).encode()
    steps = [*opening(), *[("C", transfer(6, i, CLIENT_CH, durable if i else body(0))) for i in (0, 1, 2)],
             ("S", disposition(1, BROKER_CH, ACCEPTED))]
    to_server, to_client, io, m = run("confirmed-transfer-lost", named(steps))
    assert [int(fields10(r)[1]) for r in to_server[3:]] == [0, 1]  # the 2nd durable one (id 2) dropped, none after it
    answer = Amqp10Codec().feed(io.client[0])[0]
    assert answer.channel == BROKER_CH and int(fields10(io.client[0])[1]) == 2 and m.rewritten == 1


def test_torn_transfer_enqueued_hands_over_what_arrived_of_a_torn_frame() -> None:
    from tests.nemesis.test_mutations import IO

    whole = transfer(6, 3, CLIENT_CH, Message(id="m4", body=b"x" * 4000).encode())

    class Torn(IO):
        def pending(self, sender: Sender) -> bytes:
            return whole[:2000] if sender is C else b""

    _, _, io, m = run("torn-transfer-enqueued", [], Torn())
    out = m.mutator(io).closing(C)
    f = Amqp10Codec().feed(out[0])[0]
    message = Message()
    message.decode(_payload(f.raw))
    assert f.name == "transfer" and message.id == "m4" and 1800 < len(message.body) < 2000 and set(message.body) == {ord("x")}


def _payload(raw: bytes) -> bytes:
    from adapters.amqp10.mutations import split

    return split(raw)[2]


def test_header_rewriters_leave_every_frame_of_a_split_transfer_alone() -> None:
    # qpidd repeats the delivery-id on every frame of a split transfer: the last frame's payload is
    # body bytes, where a header section inserted would corrupt the body
    first = transfer(1, 0, BROKER_CH, Message(body=b"x" * 300).encode()[:200], more=True)
    last = transfer(1, 0, BROKER_CH, Message(body=b"x" * 300).encode()[200:])
    single = transfer(1, 1, BROKER_CH, Message(body=b"y").encode())
    stream = [(S, Amqp10Codec().feed(raw)[0]) for raw in (first, last, single)]
    _, to_client, _, m = run("first-acquirer-flipped", stream)
    assert to_client[:2] == [first, last] and to_client[2] != single and m.rewritten == 1
