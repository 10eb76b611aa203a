"""AMQP 1.0 operators on outcomes, drain, credit and detach (adapters/amqp10/mutators/links.py), on
synthetic frames: each output is re-split by the codec, so a rewrite keeps frames valid."""

from __future__ import annotations

from proton import Described, symbol, ubyte, uint, ulong

from adapters.amqp10.wire import Amqp10Codec
from tests.nemesis.test_mutations import C, S, fields10, perf10, run

BEGIN, ATTACH, FLOW, TRANSFER, DISPOSITION, DETACH = 0x11, 0x12, 0x13, 0x14, 0x15, 0x16


def names(raws: list[bytes]) -> list[tuple[str, int]]:
    return [(f.name, f.channel) for f in Amqp10Codec().feed(b"".join(raws))]


def flow(handle: int, credit: int, *, drain: bool = False, channel: int = 0) -> object:
    return perf10(FLOW, [uint(0), uint(100), uint(0), uint(100), uint(handle), uint(0), uint(credit), None, drain], channel)


def test_modified_as_rejected_and_undeliverable_here_cleared() -> None:
    modified = perf10(DISPOSITION, [True, uint(1), None, True, Described(ulong(0x27), [True, True, None])])
    released = perf10(DISPOSITION, [True, uint(2), None, True, Described(ulong(0x26), [])])
    to_server, *_ = run("modified-as-rejected", [(C, modified), (C, released)])
    assert [int(fields10(r)[4].descriptor) for r in to_server] == [0x25, 0x26]
    to_server, _, _, m = run("undeliverable-here-cleared", [(C, modified), (C, released)])
    state = fields10(to_server[0])[4]
    assert int(state.descriptor) == 0x27 and list(state.value)[:2] == [True, False] and m.rewritten == 1


def test_drain_answer_dropped_only_after_a_drain() -> None:
    echo = flow(0, 0, drain=True)
    _, to_client, _, m = run("drain-answer-dropped", [(S, echo)])
    assert len(to_client) == 1 and m.rewritten == 0  # no drain asked: nothing to drop
    _, to_client, _, m = run("drain-answer-dropped", [(C, flow(0, 5, drain=True)), (S, flow(2, 0)), (S, echo)])
    assert names(to_client) == [("flow", 0)] and m.rewritten == 1


def test_drain_ends_session_on_both_sides_and_swallows_the_answers() -> None:
    begin = perf10(BEGIN, [uint(7), uint(0), uint(100), uint(100)], 3)  # broker's channel 3 answers the client's 7
    stream = [(S, begin), (C, flow(0, 5, drain=True, channel=7)), (S, perf10(TRANSFER, [uint(0), uint(1), b"t", uint(0)], 3)),
              (S, perf10(0x17, [], 3)), (C, perf10(0x17, [], 7))]
    to_server, to_client, io, m = run("drain-ends-session", stream)
    assert names(to_server) == [("end", 7)]  # the drain replaced by the client's end of its session
    assert names(to_client) == [("begin", 3)]  # the broker's transfer and end after it never reach the client
    end = Amqp10Codec().feed(io.client[0])[0]
    assert (end.name, end.channel) == ("end", 3)
    error = fields10(io.client[0])[0]
    assert str(next(iter(error.value))) == str(symbol("amqp:internal-error")) and m.rewritten == 1


def test_credit_inflated_only_on_receiving_links() -> None:
    attach_recv = perf10(ATTACH, ["r", uint(0), True, ubyte(0), ubyte(0)])
    attach_send = perf10(ATTACH, ["s", uint(1), False, ubyte(0), ubyte(0)])
    stream = [(C, attach_recv), (C, attach_send), (C, flow(0, 2)), (C, flow(1, 4)), (C, flow(0, 0)), (C, flow(0, 3, drain=True))]
    to_server, _, _, m = run("credit-inflated", stream)
    credits = [int(fields10(r)[6]) for r in to_server[2:]]
    assert credits == [5, 4, 0, 3] and m.rewritten == 1


def test_detach_unanswered_keeps_the_detach_and_the_links_later_frames() -> None:
    begin = perf10(BEGIN, [uint(0), uint(0), uint(100), uint(100)], 4)
    stream = [(S, begin), (C, perf10(ATTACH, ["r", uint(0), True, ubyte(0), ubyte(0)])),
              (S, perf10(ATTACH, ["r", uint(2), False, ubyte(0), ubyte(0)], 4)),
              (C, perf10(DETACH, [uint(0), True])), (S, perf10(DETACH, [uint(2), True], 4)),
              (C, perf10(ATTACH, ["r2", uint(1), True, ubyte(0), ubyte(0)])),
              (S, perf10(ATTACH, ["r2", uint(3), False, ubyte(0), ubyte(0)], 4))]
    to_server, to_client, _, m = run("detach-unanswered", stream)
    assert names(to_server) == [("attach", 0), ("attach", 0)]  # the detach never reaches the broker
    assert names(to_client) == [("begin", 4), ("attach", 4), ("attach", 4)]
    assert m.rewritten == 2


def test_session_window_frozen_keeps_the_first_edge_of_a_small_window_only() -> None:
    small = perf10(BEGIN, [None, uint(0), uint(2), uint(100)], 1)
    large = perf10(BEGIN, [None, uint(0), uint(2147483647), uint(100)], 2)
    answer_small = perf10(BEGIN, [uint(1), uint(10), uint(100), uint(100)], 5)
    answer_large = perf10(BEGIN, [uint(2), uint(0), uint(100), uint(100)], 6)
    reopen = perf10(FLOW, [uint(12), uint(2), uint(0), uint(100), uint(0), uint(0), uint(10)], 1)
    other = perf10(FLOW, [uint(12), uint(2147483647), uint(0), uint(100), uint(0), uint(0), uint(10)], 2)
    to_server, _, _, m = run("session-window-frozen", [(C, small), (C, large), (S, answer_small), (S, answer_large), (C, reopen), (C, other)])
    assert int(fields10(to_server[2])[1]) == 0  # edge 10 + 2 = 12 reached: the window stays shut
    assert int(fields10(to_server[3])[1]) == 2147483647 and m.rewritten == 1


def test_settle_mode_misreported_only_in_the_brokers_attach_of_a_sending_link() -> None:
    client = perf10(ATTACH, ["r", uint(0), True, ubyte(0), ubyte(0)])
    sending = perf10(ATTACH, ["r", uint(0), False, ubyte(2), ubyte(0)])
    receiving = perf10(ATTACH, ["s", uint(1), True, ubyte(0), ubyte(0)])
    to_server, to_client, _, m = run("settle-mode-misreported", [(C, client), (S, sending), (S, receiving)])
    assert int(fields10(to_server[0])[3]) == 0
    assert [int(fields10(r)[3]) for r in to_client] == [1, 0] and m.rewritten == 1


def test_disposition_doubled_repeats_the_brokers_settlement_of_a_sender_only() -> None:
    to_sender = perf10(DISPOSITION, [True, uint(0), uint(2), True, Described(ulong(0x24), [])])
    to_receiver = perf10(DISPOSITION, [False, uint(5), None, True, Described(ulong(0x24), [])])
    _, to_client, _, m = run("disposition-doubled", [(S, to_sender), (S, to_receiver)])
    assert names(to_client) == [("disposition", 0)] * 3 and to_client[0] == to_client[1] and m.rewritten == 1


def test_browse_acquires_asks_move_and_shows_copy_only_for_a_browsing_link() -> None:
    def source(mode: str | None) -> Described:
        return Described(ulong(0x28), ["q", None, None, None, None, None] + ([symbol(mode)] if mode else []))

    browse = perf10(ATTACH, ["b", uint(0), True, ubyte(0), ubyte(0), source("copy"), None])
    acquire = perf10(ATTACH, ["a", uint(1), True, ubyte(0), ubyte(0), source(None), None])
    granted = perf10(ATTACH, ["b", uint(0), False, ubyte(0), ubyte(0), source("move"), None])
    other = perf10(ATTACH, ["a", uint(1), False, ubyte(0), ubyte(0), source(None), None])
    to_server, to_client, _, m = run("browse-acquires", [(C, browse), (C, acquire), (S, granted), (S, other)])
    assert str(fields10(to_server[0])[5].value[6]) == "move" and len(fields10(to_server[1])[5].value) == 6
    assert str(fields10(to_client[0])[5].value[6]) == "copy" and len(fields10(to_client[1])[5].value) == 6
    assert m.rewritten == 2



def test_delivery_count_bumped_adds_one_on_broker_transfers_only() -> None:
    from tests.nemesis.test_mutations import header10, transfer10

    stream = [(S, transfer10(0, first_acquirer=True)), (S, transfer10(1, first_acquirer=False, delivery_count=2)),
              (C, transfer10(2, first_acquirer=True))]
    to_server, to_client, _, m = run("delivery-count-bumped", stream)
    assert [int(header10(r)[4]) for r in to_client] == [1, 3] and int(header10(to_server[0])[4]) == 0
    assert m.rewritten == 2
