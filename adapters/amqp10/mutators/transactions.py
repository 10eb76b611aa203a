"""AMQP 1.0 operators on transactions (core spec section 4): a coordinator that is not one, a commit
done as a rollback, transactional work the broker drops or does outside its transaction; and on
the publishes the fault cases cut: a confirmed message lost, a torn message enqueued.

They act on the frames the codec names (adapters/amqp10/wire.py): ``declared``, ``discharge``,
``transfer(txn)``, ``disposition(txn)``; the codec names a frame by what the client sent, before
any operator rewrote it.
"""

from __future__ import annotations

import struct
from typing import Any

from adapters.amqp10.mutations import ACCEPTED, DISPOSITION, TRANSFER, C, P, S, kind, performative, rebuild, split
from adapters.amqp10.wire import TRANSACTIONAL_STATE, descriptor_code
from conformance.nemesis.faults import Sender
from conformance.nemesis.mutations import Mutator, operator
from conformance.nemesis.wire import Frame

#: transfer fields (transport 2.7.5) by position
MORE, STATE = 5, 7
FLOW = 0x13


def _pad(fields: list[Any], n: int) -> list[Any]:
    return fields + [None] * (n - len(fields))


@operator("declared-as-accepted", P, "answers the client's declare with accepted instead of declared (no txn-id): a coordinator that takes the control link and then treats a declare as a plain message")
class DeclaredAsAccepted(Mutator):
    def rewrite(self, sender: Sender, f: Frame) -> list[bytes] | None:
        from proton import Described, ulong

        if sender is not S or f.name != "declared":
            return None
        _, fields, _ = split(f.raw)
        fields[4] = Described(ulong(ACCEPTED), [])
        self.applied(f"disposition {fields[1]}: declared sent as accepted (no txn-id)")
        return [rebuild(f, DISPOSITION, fields)]


@operator("commit-as-rollback", P, "sends the client's discharge(fail=false) as discharge(fail=true): the broker rolls back, and the client is told its commit was accepted")
class CommitAsRollback(Mutator):
    def rewrite(self, sender: Sender, f: Frame) -> list[bytes] | None:
        from proton import Described, Message, symbol

        if sender is not C or f.name != "discharge":
            return None
        head, fields, payload = split(f.raw)
        if len(fields) > MORE and fields[MORE]:
            self.skipped("a discharge split over frames (more=true)")
            return None
        message = Message()
        message.decode(payload)
        values = list(getattr(message.body, "value", None) or [])
        message.body = Described(symbol("amqp:discharge:list"), [values[0] if values else None, True])
        self.applied(f"discharge delivery-id {fields[1]}: fail false -> true")
        raw_performative = f.raw[len(head) : len(f.raw) - len(payload)]
        from adapters.amqp10.mutations import frame

        return [frame(head, raw_performative + message.encode())]


class TransferDropper(Mutator):
    """Drops chosen transfers from the client before the broker, keeping the session consistent.

    A transfer cannot just vanish: the session numbers deliveries (transport 2.5.6, delivery-id =
    the sender's next-outgoing-id), so the broker would see a gap. The client's later delivery-ids
    and its flow's next-outgoing-id are lowered past the dropped ones, and the broker's dispositions
    and its flow's next-incoming-id raised back, so each peer sees a consistent session. (An aborted
    transfer would keep the numbering, but qpidd 1.39.0 closes the connection on one.) ``answer``:
    the client is told its dropped transfer was accepted, as the broker would have told it."""

    answer = False

    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        self.dropped: dict[int, list[int]] = {}  # client channel -> dropped delivery-ids (the client's numbering)
        self.client_channel: dict[int, int] = {}  # broker's channel -> client's
        self.broker_channel: dict[int, int] = {}  # client's channel -> broker's

    def drop(self, f: Frame, fields: list[Any], payload: bytes) -> str | None:
        """Why this first frame of a client's transfer is dropped, or None to forward it."""
        raise NotImplementedError

    def seen(self, f: Frame) -> None:
        """Every frame from the client, before it is judged (counting transactions, ...)."""

    def rewrite(self, sender: Sender, f: Frame) -> list[bytes] | None:
        from proton import uint

        what = kind(f)
        if sender is S:
            if what == "begin":
                _, fields, _ = split(f.raw)
                if fields and fields[0] is not None:
                    self.client_channel[f.channel] = int(fields[0])
                    self.broker_channel[int(fields[0])] = f.channel
                return None
            gone = self.dropped.get(self.client_channel.get(f.channel, -1))
            if not gone or what not in ("disposition", "flow"):
                return None
            _, fields, _ = split(f.raw)
            if what == "flow":
                if fields and fields[0] is not None:
                    fields[0] = uint(_old(int(fields[0]), gone))
                    return [rebuild(f, FLOW, fields)]
                return None
            if not fields[0]:  # role sender: the broker settling its own deliveries
                return None
            fields[1] = uint(_old(int(fields[1]), gone))
            if len(fields) > 2 and fields[2] is not None:
                fields[2] = uint(_old(int(fields[2]), gone))
            return [rebuild(f, DISPOSITION, fields)]
        self.seen(f)
        gone = self.dropped.setdefault(f.channel, [])
        if what == "flow" and gone:
            _, fields, _ = split(f.raw)
            if len(fields) > 2 and fields[2] is not None:
                fields[2] = uint(int(fields[2]) - sum(1 for d in gone if d < int(fields[2])))
                return [rebuild(f, FLOW, fields)]
            return None
        if what != "transfer":
            return None
        _, fields, payload = split(f.raw)
        delivery = fields[1] if len(fields) > 1 else None
        if delivery is None:  # a continuation frame: its delivery was judged at its first frame
            return None
        why = None if len(fields) > MORE and fields[MORE] else self.drop(f, fields, payload)
        if why is not None:
            gone.append(int(delivery))
            if self.answer and f.channel in self.broker_channel:
                from proton import Described, ulong

                accept = [True, uint(int(delivery)), None, True, Described(ulong(ACCEPTED), [])]
                self.io.to_client([performative(DISPOSITION, accept, self.broker_channel[f.channel])])
            self.applied(f"transfer delivery-id {delivery} ({why}) not forwarded" + (", accepted to the client" if self.answer else ""))
            return []
        if not gone:
            return None
        fields[1] = uint(int(delivery) - sum(1 for d in gone if d < int(delivery)))
        return [rebuild(f, TRANSFER, fields)]


@operator("tx-work-dropped", P, "drops the Nth transactional transfer (default 2nd) of every transaction before the broker, renumbering the session's later deliveries both ways, so the discharge the broker accepts commits only part of the work", default_param="2")
class TxWorkDropped(TransferDropper):
    """A broker whose commit is not atomic: one publish of each transaction never reaches the queue.
    The client is not told anything about it: a transactional publish waits for no outcome."""

    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        self.nth = int(self.param or 2)
        self.count: dict[int, int] = {}  # client channel -> transactional transfers in the open transaction

    def seen(self, f: Frame) -> None:
        if f.name in ("discharge", "discharge(fail)"):
            self.count.pop(f.channel, None)

    def drop(self, f: Frame, fields: list[Any], payload: bytes) -> str | None:
        if f.name != "transfer(txn)":
            return None
        n = self.count[f.channel] = self.count.get(f.channel, 0) + 1
        return f"#{n} of its transaction" if n == self.nth else None


@operator("confirmed-transfer-lost", P, "discards the client's Nth durable transfer (default 2nd) outside transactions and tells the client the broker accepted it", default_param="2")
class ConfirmedTransferLost(TransferDropper):
    """A broker that loses a message it confirmed (messaging 3.4.2: accepted, settled)."""

    answer = True

    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        self.nth = int(self.param or 2)
        self.durable = 0

    def drop(self, f: Frame, fields: list[Any], payload: bytes) -> str | None:
        if f.name != "transfer" or (len(fields) > 4 and fields[4]) or not _durable(payload):
            return None
        self.durable += 1
        return f"durable transfer #{self.durable}" if self.durable == self.nth else None


def _durable(payload: bytes) -> bool:
    """The message's header section (messaging 3.2.1, descriptor 0x70) says durable=true."""
    if payload[:3] != b"\x00\x53\x70":
        return False
    from proton import Data

    data = Data()
    data.decode(payload)
    values = list(getattr(data.get_object(), "value", None) or [])
    return bool(values and values[0])


@operator("torn-transfer-enqueued", P, "when the client vanishes inside a transfer frame, or between the transfer frames of a message it split (more=true), hands the broker the message as far as it arrived (its sections, its body cut where it broke) in a frame of its own")
class TornTransferEnqueued(Mutator):
    """A broker that enqueues the part of a message that arrived before the connection broke. Only
    whole frames pass the proxy, so the broker never holds part of a frame; the transfer frames of a
    delivery the client split (more=true) are held back until its last one comes (then forwarded
    unchanged). When the client goes away, the operator builds the torn message from the bytes held
    back (the first transfer's performative, the complete sections, the body bytes that came) and
    hands it over as one last transfer before the broker's side is closed."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: The client's transfer frames of a delivery not yet complete (more=true), held back.
        self.held: list[bytes] = []

    def rewrite(self, sender: Sender, frame: Frame) -> list[bytes] | None:
        if sender is not C or kind(frame) != "transfer":
            return None
        _, fields, _ = split(frame.raw)
        more = len(fields) > 5 and bool(fields[5])
        if not more and not self.held:
            return None
        self.held.append(frame.raw)
        if more:
            return []
        out, self.held = self.held, []
        return out

    def closing(self, sender: Sender) -> list[bytes]:
        from proton import Data

        if sender is not C:
            return []
        raw = self.io.pending(C)
        partial = len(raw) >= 8 and raw[5] == 0 and raw[raw[4] * 4:][:3] == b"\x00\x53\x14"
        if not self.held and not partial:
            return []  # not inside a transfer
        first = self.held[0] if self.held else raw
        doff = first[4] * 4
        data = Data()
        try:
            used = data.decode(first[doff:])
        except Exception:
            return []  # the performative itself is torn: nothing to enqueue
        fields = list(split(first)[1])  # binaries copied out of the codec's buffer
        came = b"".join(split(f)[2] for f in self.held)
        if partial and self.held:
            tail = Data()
            try:
                came += raw[raw[4] * 4:][tail.decode(raw[raw[4] * 4:]):]
            except Exception:  # noqa: BLE001 - the continuation's performative itself is torn: its payload never came
                self.io.note("the last transfer's performative arrived torn: only the held frames' payload is handed over")
        elif partial:
            came = first[doff + used:]
        sections, rest = b"", came
        while rest[:2] == b"\x00\x53" and len(rest) > 3:
            code = rest[2]
            if code in (0x75, 0x77) and len(rest) > 4 and rest[3] in (0xA0, 0xB0):  # data or amqp-value binary
                start = 5 if rest[3] == 0xA0 else 8
                body = rest[start:]
                sections += rest[:3] + b"\xb0" + struct.pack(">I", len(body)) + body
                break
            section = Data()
            try:
                n = section.decode(rest)
            except Exception:
                break
            sections, rest = sections + rest[:n], rest[n:]
        from proton import Described, ulong

        from adapters.amqp10.mutations import frame

        fields += [None] * (6 - len(fields))
        fields[5] = False  # the last transfer of the delivery
        perf = Data()
        perf.put_object(Described(ulong(TRANSFER), fields))
        torn = frame(first[:doff], perf.encode() + sections)
        where = f"{len(self.held)} transfer frame(s) with more=true" if self.held else f"a transfer {len(raw)} of {int.from_bytes(raw[:4], 'big')} bytes"
        self.held = []
        self.applied(f"the client left after {where}: handed to the broker as one message of {len(sections)} bytes")
        return [torn]


def _old(n: int, gone: list[int]) -> int:
    """The client's delivery-id of the broker's ``n`` (the inverse of the renumbering)."""
    for d in sorted(gone):
        if d <= n:
            n += 1
    return n


@operator("tx-state-stripped", P, "sends the client's transactional transfers and dispositions without their transactional-state: publishes and acknowledgements take effect at once, outside the transaction")
class TxStateStripped(Mutator):
    def rewrite(self, sender: Sender, f: Frame) -> list[bytes] | None:
        if sender is not C or f.name not in ("transfer(txn)", "disposition(txn)"):
            return None
        _, fields, _ = split(f.raw)
        at = STATE if f.name == "transfer(txn)" else 4
        state = fields[at] if len(fields) > at else None
        if descriptor_code(state) != TRANSACTIONAL_STATE:
            return None  # a continuation frame carries no state
        outcome = _pad(list(getattr(state, "value", None) or []), 2)[1]
        fields[at] = outcome
        self.applied(f"{f.name} {fields[1]}: transactional-state removed" + (" (its outcome kept)" if outcome is not None else ""))
        return [rebuild(f, TRANSFER if f.name == "transfer(txn)" else DISPOSITION, fields)]
