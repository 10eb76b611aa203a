"""The nftables partition on loopback (conformance.nemesis.netfilter): between two node addresses
nothing passes, while a client connecting from 127.0.0.1 and a third address still reach both; the
heal, the owner's death and the next run's start each leave no table behind. Plain sockets, no broker."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys

import pytest

from conformance.nemesis import netfilter
from conformance.targets import wait_until

WHY = netfilter.unusable()
pytestmark = pytest.mark.skipif(WHY is not None, reason=f"partitions cannot be made here: {WHY}")


def _addresses() -> list[str]:
    from adapters.rabbitmq.cluster import node_addresses

    return node_addresses(3)


def _reaches(src: str, dst: str, port: int, timeout: float = 0.5) -> bool:
    with socket.socket() as c:
        c.settimeout(timeout)
        c.bind((src, 0))
        try:
            c.connect((dst, port))
            return True
        except OSError:  # dropped SYNs: the connect times out
            return False


def _tables() -> str:
    return netfilter.nft("list", "tables", netfilter.FAMILY)


def test_a_partition_cuts_node_addresses_apart_but_not_clients() -> None:
    a, b, c = _addresses()
    with socket.socket() as srv_b, socket.socket() as srv_a:
        srv_b.bind((b, 0))
        srv_b.listen(16)
        srv_a.bind((a, 0))
        srv_a.listen(16)
        pb, pa = srv_b.getsockname()[1], srv_a.getsockname()[1]
        p = netfilter.Partitioner()
        try:
            p.partition([(a, b)])
            assert f"table {netfilter.FAMILY} {p.table}" in _tables()
            assert not _reaches(a, b, pb), f"{a} -> {b} passed through the partition"
            assert not _reaches(b, a, pa), f"{b} -> {a} passed through the partition"
            assert _reaches(c, b, pb), f"{c} -> {b} was dropped: only the pair is cut"
            assert _reaches("127.0.0.1", b, pb) and _reaches("127.0.0.1", a, pa), "a client from 127.0.0.1 was dropped"
            with socket.socket() as unbound:  # a client that binds nothing leaves from 127.0.0.1 on loopback
                unbound.settimeout(0.5)
                unbound.connect((b, pb))
                assert unbound.getsockname()[0] == "127.0.0.1"
            p.heal()
            assert p.table not in _tables()
            assert _reaches(a, b, pb), "the heal left the pair cut"
        finally:
            p.close()
    assert p.table not in _tables()


def test_the_table_goes_when_its_owner_is_killed_and_a_stale_one_at_the_next_start() -> None:
    a, b, _ = _addresses()
    code = ("import sys, time\nfrom conformance.nemesis.netfilter import Partitioner\n"
            f"p = Partitioner(); p.partition([({a!r}, {b!r})]); print(p.table, flush=True); time.sleep(60)\n")
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, cwd=os.getcwd(),
                             env={**os.environ, "PYTHONPATH": os.getcwd()})
    try:
        assert child.stdout is not None
        table = child.stdout.readline().strip()
        assert table and table in _tables()
        child.send_signal(signal.SIGKILL)  # no atexit, no finally: the watchdog deletes it
        child.wait(10)
        assert wait_until(lambda: table not in _tables(), 10, 0.05), f"{table} left behind by a killed owner"
    finally:
        if child.poll() is None:
            child.kill()
    # a table of a run whose watchdog died too: named by a pid that no longer lives
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = f"{netfilter.PREFIX}{dead.pid}"
    netfilter.nft("add", "table", netfilter.FAMILY, stale)
    assert stale in netfilter.remove_stale()
    assert stale not in _tables()
    assert f"{netfilter.PREFIX}{os.getpid()}" not in netfilter.remove_stale()  # a live owner's table is kept
