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

Use from a launcher (an AMQP 1.0 broker, a user-defined process target)::

    sup = Supervisor.spawn(secrets.token_hex(8), str(private_dir))   # before the first process
    proc = subprocess.Popen(argv, env={**os.environ, **sup.env()}, start_new_session=True)
    sup.wait_ready()
    ...
    sup.stop()                                                      # TERM, grace, KILL, rm -r dir

Limit: a process that starts a child with an emptied environment (``env -i``) hides that child.

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
PING, PONG = b"ping\n", "pong"


def exited(pid: int, proc: "subprocess.Popen[bytes] | None" = None) -> bool:
    """Whether ``pid`` has exited: reaped, gone, or a zombie of whichever process started it.

    ``proc`` is our own handle on it when we started it (then ``poll`` also reaps it)."""
    if proc is not None and proc.pid == pid:
        return proc.poll() is not None
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


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
    def spawn(cls, token: str, directory: str | None, *, grace_s: float = 10.0) -> "Supervisor":
        """Start the watchdog without waiting for it; call :meth:`wait_ready` before relying on it.

        Marked processes may be started at once: the watchdog finds them by their marker whenever
        it tears down, and the pipe reports this process's death from the moment this returns.
        ``directory`` (or None) is removed at teardown. The pipe ends kept here are close-on-exec,
        so no program started later holds them. The watchdog shares our stderr, so its own failure
        is seen.
        """
        argv = [sys.executable, "-I", "-S", str(Path(__file__).resolve()), "--token", token,
                "--parent", str(os.getpid()), "--grace", str(grace_s)]
        if directory:
            argv += ["--dir", directory]
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=None,
                                text=True, cwd="/", start_new_session=True, close_fds=True)
        return cls(token, directory, proc, grace_s)

    def wait_ready(self, timeout_s: float = 10.0) -> None:
        """Return once the watchdog is armed (PDEATHSIG set, parent checked); else SupervisorError."""
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout_s)
        line = self.proc.stdout.readline().strip() if ready else ""
        if line != READY:
            self.proc.kill()
            self.proc.wait()
            raise SupervisorError(f"the process supervisor did not start (got {line!r} within {timeout_s:.0f}s)")

    @classmethod
    def start(cls, token: str, directory: str | None, *, grace_s: float = 10.0, ready_timeout_s: float = 10.0) -> "Supervisor":
        """:meth:`spawn` and :meth:`wait_ready` in one."""
        sup = cls.spawn(token, directory, grace_s=grace_s)
        sup.wait_ready(ready_timeout_s)
        return sup

    def ping(self, timeout_s: float = 5.0) -> bool:
        """True when the watchdog answers: it is running and has handled every signal sent before."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            self.proc.stdin.write(PING.decode())
            self.proc.stdin.flush()
        except OSError:
            return False
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout_s)
        return bool(ready) and self.proc.stdout.readline().strip() == PONG

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

    def stop_and_reap(self, started: subprocess.Popen[str] | subprocess.Popen[bytes] | None, what: str) -> TeardownReport:
        """The launcher's stop: the teardown above, then reap the process the launcher started
        (the watchdog already stopped it; this only collects its exit status), and a TargetError
        naming ``what`` when any guarded process survived SIGKILL."""
        report = self.stop()
        if started is not None:
            try:
                started.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        if report.left:
            from conformance.errors import TargetError

            raise TargetError(f"{what}: processes {report.left} survived SIGKILL")
        return report


# -- the watchdog's program ----------------------------------------------------------------------


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

    # Signal handlers only record the request; the wake-up pipe makes poll() return, so no handler
    # ever interrupts the teardown and no EOF/signal race can skip it.
    stop = {"requested": False}

    def on_stop(_signum: int, _frame: object) -> None:
        stop["requested"] = True

    def on_parent_death(_signum: int, _frame: object) -> None:
        if os.getppid() != args.parent:  # the process died, not just the thread that started us
            stop["requested"] = True

    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, on_stop)
    signal.signal(signal.SIGUSR1, on_parent_death)
    _arm_pdeathsig(signal.SIGUSR1)
    if os.getppid() != args.parent:  # the parent died before PDEATHSIG was armed
        stop["requested"] = True
    else:
        try:
            print(READY, flush=True)
        except BrokenPipeError:
            stop["requested"] = True
    poller = select.poll()
    poller.register(0, select.POLLIN)
    poller.register(wake_r, select.POLLIN)
    while not stop["requested"]:
        for fd, _ in poller.poll():
            if fd == wake_r:
                os.read(wake_r, 512)
                continue
            data = os.read(0, 4096)
            if not data:  # EOF (POLLHUP included): the launcher closed the pipe or died
                stop["requested"] = True
            for _ in range(0 if stop["requested"] else data.count(PING)):
                try:
                    print(PONG, flush=True)
                except OSError:  # the launcher died meanwhile: EOF follows
                    break
    report = teardown(args.token, args.dir, grace_s=args.grace)
    try:
        print(json.dumps(asdict(report)), flush=True)
    except OSError:  # the launcher is gone: nobody to tell, and nothing left to flush at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
