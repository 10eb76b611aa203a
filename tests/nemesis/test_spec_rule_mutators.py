"""AMQP 1.0 operators of the spec-rule cases (adapters/amqp10/mutators/spec_rules.py), on synthetic
frames: each output is re-split by the codec, so a rewrite keeps frames valid."""

from __future__ import annotations

from proton import Described, symbol, ubyte, uint, ulong

from tests.nemesis.test_mutations import C, S, fields10, perf10, run

BEGIN, ATTACH, FLOW, TRANSFER, DISPOSITION, DETACH = 0x11, 0x12, 0x13, 0x14, 0x15, 0x16


def tag(raw: bytes) -> bytes | None:
    """The delivery-tag of a transfer, copied while its decoder is alive (proton's binary is a view)."""
    from proton import Data

    body = raw[raw[4] * 4:]
    data = Data()
    data.decode(body)
    value = list(data.get_object().value)[2]
    return None if value is None else bytes(value)


def source(address: str | None = "q", *, dynamic: bool = False, outcomes: object = None, filter_: object = None) -> Described:
    return Described(ulong(0x28), [address, None, None, None, dynamic, None, None, filter_, None, outcomes])


def test_delivery_tag_repeated_and_continuation_tag_changed() -> None:
    t1 = perf10(TRANSFER, [uint(0), uint(0), b"\x01", uint(0), False, True])
    t1b = perf10(TRANSFER, [uint(0), None, None, None, False, False])
    t2 = perf10(TRANSFER, [uint(0), uint(1), b"\x02", uint(0), False, False])
    to_client = run("delivery-tag-repeated", [(S, t1), (S, t2)])[1]
    assert [tag(r) for r in to_client] == [b"\x00", b"\x00"]
    to_client = run("continuation-tag-changed", [(S, t1), (S, t1b), (S, t2)])[1]
    assert [tag(r) for r in to_client] == [b"\x01", b"\xff\xfe", b"\x02"]


def test_flow_and_attach_fields_dropped_only_on_the_brokers_link_frames() -> None:
    link_flow = perf10(FLOW, [uint(0), uint(100), uint(0), uint(100), uint(1), uint(5), uint(3)])
    session_flow = perf10(FLOW, [uint(0), uint(100), uint(0), uint(100)])
    to_client, _, m = run("flow-delivery-count-dropped", [(S, link_flow), (S, session_flow), (C, link_flow)])[1:]
    assert fields10(to_client[0])[5] is None and m.rewritten == 1
    sender_attach = perf10(ATTACH, ["r", uint(0), False, ubyte(0), ubyte(0), source(), None, None, False, uint(7)])
    to_client = run("initial-delivery-count-dropped", [(S, sender_attach)])[1]
    assert fields10(to_client[0])[9] is None


def test_source_outcome_invalid_and_filter_key_stringified() -> None:
    attach = perf10(ATTACH, ["r", uint(0), False, ubyte(0), ubyte(0), source(filter_={symbol("selector"): Described(symbol("f"), "x")})])
    src = list(fields10(run("source-outcome-invalid", [(S, attach)])[1][0])[5].value)
    assert [str(o) for o in src[9].elements] == ["amqp:bogus:list"]
    src = list(fields10(run("filter-key-stringified", [(S, attach)])[1][0])[5].value)
    assert [type(k) for k in src[7]] == [str]


def test_dynamic_address_cleared_only_for_a_dynamic_request() -> None:
    asked = perf10(ATTACH, ["d", uint(0), True, ubyte(0), ubyte(0), source(None, dynamic=True), None])
    plain = perf10(ATTACH, ["p", uint(1), True, ubyte(0), ubyte(0), source("q"), None])
    answer = perf10(ATTACH, ["d", uint(0), False, ubyte(0), ubyte(0), source("tmp-1", dynamic=True), None])
    other = perf10(ATTACH, ["p", uint(1), False, ubyte(0), ubyte(0), source("q"), None])
    to_client, _, m = run("dynamic-address-cleared", [(C, asked), (C, plain), (S, answer), (S, other)])[1:]
    assert list(fields10(to_client[0])[5].value)[0] is None and list(fields10(to_client[1])[5].value)[0] == "q" and m.rewritten == 1


def test_transaction_operators() -> None:
    txn = perf10(DISPOSITION, [True, uint(1), None, True, Described(ulong(0x34), [b"t1", Described(ulong(0x24), [])])])
    state = fields10(run("transactional-state-unwrapped", [(S, txn)])[1][0])[4]
    assert int(state.descriptor) == 0x24
    error = Described(ulong(0x1D), [symbol("amqp:transaction:unknown-id"), "never declared", None])
    rejected = perf10(DISPOSITION, [True, uint(2), None, True, Described(ulong(0x25), [error])])
    detach = perf10(DETACH, [uint(0), True, error])
    to_client = run("discharge-error-accepted", [(S, rejected), (S, detach)])[1]
    assert int(fields10(to_client[0])[4].descriptor) == 0x24 and fields10(to_client[1])[2] is None


def test_client_side_operators() -> None:
    aborted = perf10(TRANSFER, [uint(0), None, None, None, True, True, None, None, False, True])
    f = fields10(run("abort-cleared", [(C, aborted)])[0][0])
    assert (f[5], f[9]) == (False, False)
    incomplete = perf10(ATTACH, ["i", uint(0), True, ubyte(0), ubyte(0), source(), None, {}, True])
    assert fields10(run("incomplete-unsettled-cleared", [(C, incomplete)])[0][0])[8] is False
    early = perf10(FLOW, [uint(0), uint(100), uint(0), uint(100), uint(0), None, uint(1)])
    known = perf10(FLOW, [uint(0), uint(100), uint(0), uint(100), uint(0), uint(0), uint(1)])
    to_server = run("early-credit-dropped", [(C, early), (C, known)])[0]
    assert len(to_server) == 1 and fields10(to_server[0])[5] == 0
