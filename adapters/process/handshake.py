"""Readiness by protocol handshake: a port is ready when the broker answers the protocol header.

Why not a TCP connect: a broker often accepts connections before it serves them (RabbitMQ's port
opens while plugins boot); the protocol's own first answer is the earliest moment a client works.
"""

from __future__ import annotations

import socket

AMQP091_HEADER = b"AMQP\x00\x00\x09\x01"
AMQP10_HEADER = b"AMQP\x00\x01\x00\x00"


def _exchange(port: int, header: bytes, want: int) -> bytes:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0) as s:
            s.sendall(header)
            got = b""
            while len(got) < want:
                chunk = s.recv(want - len(got))
                if not chunk:
                    break
                got += chunk
            return got
    except OSError:
        return b""


def amqp091_ready(port: int) -> bool:
    """The server answered the 0-9-1 header with a method frame (connection.start)."""
    head = _exchange(port, AMQP091_HEADER, 7)
    return len(head) == 7 and head[0] == 1


def amqp10_ready(port: int) -> bool:
    """The server answered the 1.0 header with an AMQP 1.0 header (plain, or SASL protocol id 3)."""
    head = _exchange(port, AMQP10_HEADER, 8)
    return head[:4] == b"AMQP" and head[5:8] == b"\x01\x00\x00"


PROBES = {"amqp-0-9-1": amqp091_ready, "amqp-1.0": amqp10_ready}
