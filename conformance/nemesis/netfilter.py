"""Network partitions between addresses on loopback, with one nftables table of the suite's own.

Nodes that listen on distinct loopback addresses (127.x.y.2, 127.x.y.3, ...) and bind their outgoing
node-to-node connections to those addresses can be cut apart by dropping packets whose source and
destination are two of them, while every other socket on loopback is untouched: a client connecting
to a node without binding its socket leaves from 127.0.0.1 (the source Linux picks for loopback), so
client traffic flows to every node during a partition.

The rules live in one table, ``inet conformance_<pid>`` (a filter chain on the output hook; loopback
packets pass it once), created at the first cut and deleted at the heal, at :meth:`close`, at exit,
and by a watchdog process when the process that made it dies however it dies (EOF on a pipe only
the owner holds, as conformance.supervisor does). A table left by a run that died anyway (the
watchdog was killed with it) names a pid that no longer lives: :func:`remove_stale` deletes it,
and :class:`Partitioner` calls it before it makes its own table.

Needs the ``nft`` tool (Debian package nftables) and CAP_NET_ADMIN; :func:`unusable` says in one
line why it cannot be used here.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterable, Sequence

FAMILY = "inet"
PREFIX = "conformance_"
#: Bound on one nft call (a netlink round trip: milliseconds).
NFT_TIMEOUT_S = 10.0

_WATCHDOG = r"""
import subprocess, sys
sys.stdin.buffer.read()  # EOF: the owner closed the pipe or died
subprocess.run(["nft", "delete", "table", sys.argv[1], sys.argv[2]], capture_output=True, timeout=10)
"""


class NftError(RuntimeError):
    """An nft call failed; the tool's own words."""


def nft(*args: str, stdin: str | None = None) -> str:
    exe = shutil.which("nft") or "/usr/sbin/nft"
    try:
        out = subprocess.run([exe, *args], input=stdin, capture_output=True, text=True, timeout=NFT_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise NftError(f"nft {' '.join(args)}: {exc}") from None
    if out.returncode != 0:
        raise NftError(f"nft {' '.join(args) or '-f -'} failed ({out.returncode}): {' '.join((out.stderr or out.stdout).split())[:300]}")
    return out.stdout


_unusable: list[str | None] = []


def unusable() -> str | None:
    """Why partitions cannot be made here (no nft tool, or no permission to add a table), or None.
    Asked once a process: a throwaway table is added and deleted."""
    if _unusable:
        return _unusable[0]
    why: str | None = None
    if shutil.which("nft") is None and not os.path.exists("/usr/sbin/nft"):
        why = "the nft tool is not installed (Debian package nftables)"
    else:
        probe = f"{PREFIX}probe_{os.getpid()}"
        try:
            nft("add", "table", FAMILY, probe)
            nft("delete", "table", FAMILY, probe)
        except NftError as exc:
            why = f"nftables cannot be changed by this process (needs root or CAP_NET_ADMIN): {exc}"
    _unusable.append(why)
    return why


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale() -> list[str]:
    """Delete the suite's tables whose owning process is gone (a run that died); their names."""
    try:
        listing = nft("list", "tables", FAMILY)
    except NftError:
        return []
    removed = []
    for m in re.finditer(rf"^table {FAMILY} ({PREFIX}(\d+))$", listing, re.MULTILINE):
        if not _pid_alive(int(m.group(2))):
            try:
                nft("delete", "table", FAMILY, m.group(1))
                removed.append(m.group(1))
            except NftError:
                pass
    return removed


class Partitioner:
    """Drop traffic between pairs of loopback addresses; :meth:`heal` deletes every rule."""

    def __init__(self) -> None:
        self.table = f"{PREFIX}{os.getpid()}"
        self.cut: list[tuple[str, str]] = []
        self._lock = threading.Lock()
        self._watchdog: subprocess.Popen[bytes] | None = None
        self._registered = False

    def _ensure_table(self) -> None:
        remove_stale()
        if self._watchdog is None or self._watchdog.poll() is not None:
            self._watchdog = subprocess.Popen([sys.executable, "-I", "-S", "-c", _WATCHDOG, FAMILY, self.table],
                                              stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                              start_new_session=True)
        if not self._registered:
            atexit.register(self.close)
            self._registered = True
        nft("-f", "-", stdin=f"add table {FAMILY} {self.table}\n"
                             f"add chain {FAMILY} {self.table} cut {{ type filter hook output priority 0; policy accept; }}\n")

    def partition(self, pairs: Iterable[tuple[str, str]]) -> None:
        """Drop every packet between the two addresses of each pair, both directions."""
        with self._lock:
            pairs = [(a, b) for a, b in pairs if (a, b) not in self.cut]
            if not pairs:
                return
            self._ensure_table()
            rules = "".join(f"add rule {FAMILY} {self.table} cut ip saddr {x} ip daddr {y} drop\n"
                            for a, b in pairs for x, y in ((a, b), (b, a)))
            nft("-f", "-", stdin=rules)
            self.cut += pairs

    def isolate(self, one: str, others: Sequence[str]) -> None:
        """One address cut off from every other (a minority of one)."""
        self.partition((one, o) for o in others if o != one)

    def heal(self) -> None:
        """Delete the table (every rule): every pair talks again."""
        with self._lock:
            try:
                nft("delete", "table", FAMILY, self.table)
            except NftError as exc:
                if "No such file" not in str(exc):
                    raise
            self.cut = []

    def rules(self) -> str:
        """The table as nft lists it ("" when there is none)."""
        try:
            return nft("list", "table", FAMILY, self.table)
        except NftError:
            return ""

    def close(self) -> None:
        """Heal, and end the watchdog (its job done)."""
        try:
            self.heal()
        except NftError:
            pass
        wd, self._watchdog = self._watchdog, None
        if wd is not None and wd.poll() is None:
            try:
                assert wd.stdin is not None
                wd.stdin.close()  # EOF: it deletes the (already gone) table and exits
                wd.wait(NFT_TIMEOUT_S + 5)
            except (OSError, subprocess.TimeoutExpired):
                wd.kill()
