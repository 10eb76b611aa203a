"""Listening ports for launched processes are picked outside the kernel's ephemeral range
(conformance.targets.free_port): a port bind(0) handed out is also one an outgoing connection may
take as its local port before the launched process binds it (CI: a cluster node's distribution
port "already used, not_erlang" while other tests opened thousands of connections)."""

from __future__ import annotations

import socket

import pytest

from conformance import targets


def test_ports_are_free_and_outside_the_ephemeral_range() -> None:
    lo, hi = targets.ephemeral_range()
    for _ in range(200):
        port = targets.free_port()
        assert not lo <= port <= hi and port >= targets.LISTEN_PORTS_FROM
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))  # free: a listener can take it


def test_a_port_in_use_is_not_picked(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        taken = busy.getsockname()[1]
        monkeypatch.setattr(targets, "LISTEN_PORTS_FROM", taken)
        monkeypatch.setattr(targets, "ephemeral_range", lambda: (taken + 2, 65535))  # the choice: taken or taken + 1
        assert taken not in {targets.free_port() for _ in range(20)}


def test_no_room_outside_the_range_falls_back_to_the_kernel_s_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(targets, "ephemeral_range", lambda: (1024, 65535))
    port = targets.free_port()
    assert 0 < port <= 65535
