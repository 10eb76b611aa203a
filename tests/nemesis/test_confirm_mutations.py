"""The publisher-confirm mutations (adapters/amqp091/mutators/confirms.py) on synthetic frames: each
acts only on a channel that pipelines its publishes, and what it forwards stays consistent for the
client (the confirms cover exactly the sequence numbers it published, but for the one mutated)."""

from __future__ import annotations

from typing import Any

from pamqp import body as pbody
from pamqp import commands
from pamqp import header as pheader

from conformance.kit.confirms import ledger
from conformance.nemesis.wire import Frame
from tests.nemesis.test_mutations import C, S, decoded, frames091, run


def publish(mid: str, ch: int = 1) -> list[Frame]:
    return frames091((commands.Basic.Publish(exchange="", routing_key="q"), ch),
                     (pheader.ContentHeader(0, 3, commands.Basic.Properties(message_id=mid)), ch), (pbody.ContentBody(b"abc"), ch))


def pipelined(n: int, confirms: list[Any]) -> list[tuple[Any, Frame]]:
    """confirm.select, ``n`` publishes sent back to back, then the broker's ``confirms``."""
    stream = [(C, f) for f in frames091((commands.Confirm.Select(), 1))]
    for i in range(1, n + 1):
        stream += [(C, f) for f in publish(f"m{i}")]
    return stream + [(S, f) for f in frames091(*[(c, 1) for c in confirms])]


def one_at_a_time(n: int) -> list[tuple[Any, Frame]]:
    """The suite's own setup publisher: each publish waits for its confirm."""
    stream = [(C, f) for f in frames091((commands.Confirm.Select(), 1))]
    for i in range(1, n + 1):
        stream += [(C, f) for f in publish(f"m{i}")] + [(S, f) for f in frames091((commands.Basic.Ack(i, False), 1))]
    return stream


def events(raws: list[bytes]) -> list[dict[str, Any]]:
    out = []
    for v in decoded(raws):
        if isinstance(v, (commands.Basic.Ack, commands.Basic.Nack)):
            out.append({"kind": "ack" if isinstance(v, commands.Basic.Ack) else "nack", "tag": v.delivery_tag, "multiple": v.multiple})
    return out


BROKER = [commands.Basic.Ack(1, False), commands.Basic.Ack(4, True), commands.Basic.Ack(6, True), commands.Basic.Ack(10, True)]


def test_every_confirm_mutation_leaves_a_one_at_a_time_publisher_alone() -> None:
    for name in ("confirm-ack-as-nack", "confirm-withheld", "confirm-duplicated"):
        _, to_client, _, m = run(name, one_at_a_time(8))
        assert m.rewritten == 0 and [e["tag"] for e in events(to_client)] == list(range(1, 9)), name


def test_ack_as_nack_refuses_the_confirm_covering_the_nth_publish() -> None:
    _, to_client, io, _ = run("confirm-ack-as-nack", pipelined(10, BROKER))
    got = events(to_client)
    assert got == [{"kind": "ack", "tag": 1, "multiple": False}, {"kind": "nack", "tag": 4, "multiple": True},
                   {"kind": "ack", "tag": 6, "multiple": True}, {"kind": "ack", "tag": 10, "multiple": True}]
    led = ledger(got, 10)
    assert led.tags("nack") == [2, 3, 4] and not led.problems()
    assert "covering publish #2, sent as basic.nack" in io.notes[-1]


def test_withheld_never_confirms_the_nth_and_splits_every_confirm_that_would_cover_it() -> None:
    _, to_client, _, m = run("confirm-withheld", pipelined(10, BROKER))
    got = events(to_client)
    assert got == [{"kind": "ack", "tag": 1, "multiple": False}, {"kind": "ack", "tag": 4, "multiple": True},
                   {"kind": "ack", "tag": 6, "multiple": False}, *[{"kind": "ack", "tag": t, "multiple": False} for t in range(7, 11)]]
    led = ledger(got, 10)
    assert led.missing == [5] and led.problems() == ["no confirm for sequence number(s) 5"]
    assert m.rewritten == 2  # the broker's ack(6, multiple) and ack(10, multiple) both covered 5 for the client


def test_withheld_keeps_a_nack_a_nack() -> None:
    _, to_client, _, _ = run("confirm-withheld", pipelined(6, [commands.Basic.Nack(6, True, False)]))
    got = events(to_client)
    assert got == [{"kind": "nack", "tag": 4, "multiple": True}, {"kind": "nack", "tag": 6, "multiple": False}]


def test_duplicated_acks_the_nth_again_behind_a_later_confirm() -> None:
    _, to_client, _, _ = run("confirm-duplicated", pipelined(10, BROKER))
    got = events(to_client)
    assert [(e["tag"], e["multiple"]) for e in got] == [(1, False), (4, True), (3, True), (6, True), (10, True)]
    assert ledger(got, 10).problems() == ["confirmed twice: 3"]


def test_duplicated_repeats_at_once_when_the_nth_is_the_last_publish() -> None:
    _, to_client, _, _ = run("confirm-duplicated", pipelined(3, [commands.Basic.Ack(3, True)]))
    assert events(to_client) == [{"kind": "ack", "tag": 3, "multiple": True}, {"kind": "ack", "tag": 3, "multiple": True}]


def test_return_dropped_swallows_the_return_and_its_content_only() -> None:
    props = commands.Basic.Properties(message_id="u1")
    stream = [(S, f) for f in frames091((commands.Basic.Return(312, "NO_ROUTE", "x", "nowhere"), 1), (pheader.ContentHeader(0, 3, props), 1),
                                        (pbody.ContentBody(b"abc"), 1), (commands.Basic.Ack(1, False), 1))]
    _, to_client, io, m = run("return-dropped", stream)
    assert [type(v).__name__ for v in decoded(to_client)] == ["Ack"]
    assert m.rewritten == 1 and "basic.return 312" in io.notes[-1]


def test_tags_counted_before_select_shifts_every_confirm_by_the_earlier_mandatory_publishes() -> None:
    mandatory = frames091((commands.Basic.Publish(exchange="", routing_key="q", mandatory=True), 1),
                          (pheader.ContentHeader(0, 3, commands.Basic.Properties(message_id="m0")), 1), (pbody.ContentBody(b"abc"), 1))
    stream = [(C, f) for f in mandatory] + pipelined(3, [commands.Basic.Ack(1, False), commands.Basic.Ack(3, True)])
    _, to_client, _, m = run("confirm-tags-counted-before-select", stream)
    got = events(to_client)
    assert [(e["tag"], e["multiple"]) for e in got] == [(2, False), (4, True)]
    assert ledger(got, 3).unknown == ["ack(4, multiple)"]
    _, to_client, _, m = run("confirm-tags-counted-before-select", pipelined(3, [commands.Basic.Ack(3, True)]))
    assert m.rewritten == 0  # no publish before confirm.select: nothing to shift
