"""AMQP 0-9-1 mutations of publisher confirms: the broker's basic.ack and basic.nack rewritten,
withheld or repeated on their way to a publisher.

They act only on a channel that pipelines its publishes (a publish sent while an earlier one is
still unconfirmed), as a real confirming producer does; a publisher that waits for each confirm
(the suite's own setup and barrier publishes) is left alone, so a mutation breaks the cases about
confirms and not every case that publishes. The proxy keeps each channel's unconfirmed sequence
numbers as the client sees them, so whatever it forwards stays consistent for the client: no
confirm covers a number the client never published, and a split confirm covers exactly what the
broker's covered.
"""

from __future__ import annotations

from typing import Any

from pamqp import commands

from adapters.amqp091.mutations import Assembler, C, P, S, _nth, decode, encode
from conformance.nemesis.faults import Sender
from conformance.nemesis.mutations import Mutator, operator
from conformance.nemesis.wire import Frame

CONFIRMS = ("basic.ack", "basic.nack")
METHOD = {"basic.ack": commands.Basic.Ack, "basic.nack": commands.Basic.Nack}


class ConfirmOperator(Mutator):
    """Tracks confirm mode, sequence numbers and what is unconfirmed, per channel; subclasses decide
    what becomes of the broker's confirms on pipelined channels (:meth:`confirm`)."""

    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        self.confirming: set[int] = set()
        self.seq: dict[int, int] = {}
        self.unconfirmed: dict[int, set[int]] = {}
        self.pipelined: set[int] = set()

    def rewrite(self, sender: Sender, frame: Frame) -> list[bytes] | None:
        ch = frame.channel
        if sender is C:
            if frame.name == "confirm.select":
                self.confirming.add(ch)
            elif frame.name == "basic.publish" and ch in self.confirming:
                left = self.unconfirmed.setdefault(ch, set())
                if left:
                    self.pipelined.add(ch)
                self.seq[ch] = self.seq.get(ch, 0) + 1
                left.add(self.seq[ch])
            return None
        if frame.name not in CONFIRMS or ch not in self.confirming:
            return None
        value = decode(frame)
        covered = self.covers(ch, value.delivery_tag, value.multiple)
        out = self.confirm(ch, frame.name, value, covered) if ch in self.pipelined else None
        self.unconfirmed[ch] = self.unconfirmed.get(ch, set()) - (covered if out is None else self.settled(covered))
        return out

    def covers(self, ch: int, tag: int, multiple: bool) -> set[int]:
        left = self.unconfirmed.get(ch, set())
        return {t for t in left if t <= tag} if multiple else {tag} & left

    def confirm(self, ch: int, name: str, value: Any, covered: set[int]) -> list[bytes] | None:
        """Frames to send in place of the broker's confirm ``value`` covering ``covered``; None: as is."""
        raise NotImplementedError

    def settled(self, covered: set[int]) -> set[int]:
        """What the client counts confirmed once :meth:`confirm` rewrote a confirm covering ``covered``."""
        return covered


@operator("confirm-ack-as-nack", P, "on a channel pipelining its publishes, forwards the broker's basic.ack covering the Nth publish (default 2nd) as basic.nack: a refusal where none is due", default_param="2")
class ConfirmAckAsNack(ConfirmOperator):
    """A broker that refuses a publish its queue has room for (QPID-8341: reject overflow with a
    byte limit refusing below the limit)."""

    def confirm(self, ch: int, name: str, value: Any, covered: set[int]) -> list[bytes] | None:
        n = _nth(self.param)
        if name != "basic.ack" or n not in covered:
            return None
        self.applied(f"basic.ack delivery_tag {value.delivery_tag} (multiple={value.multiple}) on channel {ch}, covering publish #{n}, sent as basic.nack")
        return [encode(commands.Basic.Nack(delivery_tag=value.delivery_tag, multiple=value.multiple, requeue=False), ch)]


@operator("confirm-withheld", P, "on a channel pipelining its publishes, never forwards the confirm of the Nth publish (default 5th): a confirm covering it with multiple=true is split so it covers everything else it did", default_param="5")
class ConfirmWithheld(ConfirmOperator):
    """A broker that never confirms one publish while it confirms the others (rabbitmq-server#10014,
    and #6115 on mirrored queues)."""

    def settled(self, covered: set[int]) -> set[int]:
        # still unconfirmed for the client: every later confirm with multiple=true would cover it,
        # so each is split again
        return covered - {_nth(self.param)}

    def confirm(self, ch: int, name: str, value: Any, covered: set[int]) -> list[bytes] | None:
        n = _nth(self.param)
        if n not in covered:
            return None
        rest = sorted(covered - {n})
        below = [t for t in rest if t < n]
        method = METHOD[name]
        kw = {"requeue": False} if name == "basic.nack" else {}
        out = [encode(method(delivery_tag=below[-1], multiple=True, **kw), ch)] if below else []
        out += [encode(method(delivery_tag=t, multiple=False, **kw), ch) for t in rest if t > n]
        self.applied(f"{name} delivery_tag {value.delivery_tag} on channel {ch}: the confirm of publish #{n} withheld, "
                     f"{len(rest)} other publish(es) it covered confirmed")
        return out


@operator("confirm-duplicated", P, "on a channel pipelining its publishes, confirms the Nth publish (default 3rd) a second time after a later confirm: basic.ack naming it with multiple=true, out of order", default_param="3")
class ConfirmDuplicated(ConfirmOperator):
    """A broker that acks an already-confirmed sequence number again, behind a later cumulative ack
    (cloudamqp/lavinmq#2078: Ack(6, multiple) then Ack(5, multiple))."""

    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        self.done: set[int] = set()  # channels whose Nth publish is confirmed, awaiting a later confirm
        self.sent: set[int] = set()

    def confirm(self, ch: int, name: str, value: Any, covered: set[int]) -> list[bytes] | None:
        n = _nth(self.param)
        if ch in self.sent:
            return None
        if n in covered and not any(t > n for t in covered) and self.seq.get(ch, 0) > n:
            self.done.add(ch)  # repeated behind the next confirm
            return None
        if n not in covered and ch not in self.done:
            return None
        self.sent.add(ch)
        self.applied(f"basic.ack delivery_tag {n} multiple=True sent again on channel {ch} after {name} delivery_tag {value.delivery_tag}")
        return [encode(value, ch), encode(commands.Basic.Ack(delivery_tag=n, multiple=True), ch)]


@operator("return-dropped", P, "never forwards basic.return: a mandatory publish that routes nowhere is dropped without a word, as if the broker ignored the mandatory flag")
class ReturnDropped(Mutator):
    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        self.assembler = Assembler(("basic.return",))

    def rewrite(self, sender: Sender, frame: Frame) -> list[bytes] | None:
        if sender is not S:
            return None
        part, msg = self.assembler.feed(frame)
        if not part:
            return None
        if msg is not None:
            self.applied(f"basic.return {msg.value.reply_code} on channel {frame.channel} not forwarded, nor its content")
        return []  # the method, its header and its body frames alike


@operator("confirm-tags-counted-before-select", P, "numbers a channel's publisher confirms from its first mandatory publish, not from confirm.select: each confirm's delivery tag is raised by the mandatory publishes sent before confirm.select")
class ConfirmTagsCountedBeforeSelect(Mutator):
    """A broker whose confirm sequence counts mandatory publishes made before confirm.select, so its
    confirms name the wrong publishes and, at the end, ones never made (rabbitmq-server#3870)."""

    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        self.before: dict[int, int] = {}
        self.confirming: set[int] = set()

    def rewrite(self, sender: Sender, frame: Frame) -> list[bytes] | None:
        ch = frame.channel
        if sender is C:
            if frame.name == "confirm.select":
                self.confirming.add(ch)
            elif frame.name == "basic.publish" and ch not in self.confirming and decode(frame).mandatory:
                self.before[ch] = self.before.get(ch, 0) + 1
            return None
        if frame.name not in CONFIRMS or not self.before.get(ch):
            return None
        value = decode(frame)
        value.delivery_tag += self.before[ch]
        self.applied(f"{frame.name} on channel {ch}: delivery_tag {value.delivery_tag - self.before[ch]} -> {value.delivery_tag}")
        return [encode(value, ch)]
