"""A watchdog that ties launched processes and their private directory to the run that launched them.

A launcher's ``finally`` does not run when its process is killed with SIGKILL or dies of an internal
error in a way that skips cleanup, and the node it launched (beam, erl_child_setup, inet_gethost,
a private epmd: several sessions, not one process group) would keep running with its ports open and
its password on disk. So the launcher starts this watchdog first, as a separate process in its own
session, and talks to it through a pipe whose write end only the launcher holds:

- EOF on that pipe means the launcher closed it (a normal stop) or died (the kernel closed it);
  either way the watchdog tears everything down through the same path, then exits.
- PR_SET_PDEATHSIG is a second trigger on Linux for the case where the write end leaked into a
  forked child; it only acts when the parent process really changed (a thread exiting also fires it).

The watchdog does not track process ids: every process the launcher starts carries a marker in its
environment (``MARKER=<token>``, inherited by whatever that process starts, epmd included), so a node
restarted by another process (an xdist worker attached to the node) is found as surely as the first
one. Teardown: SIGTERM to the roots of the marked process tree, a grace period, SIGKILL to whatever
is left, then the private directory is removed. Waiting uses pidfds (no polling) where available.

This file is also the watchdog's program, run as a script with ``python -I -S`` so that it starts
fast and imports nothing but the standard library.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

#: The environment variable that marks a supervised process; its value is the supervisor's token.
MARKER = "CONFORMANCE_SUPERVISED"
PR_SET_PDEATHSIG = 1
READY = "ready"


@dataclass
class TeardownReport:
    """What a teardown did, for the launcher's log line and the tests."""

    terminated: list[int] = field(default_factory=list)
    killed: list[int] = field(default_factory=list)
    left: list[int] = field(default_factory=list)
    removed_dir: bool = False
    seconds: float = 0.0


# -- finding and stopping marked processes ------------------------------------------------------


def marked_pids(token: str) -> list[int]:
    """Live processes whose environment carries ``MARKER=token`` (zombies have none and are skipped)."""
    needle = f"{MARKER}={token}".encode()
    found: list[int] = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry.name}/environ", "rb") as f:
                env = f.read()
        except OSError:  # gone meanwhile, or not ours to read
            continue
        if needle in env.split(b"\0"):
            found.append(int(entry.name))
    return sorted(found)


def _ppid(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])


def roots(pids: Sequence[int]) -> list[int]:
    """The marked processes whose parent is not marked: the ones that shut their children down."""
    marked = set(pids)
    return [p for p in pids if _ppid(p) not in marked]


def _signal(pids: Iterable[int], sig: int) -> list[int]:
    sent = []
    for pid in pids:
        try:
            os.kill(pid, sig)
            sent.append(pid)
        except ProcessLookupError:
            pass
    return sent


def wait_gone(pids: Iterable[int], deadline_s: float) -> list[int]:
    """Wait until every pid has exited or the deadline passes; return those still alive.

    Exit is observed through pidfds (readable when the process exits, reaped or not), so this waits
    on the kernel rather than polling; without pidfd support it polls /proc with a short interval.
    """
    end = time.monotonic() + deadline_s
    fds: dict[int, int] = {}
    pending: set[int] = set()
    for pid in pids:
        try:
            fds[os.pidfd_open(pid)] = pid  # type: ignore[attr-defined]
        except ProcessLookupError:
            continue
        except (AttributeError, OSError):
            pending.add(pid)
    try:
        poller = select.poll()
        for fd in fds:
            poller.register(fd, select.POLLIN)
        alive = set(fds)
        while alive:
            left_ms = max(0, int((end - time.monotonic()) * 1000))
            ready = poller.poll(left_ms)
            if not ready:
                break
            for fd, _ in ready:
                alive.discard(fd)
                poller.unregister(fd)
        while pending and time.monotonic() < end:  # fallback only: kernels without pidfd_open
            pending = {p for p in pending if _alive(p)}
            if pending:
                time.sleep(0.02)  # allowed: polling a condition with a deadline
        return sorted([fds[fd] for fd in alive] + [p for p in pending if _alive(p)])
    finally:
        for fd in fds:
            os.close(fd)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def teardown(token: str, directory: str | None, *, grace_s: float = 10.0) -> TeardownReport:
    """Stop every process marked with ``token`` (TERM, grace, KILL) and remove ``directory``.

    The one teardown path: the watchdog runs it when its launcher stops it or dies, and a launcher
    runs it itself only when its watchdog is gone.
    """
    start = time.monotonic()
    report = TeardownReport()
    pids = marked_pids(token)
    report.terminated = _signal(roots(pids), signal.SIGTERM)
    left = wait_gone(pids, grace_s)
    # processes started meanwhile (a restart in flight) or children that outlived their parent
    stragglers = sorted(set(left) | set(marked_pids(token)))
    if stragglers:
        report.killed = _signal(stragglers, signal.SIGKILL)
        report.left = wait_gone(stragglers, 5.0)
    if directory and os.path.isdir(directory):
        shutil.rmtree(directory, ignore_errors=True)
        report.removed_dir = not os.path.exists(directory)
    report.seconds = round(time.monotonic() - start, 3)
    return report


# -- the launcher's side -------------------------------------------------------------------------


class SupervisorError(RuntimeError):
    """The watchdog could not be started (the launcher turns it into a one-line target error)."""


class Supervisor:
    """Handle on a running watchdog. Give :meth:`env` to every process the launcher starts."""

    def __init__(self, token: str, directory: str | None, proc: subprocess.Popen[str], grace_s: float) -> None:
        self.token = token
        self.directory = directory
        self.proc = proc
        self.grace_s = grace_s
        self.report: TeardownReport | None = None

    @classmethod
    def start(cls, token: str, directory: str | None, *, grace_s: float = 10.0, ready_timeout_s: float = 10.0) -> "Supervisor":
        """Start the watchdog and return once it is armed (PDEATHSIG set, parent checked).

        ``directory`` (or None) is removed at teardown. The pipe ends this process keeps are
        close-on-exec, so no other program started later holds them.
        """
        argv = [sys.executable, "-I", "-S", str(Path(__file__).resolve()), "--token", token,
                "--parent", str(os.getpid()), "--grace", str(grace_s)]
        if directory:
            argv += ["--dir", directory]
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                text=True, cwd="/", start_new_session=True, close_fds=True)
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], ready_timeout_s)
        line = proc.stdout.readline().strip() if ready else ""
        if line != READY:
            proc.kill()
            proc.wait()
            raise SupervisorError(f"the process supervisor did not start (got {line!r} within {ready_timeout_s:.0f}s)")
        return cls(token, directory, proc, grace_s)

    def env(self) -> dict[str, str]:
        return {MARKER: self.token}

    def stop(self, timeout_s: float | None = None) -> TeardownReport:
        """Normal stop: close the pipe (what the kernel does if we die) and wait for the teardown."""
        if self.report is not None:
            return self.report
        assert self.proc.stdin is not None and self.proc.stdout is not None
        if self.proc.poll() is not None:  # the watchdog itself was killed: same teardown, done here
            self.report = teardown(self.token, self.directory, grace_s=self.grace_s)
            return self.report
        limit = timeout_s if timeout_s is not None else self.grace_s + 15.0
        try:
            out, _ = self.proc.communicate(timeout=limit)  # closes our end of the pipe: EOF is the order
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            out = ""
        try:
            self.report = TeardownReport(**json.loads(out.strip().splitlines()[-1]))
        except (ValueError, IndexError, TypeError):
            self.report = teardown(self.token, self.directory, grace_s=self.grace_s)
        return self.report


# -- the watchdog's program ----------------------------------------------------------------------


class _Stop(Exception):
    """Raised by a signal handler to leave the blocking read and tear down."""


def _arm_pdeathsig(sig: int) -> None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: the pipe alone tells us


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="watchdog for launched processes (started by conformance launchers)")
    ap.add_argument("--token", required=True)
    ap.add_argument("--parent", type=int, required=True)
    ap.add_argument("--dir")
    ap.add_argument("--grace", type=float, default=10.0)
    args = ap.parse_args(argv)

    def stop(signum: int, _frame: object) -> None:
        raise _Stop(signum)

    def parent_died(signum: int, _frame: object) -> None:
        if os.getppid() != args.parent:  # the process died, not just the thread that started us
            raise _Stop(signum)

    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, stop)
    signal.signal(signal.SIGUSR1, parent_died)
    _arm_pdeathsig(signal.SIGUSR1)
    try:
        if os.getppid() == args.parent:  # else the parent died before PDEATHSIG was armed
            try:
                print(READY, flush=True)
            except BrokenPipeError:
                pass
            while os.read(0, 4096):
                pass
    except _Stop:
        pass
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT, signal.SIGUSR1):
        signal.signal(sig, signal.SIG_IGN)
    report = teardown(args.token, args.dir, grace_s=args.grace)
    try:
        print(json.dumps(asdict(report)), flush=True)
    except (BrokenPipeError, OSError):
        pass  # the launcher is gone: nobody to tell
    return 0


if __name__ == "__main__":
    sys.exit(main())
