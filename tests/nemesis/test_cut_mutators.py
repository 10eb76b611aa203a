"""The cut operators (adapters/amqp091/mutators/cuts.py) on synthetic frames: when the connection is
closed, and that nothing is touched otherwise."""

from __future__ import annotations

from typing import Any

from pamqp import body as pbody
from pamqp import commands
from pamqp import header as pheader

from conformance.nemesis.faults import Sender
from tests.nemesis.test_mutations import IO, frames091, run

C, S = Sender.CLIENT, Sender.SERVER


class ClosingIO(IO):
    def __init__(self) -> None:
        super().__init__()
        self.closed = 0

    def close(self) -> None:
        self.closed += 1


def head(size: int, ch: int = 1) -> list[tuple[Sender, Any]]:
    return [(S, f) for f in frames091((commands.Basic.Deliver("t", 1, False, "", "q"), ch),
                                      (pheader.ContentHeader(0, size, commands.Basic.Properties(message_id="m1")), ch))]


def body(n: int, ch: int = 1) -> list[tuple[Sender, Any]]:
    return [(S, f) for f in frames091((pbody.ContentBody(b"x" * n), ch))]


def client(value: Any, ch: int = 1) -> list[tuple[Sender, Any]]:
    return [(C, f) for f in frames091((value, ch))]


def test_cancel_while_a_body_is_half_through_closes_the_connection_and_swallows_the_cancel() -> None:
    io = ClosingIO()
    to_server, _, io, m = run("cancel-mid-body-drops-connection", head(10) + body(4) + client(commands.Basic.Cancel("t")), io)
    assert io.closed == 1 and m.rewritten == 1
    assert to_server == []  # the broker never sees the cancel
    assert any("4 of 10" in n for n in io.notes)


def test_channel_close_mid_body_closes_too() -> None:
    io = ClosingIO()
    _, _, io, _ = run("cancel-mid-body-drops-connection", head(10) + client(commands.Channel.Close(200, "bye", 0, 0)), io)
    assert io.closed == 1


def test_a_complete_delivery_or_another_channel_leaves_the_cancel_alone() -> None:
    io = ClosingIO()
    to_server, _, io, m = run("cancel-mid-body-drops-connection",
                              head(10) + body(10) + head(10, ch=2) + client(commands.Basic.Cancel("t")), io)
    assert io.closed == 0 and m.rewritten == 0 and len(to_server) == 1
    _, _, io, _ = run("cancel-mid-body-drops-connection", head(0) + client(commands.Basic.Cancel("t")), ClosingIO())
    assert io.closed == 0  # an empty body is complete at its header
