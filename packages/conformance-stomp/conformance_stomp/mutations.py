"""STOMP mutations for the self-test (entry-point group ``conformance.mutations``): each makes a
real STOMP broker wrong in one known way on the wire, keeping the stream valid for stomp.py.
What each must break is data (``mutations.yaml``)."""

from __future__ import annotations

from conformance.nemesis.faults import Sender
from conformance.nemesis.mutations import Mutator, naming, operator
from conformance.nemesis.wire import Frame
from conformance_stomp.wire import PROTOCOL, build, parse

EXPECTATIONS_FILE = __file__.replace("mutations.py", "mutations.yaml")


@naming(PROTOCOL)
def connection_name(frame: Frame) -> str | None:
    """The adapter names each connection in its CONNECT frame (header conformance-name)."""
    if frame.name not in ("CONNECT", "STOMP"):
        return None
    return dict(parse(frame.raw)[1]).get("conformance-name", "")


class HeaderRewriter(Mutator):
    """Rewrites the headers of one command sent by one side; subclasses say how."""

    sender = Sender.CLIENT
    command = ""

    def change(self, headers: list[tuple[str, str]]) -> list[tuple[str, str]] | None:
        raise NotImplementedError

    def rewrite(self, sender: Sender, frame: Frame) -> list[bytes] | None:
        if sender is not self.sender or frame.name != self.command:
            return None
        command, headers, body = parse(frame.raw)
        new = self.change(headers)
        if new is None:
            return None
        self.applied(f"{command} headers {dict(headers)} -> {dict(new)}")
        return [build(command, new, body)]


@operator("stomp-redelivered-cleared", PROTOCOL, "MESSAGE frames lose their redelivered:true header")
class RedeliveredCleared(HeaderRewriter):
    sender, command = Sender.SERVER, "MESSAGE"

    def change(self, headers: list[tuple[str, str]]) -> list[tuple[str, str]] | None:
        if ("redelivered", "true") not in headers:
            return None
        return [(k, v) for k, v in headers if k != "redelivered"]


@operator("stomp-acks-dropped", PROTOCOL, "the client's ACK frames never reach the broker")
class AcksDropped(Mutator):
    def rewrite(self, sender: Sender, frame: Frame) -> list[bytes] | None:
        if sender is not Sender.CLIENT or frame.name != "ACK":
            return None
        self.applied("ACK swallowed")
        return []


@operator("stomp-tx-sends-leaked", PROTOCOL, "SEND frames of a transaction lose their transaction header (delivered before COMMIT)")
class TxSendsLeaked(HeaderRewriter):
    command = "SEND"

    def change(self, headers: list[tuple[str, str]]) -> list[tuple[str, str]] | None:
        if not any(k == "transaction" for k, _ in headers):
            return None
        return [(k, v) for k, v in headers if k != "transaction"]


@operator("stomp-auto-ack-cleared", PROTOCOL, "SUBSCRIBE ack:auto becomes ack:client-individual (the broker keeps what it sent unacknowledged)")
class AutoAckCleared(HeaderRewriter):
    command = "SUBSCRIBE"

    def change(self, headers: list[tuple[str, str]]) -> list[tuple[str, str]] | None:
        if ("ack", "auto") not in headers or ("browser", "true") in headers:  # the counting browser stays as it is
            return None
        return [(k, "client-individual" if k == "ack" else v) for k, v in headers]


# --- mutations of the STOMP requirement pack (conformance_stomp/pack): expectations say pack: stomp
@operator("stomp-ack-receipt-mangled", PROTOCOL, "the RECEIPT answering an ACK or NACK carries a receipt-id the client never asked for")
class AckReceiptMangled(Mutator):
    """A broker whose acknowledgement path answers receipts wrong (every other frame's receipt is
    right, so the adapter's own barriers, receipts on SEND, BEGIN, ABORT, still work)."""

    def __init__(self, *args: object) -> None:
        super().__init__(*args)  # type: ignore[arg-type]
        self.asked: set[str] = set()

    def rewrite(self, sender: Sender, frame: Frame) -> list[bytes] | None:
        if sender is Sender.CLIENT and frame.name in ("ACK", "NACK"):
            receipt = dict(parse(frame.raw)[1]).get("receipt")
            if receipt:
                self.asked.add(receipt)
            return None
        if sender is not Sender.SERVER or frame.name != "RECEIPT":
            return None
        command, headers, body = parse(frame.raw)
        rid = dict(headers).get("receipt-id", "")
        if rid not in self.asked:
            return None
        self.asked.discard(rid)
        self.applied(f"RECEIPT receipt-id {rid!r} -> {rid + '-mangled'!r}")
        return [build(command, [(k, f"{v}-mangled" if k == "receipt-id" else v) for k, v in headers], body)]


@operator("stomp-individual-ack-cumulative", PROTOCOL, "SUBSCRIBE ack:client-individual becomes ack:client (every ACK cumulative)")
class IndividualAckCumulative(HeaderRewriter):
    command = "SUBSCRIBE"

    def change(self, headers: list[tuple[str, str]]) -> list[tuple[str, str]] | None:
        if ("ack", "client-individual") not in headers:
            return None
        return [(k, "client" if k == "ack" else v) for k, v in headers]


@operator("stomp-errors-swallowed", PROTOCOL, "the server's ERROR frames never reach the client (it sees only the close)")
class ErrorsSwallowed(Mutator):
    def rewrite(self, sender: Sender, frame: Frame) -> list[bytes] | None:
        if sender is not Sender.SERVER or frame.name != "ERROR":
            return None
        self.applied("ERROR swallowed")
        return []
