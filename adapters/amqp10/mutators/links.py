"""AMQP 1.0 operators on outcomes, settlement, flow and detach of a receiving link: each makes a
healthy broker show, through the proxy, what a client of a broker with the bug saw on the wire.

Channels: a session has the client's channel number on frames the client sends and the broker's
on frames the broker sends; the broker's begin names the client's channel (remote-channel), which
is how an operator answers the client on the right channel.
"""

from __future__ import annotations

from typing import Any, ClassVar

from adapters.amqp10.mutations import (
    ATTACH,
    ROLE,
    DISPOSITION,
    REJECTED,
    SND_SETTLE_MODE,
    C,
    OutcomeSwap,
    P,
    S,
    performative,
    rebuild,
    kind,
    receiver_outcome,
    split,
)
from conformance.nemesis.faults import Sender
from conformance.nemesis.mutations import Mutator, operator
from conformance.nemesis.wire import Frame

MODIFIED = 0x27
FLOW, END = 0x13, 0x17
#: flow fields (transport 2.7.4) by position
NEXT_INCOMING_ID, INCOMING_WINDOW, HANDLE, DELIVERY_COUNT, LINK_CREDIT, DRAIN = 0, 1, 4, 5, 6, 8
#: modified fields (messaging 3.4.5)
DELIVERY_FAILED, UNDELIVERABLE_HERE = 0, 1


def _field(fields: list[Any], i: int) -> Any:
    return fields[i] if len(fields) > i else None


class _Sessions(Mutator):
    """Keeps the broker's channel of each of the client's sessions (from the broker's begin)."""

    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        self.broker_channel: dict[int, int] = {}  # client's channel -> broker's

    def seen(self, sender: Sender, f: Frame) -> None:
        if sender is S and f.name == "begin":
            _, fields, _ = split(f.raw)
            if fields and fields[0] is not None:
                self.broker_channel[int(fields[0])] = f.channel


@operator("modified-as-rejected", P, "sends the receiver's modified outcome as rejected (a message to retry is discarded)")
class ModifiedAsRejected(OutcomeSwap):
    was, now = MODIFIED, REJECTED
    NAMES: ClassVar[dict[int, str]] = {**OutcomeSwap.NAMES, MODIFIED: "modified"}


@operator("undeliverable-here-cleared", P, "sends modified(undeliverable-here=true) with undeliverable-here false, so the broker may give the message back to the link that refused it")
class UndeliverableHereCleared(Mutator):
    def rewrite(self, sender: Sender, f: Frame) -> list[bytes] | None:
        from proton import Described, ulong

        fields = receiver_outcome(sender, f, MODIFIED)
        if fields is None:
            return None
        state = list(getattr(fields[4], "value", None) or []) + [None, None]
        if not state[UNDELIVERABLE_HERE]:
            return None
        state[UNDELIVERABLE_HERE] = False
        fields[4] = Described(ulong(MODIFIED), [x for x in state[:3]])
        self.applied(f"disposition {fields[1]}: modified undeliverable-here true -> false")
        return [rebuild(f, DISPOSITION, fields)]


@operator("drain-answer-dropped", P, "drops the broker's flow that answers a receiver's drain (drain echoed, credit used up), so the client never learns the drain completed")
class DrainAnswerDropped(Mutator):
    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        self.draining = 0

    def rewrite(self, sender: Sender, f: Frame) -> list[bytes] | None:
        if f.name != "flow":
            return None
        _, fields, _ = split(f.raw)
        if _field(fields, HANDLE) is None or not _field(fields, DRAIN):
            return None
        if sender is C:
            self.draining += 1
            return None
        if not self.draining:
            return None
        self.applied(f"flow handle {fields[HANDLE]} (drain answer, link-credit {_field(fields, LINK_CREDIT)}) not forwarded")
        return []


@operator("drain-ends-session", P, "answers a receiver's drain flow by ending its session with amqp:internal-error (the broker's session crashed on the drain)")
class DrainEndsSession(_Sessions):
    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        self.ended_client: set[int] = set()  # client channels whose session the operator ended
        self.ended_broker: set[int] = set()  # the broker's channels of those sessions

    def rewrite(self, sender: Sender, f: Frame) -> list[bytes] | None:
        from proton import Described, symbol, ulong

        self.seen(sender, f)
        if sender is C and f.channel in self.ended_client:
            if f.name == "end":  # the client's answer to the injected end: the session is gone on both sides
                self.ended_client.discard(f.channel)
            return []
        if sender is S and f.channel in self.ended_broker:
            if f.name == "end":  # the broker's answer to the end sent on the client's behalf
                self.ended_broker.discard(f.channel)
            return []
        if sender is not C or f.name != "flow":
            return None
        _, fields, _ = split(f.raw)
        if _field(fields, HANDLE) is None or not _field(fields, DRAIN):
            return None
        theirs = self.broker_channel.get(f.channel)
        if theirs is None:
            self.skipped(f"drain on channel {f.channel}: the session's begin was not seen")
            return None
        error = Described(ulong(0x1D), [symbol("amqp:internal-error"), "session crashed on a drain (injected by the self-test)", None])
        self.io.to_client([performative(END, [error], theirs)])
        self.ended_client.add(f.channel)
        self.ended_broker.add(theirs)
        self.applied(f"drain flow on channel {f.channel} answered by end(amqp:internal-error); the broker's session ended too")
        return [performative(END, [], f.channel)]


@operator("credit-inflated", P, "adds 3 to the link-credit of every flow a receiver sends, so the broker sends transfers beyond the credit the client granted")
class CreditInflated(Mutator):
    EXTRA = 3

    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        self.receivers: set[tuple[int, int]] = set()  # (client channel, client handle) of receiving links

    def rewrite(self, sender: Sender, f: Frame) -> list[bytes] | None:
        from proton import uint

        if sender is C and f.name == "attach":
            _, fields, _ = split(f.raw)
            if len(fields) > 2 and fields[2]:
                self.receivers.add((f.channel, int(fields[1])))
            return None
        if sender is not C or f.name != "flow":
            return None
        _, fields, _ = split(f.raw)
        credit = _field(fields, LINK_CREDIT)
        handle = _field(fields, HANDLE)
        if handle is None or (f.channel, int(handle)) not in self.receivers or credit is None or int(credit) == 0 or _field(fields, DRAIN):
            return None
        fields[LINK_CREDIT] = uint(int(credit) + self.EXTRA)
        self.applied(f"flow handle {fields[HANDLE]}: link-credit {credit} -> {int(credit) + self.EXTRA}")
        return [rebuild(f, FLOW, fields)]


@operator("detach-unanswered", P, "keeps a receiver's detach (closed=true) from the broker, as if its detach handling failed: no detach answer, the link stays attached there and its unsettled deliveries stay acquired")
class DetachUnanswered(_Sessions):
    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        self.handles: dict[tuple[int, int], int] = {}  # (client channel, client handle) -> broker's handle
        self.names: dict[tuple[int, str], int] = {}  # (client channel, link name) -> client handle
        self.receivers: set[tuple[int, int]] = set()
        self.gone: set[tuple[int, int]] = set()  # (broker channel, broker handle) of swallowed links

    def rewrite(self, sender: Sender, f: Frame) -> list[bytes] | None:
        self.seen(sender, f)
        if f.name == "attach":
            _, fields, _ = split(f.raw)
            if sender is C and len(fields) > 2:
                self.names[(f.channel, str(fields[0]))] = int(fields[1])
                if fields[2]:  # role receiver
                    self.receivers.add((f.channel, int(fields[1])))
            elif sender is S:
                client = next((c for c, b in self.broker_channel.items() if b == f.channel), None)
                mine = self.names.get((client, str(fields[0]))) if client is not None else None
                if mine is not None:
                    self.handles[(client, mine)] = int(fields[1])
            return None
        if sender is S and kind(f) in ("transfer", "flow", "detach"):
            _, fields, _ = split(f.raw)
            handle = _field(fields, 0 if f.name != "flow" else HANDLE)
            if handle is not None and (f.channel, int(handle)) in self.gone:
                self.applied(f"{f.name} on the swallowed link (handle {handle}) not forwarded")
                return []
            return None
        if sender is not C or f.name != "detach":
            return None
        _, fields, _ = split(f.raw)
        key = (f.channel, int(fields[0]))
        theirs = self.broker_channel.get(f.channel)
        if key not in self.receivers or theirs is None or key not in self.handles:
            return None
        self.gone.add((theirs, self.handles[key]))
        self.applied(f"detach of handle {fields[0]} kept from the broker, never answered")
        return []


@operator("session-window-frozen", P, "keeps the right edge of a receiver's session window where its begin put it: the client's flows that reopen the incoming-window reach the broker as if nothing had been taken, so the broker stops at the first window")
class SessionWindowFrozen(_Sessions):
    #: Sessions opened with a window at least this large are left alone (proton's default is 2^31-1).
    SMALL = 1 << 16

    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        self.window: dict[int, int] = {}  # client channel -> incoming-window of its begin
        self.edge: dict[int, int] = {}  # client channel -> the broker's first next-outgoing-id + that window

    def rewrite(self, sender: Sender, f: Frame) -> list[bytes] | None:
        from proton import uint

        self.seen(sender, f)
        if f.name != "begin" and f.name != "flow":
            return None
        _, fields, _ = split(f.raw)
        if f.name == "begin":
            if sender is C and _field(fields, 2) is not None and int(fields[2]) < self.SMALL:
                self.window[f.channel] = int(fields[2])
            elif sender is S and _field(fields, 0) is not None and int(fields[0]) in self.window:
                self.edge[int(fields[0])] = int(fields[1]) + self.window[int(fields[0])]
            return None
        if sender is not C or f.channel not in self.edge or _field(fields, NEXT_INCOMING_ID) is None:
            return None
        frozen = max(0, self.edge[f.channel] - int(fields[NEXT_INCOMING_ID]))
        if frozen >= int(fields[INCOMING_WINDOW]):
            return None
        self.applied(f"flow on channel {f.channel}: incoming-window {fields[INCOMING_WINDOW]} -> {frozen} (next-incoming-id {fields[NEXT_INCOMING_ID]})")
        fields[INCOMING_WINDOW] = uint(frozen)
        return [rebuild(f, FLOW, fields)]


@operator("settle-mode-misreported", P, "rewrites the snd-settle-mode in the broker's attach of a sending link (unsettled <-> settled, mixed -> settled): the mode it states is not the one its transfers keep to")
class SettleModeMisreported(Mutator):
    SWAP: ClassVar[dict[int, int]] = {0: 1, 1: 0, 2: 1}
    NAMES = ("unsettled", "settled", "mixed")

    def rewrite(self, sender: Sender, f: Frame) -> list[bytes] | None:
        from proton import ubyte

        if sender is not S or f.name != "attach":
            return None
        _, fields, _ = split(f.raw)
        # the broker's role sender (false): the client's receiving link
        if len(fields) <= SND_SETTLE_MODE or fields[2] or fields[SND_SETTLE_MODE] is None:
            return None
        was = int(fields[SND_SETTLE_MODE])
        fields[SND_SETTLE_MODE] = ubyte(self.SWAP.get(was, 0))
        self.applied(f"attach {fields[0]!r}: snd-settle-mode {self.NAMES[was]} -> {self.NAMES[self.SWAP.get(was, 0)]}")
        return [rebuild(f, ATTACH, fields)]


@operator("disposition-doubled", P, "sends every disposition the broker gives a sender twice: each transfer is settled a second time")
class DispositionDoubled(Mutator):
    def rewrite(self, sender: Sender, f: Frame) -> list[bytes] | None:
        if sender is not S or kind(f) != "disposition":
            return None
        _, fields, _ = split(f.raw)
        if not fields or not fields[0]:  # role receiver: the broker settling a sender's transfers
            return None
        self.applied(f"disposition {fields[1]}..{fields[2] if len(fields) > 2 and fields[2] is not None else fields[1]} sent twice")
        return [f.raw, f.raw]


#: source fields (messaging 3.5.3) by position; attach fields (transport 2.7.3)
SOURCE, DISTRIBUTION_MODE = 5, 6


def _with_distribution_mode(source: Any, mode: str) -> Any:
    from proton import Described, symbol

    fields = list(source.value or []) + [None] * (DISTRIBUTION_MODE + 1)
    fields = fields[: max(len(source.value or []), DISTRIBUTION_MODE + 1)]
    fields[DISTRIBUTION_MODE] = symbol(mode)
    return Described(source.descriptor, fields)


@operator("browse-acquires", P, "attaches a browsing receiver (distribution-mode copy) as an acquiring one (move) at the broker and shows the client copy granted: a browser takes the message away")
class BrowseAcquires(Mutator):
    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        self.browsing: set[str] = set()

    def rewrite(self, sender: Sender, f: Frame) -> list[bytes] | None:
        if f.name != "attach":
            return None
        _, fields, _ = split(f.raw)
        source = _field(fields, SOURCE)
        if source is None or not hasattr(source, "value"):
            return None
        mode = _field(list(source.value or []), DISTRIBUTION_MODE)
        name = str(fields[0])
        if sender is C and fields[ROLE] and str(mode) == "copy":  # the client's receiving link asks to browse
            self.browsing.add(name)
            fields[SOURCE] = _with_distribution_mode(source, "move")
            self.applied(f"attach {name!r}: distribution-mode copy -> move (the broker is asked to acquire)")
            return [rebuild(f, ATTACH, fields)]
        if sender is S and not fields[ROLE] and name in self.browsing:
            self.browsing.discard(name)
            fields[SOURCE] = _with_distribution_mode(source, "copy")
            self.applied(f"attach {name!r}: the broker's distribution-mode {mode} -> copy (the client believes it browses)")
            return [rebuild(f, ATTACH, fields)]
        return None
