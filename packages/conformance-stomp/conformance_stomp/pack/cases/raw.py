"""A STOMP 1.2 client of the pack's own: whole frames on a plain socket, every read bounded.

Why not stomp.py: the requirements are about frames a library hides (the receipt-id a RECEIPT
carries, whether the socket closes after an ERROR). Frames are split by the package's framer
(conformance_stomp.wire), the same one the fault proxy uses."""

from __future__ import annotations

import socket
import struct
import time
from typing import NamedTuple
from urllib.parse import parse_qsl, unquote, urlsplit

from conformance.errors import ConnectionLost, NoReply
from conformance_stomp.dialect import Dialect, dialect_for
from conformance_stomp.wire import StompCodec, build, parse


class Frame(NamedTuple):
    command: str
    headers: dict[str, str]
    body: bytes


class RawStomp:
    """One STOMP connection, named like the suite's others (``conformance-name``) so the self-test's
    probe knows which requirement's frames a mutation would rewrite."""

    def __init__(self, url: str, name: str, timeout: float = 10.0) -> None:
        raw = getattr(url, "reveal", lambda: str(url))()
        parts = urlsplit(raw)
        options = dict(parse_qsl(parts.query))
        self.timeout = timeout
        self.sock = socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 61613), timeout=timeout)
        self.codec = StompCodec()
        self.pending: list[Frame] = []
        self.eof = False
        headers = {"accept-version": "1.2", "host": options.get("host", unquote(parts.path.lstrip("/")) or "/"),
                   "heart-beat": "0,0", "conformance-name": name}
        if parts.username:
            headers.update(login=unquote(parts.username), passcode=unquote(parts.password or ""))
        self.send("CONNECT", headers)
        connected = self.next("CONNECTED")
        if connected.command != "CONNECTED":
            raise ConnectionLost(f"CONNECT answered by {connected.command}: {connected.headers.get('message', '')}")
        product = connected.headers.get("server", "unknown/").partition("/")[0]
        self.dialect: Dialect = dialect_for(product, options)

    def send(self, command: str, headers: dict[str, str], body: bytes = b"") -> None:
        self.sock.sendall(build(command, list(headers.items()), body))

    def next(self, waiting_for: str, timeout: float | None = None) -> Frame:
        """The next frame (heart-beats skipped); NoReply at the deadline, ConnectionLost at EOF."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while not self.pending:
            if self.eof:
                raise ConnectionLost(f"server closed the connection while waiting for {waiting_for}")
            left = deadline - time.monotonic()
            if left <= 0:
                raise NoReply(waiting_for, waiting_for, self.timeout if timeout is None else timeout)
            self.sock.settimeout(left)
            try:
                data = self.sock.recv(65536)
            except TimeoutError:
                continue
            except OSError as exc:  # a reset after the server's last frame is a close too
                data, self.eof = b"", True
                if not self.pending:
                    raise ConnectionLost(f"{exc} while waiting for {waiting_for}") from None
            if not data:
                self.eof = True
            for f in self.codec.feed(data):
                if f.name != "heartbeat":
                    command, headers, body = parse(f.raw)
                    self.pending.append(Frame(command, dict(headers), body))
        return self.pending.pop(0)

    def closed_within(self, timeout: float) -> tuple[bool, list[Frame]]:
        """Whether the server closes the connection within ``timeout`` of the last frame, and the
        frames it sent meanwhile."""
        seen: list[Frame] = []
        try:
            while True:
                seen.append(self.next("the server to close the connection", timeout))
        except ConnectionLost:
            return True, seen
        except NoReply:
            return False, seen

    def cut(self) -> None:
        """Reset without DISCONNECT (SO_LINGER 0): the connection fails, as the spec's ack modes say."""
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        finally:
            self.sock.close()

    def close(self) -> None:
        try:
            if not self.eof:
                self.send("DISCONNECT", {})
        except OSError:
            pass
        self.sock.close()
