"""Exceptions the neutral API raises, in protocol-neutral terms.

Cases and checkers see these, never a client library's own exceptions, so one case reads the same
through every adapter.
"""

from __future__ import annotations


class ConformanceError(Exception):
    """Base of the suite's own errors."""


class UsageError(ConformanceError):
    """Bad input from the user: unknown broker, malformed profile or results file, bad option."""


class TargetError(ConformanceError):
    """The target cannot be launched or reached (infrastructure, not a broker verdict)."""


class AdapterError(ConformanceError):
    """The adapter could not carry out an operation for a reason that is not the broker's answer."""


class Unsupported(AdapterError):
    """The case cannot be put to the broker, for one of the three reasons of conformance.unsupported
    (``kind``); by default the adapter or protocol cannot express the operation at all (e.g.
    basic.recover on AMQP 1.0).

    ``refusal``: for kind ``refused``, the broker's clean refusal as seen on the wire (reply code and
    text, AMQP 1.0 error condition, or the attach field it answered), recorded as the observation."""

    #: Who lacks the capability, for the report: "adapter" or "target".
    by = "adapter"
    #: Which meaning of unsupported, when the raiser names none.
    default_kind = "cannot-express"

    def __init__(self, message: str, *, kind: str | None = None, refusal: str = "") -> None:
        from conformance.unsupported import REFUSED, check_kind

        super().__init__(message)
        self.kind = check_kind(kind or self.default_kind, type(self).__name__)
        if self.kind == REFUSED and not refusal:
            raise ValueError("an unsupported of kind refused must record the broker's refusal")
        self.refusal = refusal


class TargetCannot(Unsupported):
    """The target cannot do what the case needs: take a fault (an external URL cannot be restarted by
    the suite; kind ``no-fault``, the default), count or wait on something its protocol gives no way
    to see (``cannot-express``), or offer an optional protocol facility it refused cleanly
    (``refused``, e.g. a transaction coordinator link detached with amqp:not-implemented)."""

    by = "target"
    default_kind = "no-fault"


class ProtocolViolation(AdapterError):
    """The broker answered in a way its protocol does not allow (e.g. an AMQP 1.0 declare answered
    with accepted, when a coordinator may only answer declared or rejected). Never unsupported: the
    case fails, naming the rule (``rule``: the rule's reference, e.g. "amqp-1.0 4.3 declare error")."""

    def __init__(self, rule: str, *, expected: str, observed: str) -> None:
        super().__init__(f"{observed} ({rule}: {expected})")
        self.rule = rule
        self.expected = expected
        self.observed = observed


class SettlementRefused(AdapterError):
    """The client refuses to settle a delivery the broker settled at send (unreliable link, no-ack):
    there is nothing left to acknowledge, release or reject."""


class OperationTimeout(AdapterError):
    """A wait with a deadline expired (no delivery, no reply)."""


class QueueUnavailable(OperationTimeout):
    """The broker's own report says a queue cannot serve its messages (e.g. no replica holds a log
    and none is being elected): waiting longer would not change the answer."""


class PublishNotConfirmed(AdapterError):
    """The broker answered a confirmed publish with a nack (or returned it unroutable): it did not
    take the message. A replicated queue does so while it has no leader."""


class ConnectionLost(AdapterError):
    """The connection is gone: cut by the suite, closed by the peer, or the socket failed."""

    def __init__(self, message: str, *, code: int | None = None, text: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.text = text


class ChannelClosed(ConformanceError):
    """The broker closed the channel/session with an error: a protocol answer cases may expect.

    ``code`` is the AMQP reply code (e.g. 406) and ``text`` the reply text; ``hard`` is True when the
    broker closed the whole connection (a connection exception) rather than the channel only.
    """

    def __init__(self, code: int, text: str, *, hard: bool = False) -> None:
        super().__init__(f"{'connection' if hard else 'channel'} closed by broker: {code} {text}")
        self.code = code
        self.text = text
        self.hard = hard


# --- liveness: errors that name the operation and the reply that never came ----------------------

class NoReply(ConnectionLost):
    """A synchronous operation got no reply within its deadline; the suite cut the connection.

    The text names the protocol operation and the reply that did not come ("queue.declare: no
    queue.declare-ok within 5s"), so a silent broker is reported in protocol terms, never as a
    client library's source line."""

    def __init__(self, operation: str, reply: str, seconds: float) -> None:
        super().__init__(f"{operation}: no {reply} within {seconds:g}s (connection cut by the suite)")
        self.operation = operation
        self.reply = reply
        self.seconds = seconds


class DeliveriesMissing(OperationTimeout):
    """Deliveries a scenario waited for did not arrive within its explicit window.

    Not the suite's breakage: an observation about the broker (a lost or withheld message) that a
    verdict judges (:func:`conformance.runner.missing_deliveries.missing_verdict`), once a health probe showed the
    target still answers. A timeout still, so a scenario that expects the broker to be unavailable
    (after kill -9) and catches OperationTimeout keeps its own judgement."""

    def __init__(self, queue: str, wanted: int, arrived: list[str], window_s: float, expected_ids: list[str] | None = None) -> None:
        got = ", ".join(arrived) or "nothing"
        super().__init__(f"{wanted} deliveries from {queue} within {window_s:g}s: {len(arrived)} arrived ({got})")
        self.queue = queue
        self.wanted = wanted
        self.arrived = arrived
        self.window_s = window_s
        self.expected_ids = expected_ids
