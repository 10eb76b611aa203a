"""STOMP 1.2 framing for the core's fault proxy (entry-point group ``conformance.wire``).

A frame is a command line, header lines, a blank line, a body and a NUL octet; the body's length is
the ``content-length`` header where given, else everything up to the first NUL (STOMP 1.2 "STOMP
Frames"). EOLs between frames are heart-beats. So the proxy forwards whole frames, names them by
their command (SEND, MESSAGE, ACK, COMMIT...) for faults and traces, and mutations rewrite headers.
"""

from __future__ import annotations

from conformance.nemesis.wire import BufferedCodec, Frame, MalformedFrame

PROTOCOL = "stomp-1.2"
COMMANDS = frozenset({"CONNECT", "STOMP", "CONNECTED", "SEND", "SUBSCRIBE", "UNSUBSCRIBE", "ACK", "NACK", "BEGIN", "COMMIT",
                      "ABORT", "DISCONNECT", "MESSAGE", "RECEIPT", "ERROR"})
MAX_FRAME = 64 * 1024 * 1024
#: Headers never rendered in a trace (credentials).
SECRET_HEADERS = frozenset({"passcode", "login"})
#: Headers worth a trace line, in this order.
KEY_HEADERS = ("destination", "id", "subscription", "ack", "transaction", "receipt", "receipt-id", "redelivered",
               "message-id", "amqp-message-id", "conformance-message-id", "persistent", "message", "server", "browser")


def parse(raw: bytes) -> tuple[str, list[tuple[str, str]], bytes]:
    """(command, headers in order, body) of one complete frame (heart-beat EOLs already stripped)."""
    head, sep, rest = raw.partition(b"\n\n")
    if not sep:
        raise MalformedFrame("STOMP frame without the blank line after its headers")
    lines = head.decode("utf-8", "replace").replace("\r", "").split("\n")
    headers = []
    for line in lines[1:]:
        key, _, value = line.partition(":")
        headers.append((key, value))
    return lines[0], headers, rest[:-1]


def build(command: str, headers: list[tuple[str, str]], body: bytes) -> bytes:
    """A frame from its parts (content-length kept true to the body)."""
    lines = [command] + [f"{k}:{v}" for k, v in headers if k != "content-length"]
    if body or any(k == "content-length" for k, _ in headers):
        lines.append(f"content-length:{len(body)}")
    return ("\n".join(lines) + "\n\n").encode() + body + b"\x00"


def describe(raw: bytes) -> str:
    _, headers, body = parse(raw)
    h = dict(headers)
    shown = [f"{k}={h[k]!r}" for k in KEY_HEADERS if k in h and k not in SECRET_HEADERS]
    return " ".join(shown + ([f"<{len(body)} bytes>"] if body else []))


class StompCodec(BufferedCodec):
    """Incremental splitter of one direction of a STOMP connection."""

    protocol = PROTOCOL

    @classmethod
    def matches(cls, header: bytes) -> bool:
        """The client's first bytes are a CONNECT or STOMP frame (after optional EOLs)."""
        first = header.lstrip(b"\r\n")
        return first.startswith((b"CONNECT", b"STOMP\n", b"STOMP\r"))

    def feed(self, data: bytes) -> list[Frame]:
        self._buf += data
        out: list[Frame] = []
        while True:
            buf = self._buf
            if not buf:
                return out
            if buf[0] in (0x0A, 0x0D):  # heart-beat EOL(s)
                n = 0
                while n < len(buf) and buf[n] in (0x0A, 0x0D):
                    n += 1
                out.append(Frame(bytes(buf[:n]), "heartbeat", 0))
                del buf[:n]
                continue
            end_head = buf.find(b"\n\n")
            if end_head < 0:
                if len(buf) > MAX_FRAME:
                    raise MalformedFrame("STOMP headers longer than the largest frame allowed")
                return out
            command = bytes(buf[: buf.find(b"\n")]).decode("ascii", "replace").rstrip("\r")
            if command not in COMMANDS:
                raise MalformedFrame(f"unknown STOMP command {command[:40]!r}")
            length = None
            for line in bytes(buf[:end_head]).split(b"\n")[1:]:
                if line.startswith(b"content-length:"):
                    try:
                        length = int(line.split(b":", 1)[1].strip())
                    except ValueError:
                        raise MalformedFrame(f"bad content-length {line!r}") from None
                    break
            start = end_head + 2
            if length is not None:
                if length > MAX_FRAME:
                    raise MalformedFrame(f"content-length {length} larger than the largest frame allowed")
                if len(buf) < start + length + 1:
                    return out
                if buf[start + length] != 0:
                    raise MalformedFrame("STOMP body not followed by NUL")
                end = start + length + 1
            else:
                nul = buf.find(b"\x00", start)
                if nul < 0:
                    return out
                end = nul + 1
            out.append(Frame(bytes(buf[:end]), command, 0, describe))
            del buf[:end]
