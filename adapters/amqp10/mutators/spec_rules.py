"""AMQP 1.0 operators for the spec-rule cases (conformance/cases/link/test_spec_*.py): each makes a
healthy broker show the client what a broker breaking that rule would send.
"""

from __future__ import annotations

from typing import Any

from adapters.amqp10.mutations import ATTACH, TRANSFER, C, HeaderRewriter, P, S, rebuild, split
from conformance.nemesis.faults import Sender
from conformance.nemesis.mutations import Mutator, operator
from conformance.nemesis.wire import Frame

#: attach fields (transport 2.7.3) and source fields (messaging 3.5.3) by position
SOURCE, SOURCE_OUTCOMES = 5, 9
#: transfer field (transport 2.7.5): delivery-tag
DELIVERY_TAG = 2
#: header field (messaging 3.2.1): ttl
TTL = 2


@operator("delivery-tag-repeated", P, "gives every transfer the broker sends the same delivery-tag, so deliveries unsettled together share one")
class DeliveryTagRepeated(Mutator):
    TAG = b"\x00"

    def rewrite(self, sender: Sender, f: Frame) -> list[bytes] | None:
        if sender is not S or f.name != "transfer":
            return None
        _, fields, _ = split(f.raw)
        if len(fields) <= DELIVERY_TAG or fields[DELIVERY_TAG] is None:
            return None
        self.applied(f"transfer delivery-id {fields[1]}: delivery-tag -> {self.TAG.hex()}")
        fields[DELIVERY_TAG] = self.TAG
        return [rebuild(f, TRANSFER, fields)]


@operator("ttl-raised", P, "sends every message that left the broker with a header ttl with that ttl raised by an hour (not reduced: it never dies in a loop)")
class TtlRaised(HeaderRewriter):
    HOUR_MS = 3_600_000

    def change(self, header: list[Any]) -> str | None:
        from proton import uint

        if header[TTL] is None:
            return None
        before = int(header[TTL])
        header[TTL] = uint(before + self.HOUR_MS)
        return f"ttl {before} -> {before + self.HOUR_MS}"


@operator("source-outcome-invalid", P, "adds a descriptor that names no outcome (amqp:bogus:list) to the outcomes of every source the broker attaches")
class SourceOutcomeInvalid(Mutator):
    def rewrite(self, sender: Sender, f: Frame) -> list[bytes] | None:
        from proton import Array, Described, UNDESCRIBED, Data, symbol

        if sender is not S or f.name != "attach":
            return None
        _, fields, _ = split(f.raw)
        # the broker's role sender (false): the source is its own
        if len(fields) <= SOURCE or fields[2] or not hasattr(fields[SOURCE], "value"):
            return None
        src = list(fields[SOURCE].value or [])
        src += [None] * (SOURCE_OUTCOMES + 1 - len(src))
        had = [str(o) for o in (getattr(src[SOURCE_OUTCOMES], "elements", None) or ([src[SOURCE_OUTCOMES]] if src[SOURCE_OUTCOMES] else []))]
        src[SOURCE_OUTCOMES] = Array(UNDESCRIBED, Data.SYMBOL, *[symbol(o) for o in had + ["amqp:bogus:list"]])
        fields[SOURCE] = Described(fields[SOURCE].descriptor, src)
        self.applied(f"attach {fields[0]!r}: source outcomes {had or 'unset'} -> {had + ['amqp:bogus:list']}")
        return [rebuild(f, ATTACH, fields)]


@operator("no-node-detach-error-cleared", P, "strips the error from the detach a broker sends right after an attach naming no terminus (the link is detached without saying why)")
class NoNodeDetachErrorCleared(Mutator):
    DETACH = 0x16

    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        self.null: set[tuple[int, int]] = set()  # (broker channel, broker handle) attached with no terminus

    def rewrite(self, sender: Sender, f: Frame) -> list[bytes] | None:
        if sender is not S or f.name not in ("attach", "detach"):
            return None
        _, fields, _ = split(f.raw)
        if f.name == "attach":
            # no terminus of its own side: the source of a sender (role false), the target of a receiver
            if len(fields) <= 6 or (fields[6] is None if fields[2] else fields[5] is None):
                self.null.add((f.channel, int(fields[1])))
            return None
        key = (f.channel, int(fields[0]))
        if key not in self.null or len(fields) < 3 or fields[2] is None:
            return None
        self.null.discard(key)
        self.applied(f"detach of handle {fields[0]} (after an attach with no terminus): error {fields[2]} removed")
        fields[2] = None
        return [rebuild(f, self.DETACH, fields)]


@operator("continuation-tag-changed", P, "gives the continuation transfers of the broker's multi-transfer deliveries another delivery-tag than their first transfer's")
class ContinuationTagChanged(Mutator):
    TAG = b"\xff\xfe"

    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        self.under_way: set[tuple[int, int]] = set()  # (broker channel, handle) with a delivery's transfers still to come

    def rewrite(self, sender: Sender, f: Frame) -> list[bytes] | None:
        if sender is not S or f.name != "transfer":
            return None
        _, fields, _ = split(f.raw)
        fields += [None] * (6 - len(fields))
        link = (f.channel, int(fields[0]))
        continuing = link in self.under_way
        if fields[5]:
            self.under_way.add(link)
        else:
            self.under_way.discard(link)
        if not continuing:
            return None
        self.applied(f"continuation transfer on handle {fields[0]}: delivery-tag -> {self.TAG.hex()}")
        fields[DELIVERY_TAG] = self.TAG
        return [rebuild(f, TRANSFER, fields)]


@operator("initial-delivery-count-dropped", P, "removes the initial-delivery-count from every attach the broker sends as a link's sender")
class InitialDeliveryCountDropped(Mutator):
    INITIAL = 9

    def rewrite(self, sender: Sender, f: Frame) -> list[bytes] | None:
        if sender is not S or f.name != "attach":
            return None
        _, fields, _ = split(f.raw)
        if len(fields) <= self.INITIAL or fields[2] or fields[self.INITIAL] is None:
            return None
        self.applied(f"attach {fields[0]!r}: initial-delivery-count {fields[self.INITIAL]} removed")
        fields[self.INITIAL] = None
        return [rebuild(f, ATTACH, fields)]


@operator("flow-delivery-count-dropped", P, "removes the delivery-count from every link flow the broker sends (as RabbitMQ 3.x's receiving links do)")
class FlowDeliveryCountDropped(Mutator):
    FLOW, HANDLE, COUNT = 0x13, 4, 5

    def rewrite(self, sender: Sender, f: Frame) -> list[bytes] | None:
        if sender is not S or f.name != "flow":
            return None
        _, fields, _ = split(f.raw)
        if len(fields) <= self.COUNT or fields[self.HANDLE] is None or fields[self.COUNT] is None:
            return None
        self.applied(f"flow handle {fields[self.HANDLE]}: delivery-count {fields[self.COUNT]} removed")
        fields[self.COUNT] = None
        return [rebuild(f, self.FLOW, fields)]


DISPOSITION, TRANSACTIONAL_STATE, ACCEPTED, REJECTED = 0x15, 0x34, 0x24, 0x25


def _code(state: Any) -> int | None:
    d = getattr(state, "descriptor", None)
    return int(d) if isinstance(d, int) else None


@operator("receiver-settlement-deferred", P, "sends the broker's dispositions of a client's transfers unsettled (settled=false): the broker seems to wait for the client to settle first")
class ReceiverSettlementDeferred(Mutator):
    """The client, told the broker has not settled, settles its side with a disposition of its own;
    the broker already settled those deliveries, so that answer is swallowed here (a broker may
    rightly end the session on a disposition of deliveries it no longer knows)."""

    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        self.deferred: set[tuple[int, int]] = set()  # (broker's channel, delivery-id) shown unsettled

    def rewrite(self, sender: Sender, f: Frame) -> list[bytes] | None:
        if f.name != "disposition":
            return None
        _, fields, _ = split(f.raw)
        if sender is C:
            if len(fields) > 1 and not fields[0] and self.deferred:  # role sender: the client settling its side
                first = int(fields[1])
                last = int(fields[2]) if len(fields) > 2 and fields[2] is not None else first
                ids = set(range(first, last + 1))
                if all(any(d == i for _, d in self.deferred) for i in ids):
                    self.deferred -= {(c, d) for c, d in self.deferred if d in ids}
                    self.applied(f"the client's disposition {first}..{last} swallowed: the broker settled those already")
                    return []
            return None
        if len(fields) < 4 or not fields[0] or not fields[3]:  # role receiver, settled
            return None
        first = int(fields[1])
        last = int(fields[2]) if len(fields) > 2 and fields[2] is not None else first
        self.deferred |= {(f.channel, i) for i in range(first, last + 1)}
        fields[3] = False
        self.applied(f"disposition {fields[1]}: settled true -> false")
        return [rebuild(f, DISPOSITION, fields)]


@operator("abort-cleared", P, "turns the client's aborted transfer into the last transfer of its delivery (aborted and more false): the broker gets the message whole")
class AbortCleared(Mutator):
    ABORTED, SETTLED, MORE = 9, 4, 5

    def rewrite(self, sender: Sender, f: Frame) -> list[bytes] | None:
        if sender is not C or f.name != "transfer":
            return None
        _, fields, _ = split(f.raw)
        if len(fields) <= self.ABORTED or not fields[self.ABORTED]:
            return None
        fields[self.ABORTED] = False
        fields[self.MORE] = False
        fields[self.SETTLED] = False
        self.applied(f"transfer delivery-id {fields[1]}: aborted true -> false (the delivery completes)")
        return [rebuild(f, TRANSFER, fields)]


@operator("dynamic-address-cleared", P, "removes the address from the source (target) of the broker's attach answering a client's dynamic source (target)")
class DynamicAddressCleared(Mutator):
    SOURCE, TARGET, DYNAMIC = 5, 6, 4

    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        self.dynamic: set[tuple[str, int]] = set()  # (link name, terminus position) the client asked to be dynamic

    def rewrite(self, sender: Sender, f: Frame) -> list[bytes] | None:
        from proton import Described

        if f.name != "attach":
            return None
        _, fields, _ = split(f.raw)
        if sender is C:
            for pos in (self.SOURCE, self.TARGET):
                term = list(getattr(fields[pos], "value", None) or []) if len(fields) > pos else []
                if len(term) > self.DYNAMIC and term[self.DYNAMIC]:
                    self.dynamic.add((str(fields[0]), pos))
            return None
        changed = False
        for pos in (self.SOURCE, self.TARGET):
            if (str(fields[0]), pos) not in self.dynamic or len(fields) <= pos or not hasattr(fields[pos], "value"):
                continue
            term = list(fields[pos].value or [])
            if term and term[0] is not None:
                self.applied(f"attach {fields[0]!r}: dynamic {'source' if pos == self.SOURCE else 'target'} address {term[0]!r} removed")
                term[0] = None
                fields[pos] = Described(fields[pos].descriptor, term)
                changed = True
        return [rebuild(f, ATTACH, fields)] if changed else None


@operator("transactional-state-unwrapped", P, "sends the outcome inside the broker's transactional-state dispositions as a plain outcome (the transaction no longer named)")
class TransactionalStateUnwrapped(Mutator):
    def rewrite(self, sender: Sender, f: Frame) -> list[bytes] | None:
        if sender is not S or f.name != "disposition":
            return None
        _, fields, _ = split(f.raw)
        if len(fields) < 5 or _code(fields[4]) != TRANSACTIONAL_STATE:
            return None
        inner = (list(fields[4].value or []) + [None, None])[1]
        fields[4] = inner
        self.applied(f"disposition {fields[1]}: transactional-state -> {inner}")
        return [rebuild(f, DISPOSITION, fields)]


@operator("discharge-error-accepted", P, "hides the transaction-error of a discharge the coordinator could not complete: a rejected answer becomes accepted, a control link detached with it is detached without an error")
class DischargeErrorAccepted(Mutator):
    DETACH = 0x16

    def rewrite(self, sender: Sender, f: Frame) -> list[bytes] | None:
        from proton import Described, ulong

        if sender is not S or f.name not in ("disposition", "detach"):
            return None
        _, fields, _ = split(f.raw)
        if f.name == "detach":
            error = fields[2] if len(fields) > 2 else None
            condition = str((list(getattr(error, "value", None) or []) + [""])[0])
            if not condition.startswith("amqp:transaction:"):
                return None
            fields[2] = None
            self.applied(f"detach of handle {fields[0]}: error {condition} removed")
            return [rebuild(f, self.DETACH, fields)]
        if len(fields) < 5 or _code(fields[4]) != REJECTED:
            return None
        error = (list(fields[4].value or []) + [None])[0]
        condition = str((list(getattr(error, "value", None) or []) + [""])[0])
        if not condition.startswith("amqp:transaction:"):
            return None
        fields[4] = Described(ulong(ACCEPTED), [])
        self.applied(f"disposition {fields[1]}: rejected ({condition}) -> accepted")
        return [rebuild(f, DISPOSITION, fields)]


FLOW = 0x13


@operator("echo-answer-dropped", P, "keeps from the client the broker's flows of a link that answer a client's flow with echo=true")
class EchoAnswerDropped(Mutator):
    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        self.asked = 0  # client flows with echo set, not answered yet

    def rewrite(self, sender: Sender, f: Frame) -> list[bytes] | None:
        if f.name != "flow":
            return None
        _, fields, _ = split(f.raw)
        fields += [None] * (10 - len(fields))
        if sender is C:
            if fields[9]:
                self.asked += 1
            return None
        if not self.asked or fields[4] is None:
            return None
        self.asked -= 1
        self.applied(f"flow handle {fields[4]} (the answer to an echo) not forwarded")
        return []


@operator("early-credit-dropped", P, "drops a receiver's flow that carries no delivery-count (credit granted before the broker's attach reached it)")
class EarlyCreditDropped(Mutator):
    def rewrite(self, sender: Sender, f: Frame) -> list[bytes] | None:
        if sender is not C or f.name != "flow":
            return None
        _, fields, _ = split(f.raw)
        fields += [None] * (10 - len(fields))
        if fields[4] is None or fields[5] is not None or not fields[6]:
            return None
        self.applied(f"flow handle {fields[4]} (link-credit {fields[6]}, no delivery-count) not forwarded")
        return []


@operator("settled-transfer-answered", P, "answers a client's transfer sent settled with a disposition, as a broker would that took it for unsettled")
class SettledTransferAnswered(Mutator):
    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        self.broker_channel: dict[int, int] = {}

    def rewrite(self, sender: Sender, f: Frame) -> list[bytes] | None:
        from adapters.amqp10.mutations import performative
        from proton import Described, uint, ulong

        if sender is S and f.name == "begin":
            _, fields, _ = split(f.raw)
            if fields and fields[0] is not None:
                self.broker_channel[int(fields[0])] = f.channel
            return None
        if sender is not C or f.name != "transfer":
            return None
        _, fields, _ = split(f.raw)
        fields += [None] * (6 - len(fields))
        theirs = self.broker_channel.get(f.channel)
        if not fields[4] or fields[1] is None or theirs is None:
            return None
        answer = performative(DISPOSITION, [True, uint(int(fields[1])), None, True, Described(ulong(ACCEPTED), [])], theirs)
        self.io.to_client([answer])
        self.applied(f"transfer delivery-id {fields[1]} sent settled: answered with a disposition (accepted)")
        return None


@operator("incomplete-unsettled-cleared", P, "clears incomplete-unsettled (and the unsettled map) in a receiver's attach, so the broker sends it new deliveries")
class IncompleteUnsettledCleared(Mutator):
    def rewrite(self, sender: Sender, f: Frame) -> list[bytes] | None:
        if sender is not C or f.name != "attach":
            return None
        _, fields, _ = split(f.raw)
        if len(fields) <= 8 or not fields[8]:
            return None
        fields[7], fields[8] = None, False
        self.applied(f"attach {fields[0]!r}: incomplete-unsettled true -> false")
        return [rebuild(f, ATTACH, fields)]


@operator("filter-key-stringified", P, "sends the keys of the filter-set in the broker's source as strings, not symbols")
class FilterKeyStringified(Mutator):
    SOURCE, FILTER = 5, 7

    def rewrite(self, sender: Sender, f: Frame) -> list[bytes] | None:
        from proton import Described

        if sender is not S or f.name != "attach":
            return None
        _, fields, _ = split(f.raw)
        if len(fields) <= self.SOURCE or not hasattr(fields[self.SOURCE], "value"):
            return None
        src = list(fields[self.SOURCE].value or [])
        if len(src) <= self.FILTER or not src[self.FILTER]:
            return None
        src[self.FILTER] = {str(k): v for k, v in dict(src[self.FILTER]).items()}
        fields[self.SOURCE] = Described(fields[self.SOURCE].descriptor, src)
        self.applied(f"attach {fields[0]!r}: filter keys {list(src[self.FILTER])} sent as strings")
        return [rebuild(f, ATTACH, fields)]
