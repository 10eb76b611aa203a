"""Faults a case can arm: what to do to a connection, on which frame, at which moment.

This is the nemesis role's narrow interface. A fault is data: the proxy (conformance.nemesis.proxy) watches
the frames of every connection it carries and fires the fault on the first frame that matches.
Triggers are counts of frames, never times, so a fault hits the same protocol moment on every run;
``Fault.fired`` is the condition a case waits on instead of sleeping.
"""

from __future__ import annotations

import enum
import threading
from dataclasses import dataclass, field


class Sender(str, enum.Enum):
    """Which peer sent the frame that triggers the fault."""

    CLIENT = "client"
    SERVER = "server"


class Moment(str, enum.Enum):
    #: The matching frame is held back: the peer never sees it.
    BEFORE = "before"
    #: The matching frame is forwarded and acknowledged by the peer's TCP stack, then the fault acts.
    AFTER = "after"
    #: The first half of the matching frame's bytes (never its frame-end octet) is forwarded and
    #: acknowledged by the peer's TCP stack, then the fault acts; the rest is never forwarded. The
    #: peer has read part of a frame: a frame split over TCP segments whose sender vanished.
    INSIDE = "inside"


class Action(str, enum.Enum):
    #: Reset both sockets (RST): what a crashed host or a pulled cable looks like to each side.
    CUT = "cut"
    #: Close both sockets in order (FIN) without any protocol close handshake.
    FIN = "fin"
    #: Blackhole: keep both sockets open and silently discard everything from now on.
    STALL = "stall"
    #: Hold the matching frame (and everything after it in that direction) for ``delay_s`` seconds,
    #: or, with ``until``, until one of those frames from the other peer has reached it (``delay_s``
    #: is then the bound on the wait).
    DELAY = "delay"
    #: Discard the matching frame and everything after it in that direction; the other direction flows.
    DROP = "drop"


@dataclass(eq=False)
class Fault:
    """Fire ``action`` on the ``nth`` frame named ``frame`` sent by ``sender``.

    ``frame`` is a protocol name as the wire codecs spell it ("tx.commit", "basic.deliver",
    "content-body", "transfer", "disposition") or "*" for any frame. Counting is per connection;
    ``connection`` restricts the fault to the k-th connection made through the proxy (1-based).
    A fault fires at most once.
    """

    action: Action
    frame: str
    sender: Sender = Sender.CLIENT
    nth: int = 1
    moment: Moment = Moment.BEFORE
    channel: int | None = None
    connection: int | None = None
    delay_s: float = 0.0
    #: A DELAY's hold ends once one of these frames from the other peer has been forwarded and
    #: acknowledged by its recipient's TCP stack: the hold spans that protocol event however slow
    #: the machine; ``delay_s`` only bounds the wait if it never comes (the hit then says so).
    until: tuple[str, ...] = ()
    #: Start counting only once this other fault has fired (a sequence of faults across reconnects).
    following: "Fault | None" = field(default=None, repr=False)
    fired: threading.Event = field(default_factory=threading.Event, repr=False)
    #: Set when the fault starts to act, before ``fired``: a DELAY's hold has begun (what a case
    #: waits on to act while the peer is held, e.g. a cancel while a body is half sent).
    struck: threading.Event = field(default_factory=threading.Event, repr=False)
    #: Where it fired: "conn#1 client frame 14 tx.commit (1st tx.commit)", for histories and checks.
    hit: str | None = field(default=None, repr=False)
    _counts: dict[int, int] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.action, self.sender, self.moment = Action(self.action), Sender(self.sender), Moment(self.moment)
        if self.nth < 1:
            raise ValueError("nth counts from 1")
        if self.action is Action.DELAY and self.delay_s <= 0:
            raise ValueError("a delay fault needs delay_s > 0")
        if self.action is Action.DELAY and self.moment is Moment.INSIDE:
            raise ValueError("a delay holds whole frames; it cannot act inside one")
        self.until = tuple(self.until)
        if self.until and self.action is not Action.DELAY:
            raise ValueError("only a delay holds until a frame")

    def matches(self, conn_id: int, sender: Sender, name: str, channel: int) -> bool:
        """Count the frame if it is of the watched kind; True when this is the one to fire on."""
        if self.fired.is_set() or sender is not self.sender:
            return False
        if self.following is not None and not self.following.fired.is_set():
            return False
        if self.connection is not None and conn_id != self.connection:
            return False
        if self.frame != "*" and name != self.frame:
            return False
        if self.channel is not None and channel != self.channel:
            return False
        n = self._counts.get(conn_id, 0) + 1
        self._counts[conn_id] = n
        return n == self.nth

    def describe(self) -> str:
        if self.moment is Moment.INSIDE:
            where = "after forwarding half of it"
        else:
            where = f"{self.moment.value} forwarding" if self.action is not Action.DROP or self.moment is Moment.AFTER else "instead of forwarding"
        held = f" until {' or '.join(self.until)} from the {other(self.sender).value} passed (at most {self.delay_s:g}s)" if self.until else ""
        return f"{self.action.value} on {_ordinal(self.nth)} {self.frame} from the {self.sender.value}, {where}{held}"

    @property
    def held_to_event(self) -> bool:
        """A hold with ``until`` that fired and ended on its frame, not on its bound."""
        return bool(self.until) and self.fired.is_set() and " held until " in (self.hit or "")

    def wait(self, timeout: float) -> bool:
        """Block until the fault fired (True) or ``timeout`` passed (False)."""
        return self.fired.wait(timeout)


def other(sender: Sender) -> Sender:
    return Sender.SERVER if sender is Sender.CLIENT else Sender.CLIENT


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def cut(frame: str, *, sender: Sender | str = Sender.CLIENT, nth: int = 1, after: bool = False, **kw: object) -> Fault:
    """The usual fault: reset the connection at a frame."""
    return Fault(Action.CUT, frame, Sender(sender), nth, Moment.AFTER if after else Moment.BEFORE, **kw)  # type: ignore[arg-type]
