"""``--target process:<definition.yaml>``: any broker binary as a launched, restartable target.

The definition (see :mod:`adapters.process.definition`) gives the command line with placeholders;
this module gives it a private run directory (0700: it holds the broker's password), free loopback
ports, a data directory that survives restart and kill -9, readiness by protocol handshake, and a
log file. The broker runs in its own session, so a stop signal or kill -9 reaches its whole process
group in one call. It never outlives the run: a watchdog (:mod:`conformance.supervisor`) started
before the first process stops every process carrying this target's marker and removes the run
directory when the target stops or the launching process dies, however it dies.
"""

from __future__ import annotations

import collections
import fcntl
import hashlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

from adapters.process.definition import Definition, load_definition, render
from adapters.process.handshake import PROBES
from conformance.errors import TargetError
from conformance.secrets import SecretUrl, register_url
from conformance.supervisor import MARKER, Supervisor, SupervisorError, exited, teardown
from conformance.targets import Target, free_port, wait_until

STATE = "target.json"


def write_private(path: Path, text: str) -> None:
    """A file only its owner can read (configs may hold the broker's password)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)


class ProcessTarget(Target):
    """One broker process started from a definition file, on loopback, with private ports and data."""

    def __init__(self, definition: Definition, *, run_dir: str | None = None, attach: str | None = None) -> None:
        super().__init__(name=definition.name, protocol=definition.ready_protocol)
        self.d = definition
        self.proc: subprocess.Popen[bytes] | None = None
        self._supervisor: Supervisor | None = None
        self._attached = attach is not None
        #: Locks on the definition's fixed paths, held from the first start to stop (None: not claimed).
        self._claims: list[int] | None = None
        #: Where the broker log goes: the run's results folder when the runner gives one (it outlives the target).
        self._log_dir = Path(run_dir) if run_dir else None
        if attach:
            self.dir = Path(attach)
            self._load_state()
        else:
            self.dir = None
            self.token = secrets.token_hex(8)
            self.password = definition.password or secrets.token_urlsafe(12)
            self.ports: dict[str, int] = {}
            self.binary = ""

    # -- preparation ----------------------------------------------------------------------------

    @property
    def log_file(self) -> Path:
        assert self.dir is not None
        return (self._log_dir or self.dir) / f"{self.d.name}-{self.token}.log"

    def _values(self) -> dict[str, Any]:
        assert self.dir is not None
        return {"binary": self.binary, "binary_dir": str(Path(self.binary).parent), "run_dir": str(self.dir),
                "data_dir": str(self.dir / "data"), "token": self.token, "port": self.ports, "user": self.d.user,
                "password": self.password, "env": collections.defaultdict(str, os.environ)}

    def _prepare(self) -> None:
        self.binary = self.d.binary.resolve(self.name)  # before anything is created: a missing binary is one line
        self.dir = Path(tempfile.mkdtemp(prefix=f"conformance-{self.d.name}-"))
        self.dir.chmod(0o700)
        (self.dir / "data").mkdir(mode=0o700)
        self.ports = {name: free_port() for name in self.d.ports}
        values = self._values()
        for rel, text in self.d.files.items():
            write_private(self.dir / render(rel, values, self.d.path), render(text, values, self.d.path))
        for rel, to in self.d.links.items():
            link = self.dir / render(rel, values, self.d.path)
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(render(to, values, self.d.path))
        self._set_url()
        self._save_state()

    def _set_url(self) -> None:
        values = {**self._values(), "password": quote(self.password, safe=""), "user": quote(self.d.user, safe="")}
        url = render(self.d.url, values, self.d.path)
        register_url(url)  # the password is scrubbed from every log, record and report
        self.url = SecretUrl(url)
        self.facts = {"launcher": "process", "definition": self.d.path, "binary": self.binary,
                      "run_dir": str(self.dir), "log": str(self.log_file), "token": self.token}

    def _save_state(self) -> None:
        assert self.dir is not None
        state = {"definition": self.d.path, "token": self.token, "password": self.password, "ports": self.ports,
                 "binary": self.binary, "pid": self.proc.pid if self.proc else None,
                 "log_dir": str(self._log_dir) if self._log_dir else None}
        tmp = self.dir / (STATE + ".tmp")
        write_private(tmp, json.dumps(state))
        tmp.replace(self.dir / STATE)

    def _load_state(self) -> None:
        assert self.dir is not None
        state = json.loads((self.dir / STATE).read_text())
        self.token, self.password, self.ports, self.binary = state["token"], state["password"], state["ports"], state["binary"]
        self._log_dir = Path(state["log_dir"]) if state.get("log_dir") else None
        self._set_url()

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(self.d.env_clear_prefixes or ("\0",))}
        values = self._values()
        env.update({k: render(v, values, self.d.path) for k, v in self.d.env.items()})
        env[MARKER] = self.token
        return env

    # -- lifecycle -------------------------------------------------------------------------------

    @property
    def can_restart(self) -> bool:
        return True

    @property
    def no_store(self) -> str | None:
        """Why this broker keeps nothing across a restart (the definition says), or None; None too
        when a store the definition names is installed beside this binary."""
        if self.d.no_store and self.binary and self.dir is not None:
            values = self._values()
            if any(Path(render(p, values, self.d.path)).exists() for p in self.d.store_if_present):
                return None
        return self.d.no_store

    def queue_known(self, queue: str) -> bool | None:
        """A node without a store holds no durable record of any queue after a restart or kill: a queue
        it answers 404 for (the only time this is asked) is gone for good, so the case need not wait out
        its recovery window for it. With a store, the broker's metadata is not reachable here (None)."""
        return False if self.no_store else None

    @property
    def can_pause(self) -> bool:
        return True

    def _pid(self) -> int | None:
        if self.dir is None:
            return None
        try:
            pid = json.loads((self.dir / STATE).read_text())["pid"]
        except (OSError, ValueError, KeyError):
            return None
        return int(pid) if pid else None

    def _gone(self, pid: int) -> bool:
        """The group leader has exited (reaped, or a zombie of whichever process started it)."""
        return exited(pid, self.proc)

    def running(self) -> bool:
        pid = self._pid()
        return pid is not None and not self._gone(pid)

    def _note(self, text: str) -> None:
        """A line in the broker log marking what the suite did (start, stop, kill -9)."""
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        with os.fdopen(os.open(self.log_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600), "a") as f:
            f.write(f"==== conformance {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}: {text}\n")

    def start(self) -> None:
        if self.running():
            return
        if self.dir is None:
            self._prepare()
        assert self.dir is not None
        if not self._attached and self._claims is None:
            self._claims = claim_fixed_paths(self.name, self.d.fixed_paths)
        if not self._attached and self._supervisor is None:
            try:
                self._supervisor = Supervisor.spawn(self.token, str(self.dir))
                self._supervisor.wait_ready()
            except (OSError, SupervisorError) as exc:
                teardown(self.token, str(self.dir))
                raise TargetError(f"target {self.name} not started: the process supervisor did not start: {exc}") from None
        values = self._values()
        argv = [render(a, values, self.d.path) for a in self.d.start]
        self._note(f"start {' '.join(argv)}".replace(self.password, "***"))
        log = os.fdopen(os.open(self.log_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600), "ab")
        try:
            self.proc = subprocess.Popen(argv, env=self._env(), cwd=self.dir, stdin=subprocess.DEVNULL,
                                         stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        except OSError as exc:
            raise TargetError(f"target {self.name}: cannot start {argv[0]}: {exc.strerror or exc}") from None
        finally:
            log.close()
        self._save_state()
        probe, port, proc = PROBES[self.d.ready_protocol], self.ports[self.d.ready_port], self.proc
        ok = wait_until(lambda: proc.poll() is not None or probe(port), self.d.ready_timeout_s, 0.1)
        if proc.poll() is not None:
            raise TargetError(f"target {self.name} exited during start (code {proc.returncode}): {self._log_tail()}")
        if not ok:
            self._signal_group(signal.SIGKILL)
            raise TargetError(f"target {self.name} did not answer the {self.d.ready_protocol} header on port {port} "
                              f"within {self.d.ready_timeout_s:.0f}s: {self._log_tail()}")

    def _signal_group(self, sig: int, grace_s: float = 10.0) -> None:
        pid = self._pid()
        if pid is None or self._gone(pid):
            return
        try:
            os.killpg(pid, sig)
            os.killpg(pid, signal.SIGCONT)  # a paused broker acts on the stop signal only once it runs
        except ProcessLookupError:
            return
        if not wait_until(lambda: self._gone(pid), grace_s, 0.02) and sig != signal.SIGKILL:
            os.killpg(pid, signal.SIGKILL)
            wait_until(lambda: self._gone(pid), 10, 0.02)

    def kill(self) -> None:
        """kill -9 of the broker's process group: no flush, no goodbye; the data dir stays."""
        self._note("kill -9")
        self._signal_group(signal.SIGKILL)
        self.proc = None

    def shutdown(self) -> None:
        """The definition's stop signal, then SIGKILL after its timeout; the data dir stays."""
        self._note(f"stop ({signal.Signals(self.d.stop_signal).name})")
        self._signal_group(self.d.stop_signal, self.d.stop_timeout_s)
        self.proc = None

    def restart(self) -> None:
        self.shutdown()
        self.start()

    def pause(self) -> None:
        """SIGSTOP to the broker's process group: its sockets stay open and nothing is answered."""
        self._note("pause (SIGSTOP)")
        self._signal_only(signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT after :meth:`pause`; returns when the broker answers its protocol header again."""
        self._note("resume (SIGCONT)")
        self._signal_only(signal.SIGCONT)
        port = self.ports[self.d.ready_port]
        if not wait_until(lambda: PROBES[self.d.ready_protocol](port), self.d.ready_timeout_s, 0.05):
            raise TargetError(f"target {self.name} did not answer on port {port} within {self.d.ready_timeout_s:.0f}s after SIGCONT")

    def _signal_only(self, sig: int) -> None:
        pid = self._pid()
        if pid is None or self._gone(pid):
            raise TargetError(f"target {self.name} is not running")
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            raise TargetError(f"target {self.name} is not running") from None

    def check_alive(self) -> str | None:
        if not self.running():
            return f"target {self.name} is not running"
        port = self.ports[self.d.ready_port]
        return None if PROBES[self.d.ready_protocol](port) else f"target {self.name} does not answer on port {port}"

    def handle(self) -> dict[str, str]:
        assert self.dir is not None
        return {"launcher": "process", "node_dir": str(self.dir), "definition": self.d.path}

    def _log_tail(self) -> str:
        """Why the broker did not start, in its own words: its last error line since this start (a
        stack trace's frames and a banner are not the reason), else its last lines."""
        try:
            text = self.log_file.read_text(errors="replace")
        except OSError:
            text = ""
        # scrubbed before the line is cut: a cut through the password would leave its start
        return broker_error_line(text.replace(self.password, "***")) or "no log output"

    def stop(self) -> None:
        """Everything goes through the watchdog (the same path as when this process dies)."""
        if self._attached:
            return
        try:
            if self._supervisor is None:
                if self.dir is not None:
                    shutil.rmtree(self.dir, ignore_errors=True)
                    self.dir = None
                return
            self._note("stop (end of run)")
            supervisor, started = self._supervisor, self.proc
            self._supervisor, self.proc = None, None
            supervisor.stop_and_reap(started, f"target {self.name}")
            self.dir = None
        finally:
            for fd in self._claims or ():
                os.close(fd)  # closing the descriptor releases its lock
            self._claims = None


#: How long a target waits for another target of the suite to release a fixed path it binds too.
FIXED_PATH_WAIT_S = 180.0


def claim_fixed_paths(target: str, paths: dict[str, str]) -> list[int]:
    """A machine-wide lock per fixed path (a file beside it in the temp dir, so every run of the
    suite on the machine sees it), waited for up to :data:`FIXED_PATH_WAIT_S`; then a path that
    answers as a UNIX socket belongs to a server the suite did not start, which the broker would
    take over: refused in one line. The descriptors hold the locks until closed."""
    held: list[int] = []
    try:
        for path, why in paths.items():
            name = hashlib.sha1(path.encode()).hexdigest()[:12]
            fd = os.open(Path(tempfile.gettempdir()) / f"conformance-fixed-{name}.lock", os.O_RDWR | os.O_CREAT, 0o600)
            held.append(fd)
            if not wait_until(lambda fd=fd: _try_lock(fd), FIXED_PATH_WAIT_S, 0.1):
                raise TargetError(f"target {target}: another run of the suite has held {path} for {FIXED_PATH_WAIT_S:.0f}s "
                                  f"({why}); run one such target at a time")
            if _answers(path):
                raise TargetError(f"target {target}: {path} is in use by a server the suite did not start, and this broker "
                                  f"binds it whatever its options ({why}); it would take it over: stop that server first")
    except BaseException:
        for fd in held:
            os.close(fd)
        raise
    return held


def _try_lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


def _answers(path: str) -> bool:
    """A server accepts connections on the UNIX socket at ``path`` (a stale socket file does not)."""
    if not Path(path).is_socket():
        return False
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(1.0)
        try:
            s.connect(path)
            return True
        except OSError:
            return False


#: A line that states an error, in the words brokers use (LavinMQ: "Unhandled exception: ...",
#: qpidd: "[Broker] critical ...", Erlang: "error:" / "failed"); a stack frame is never one.
_ERROR_WORDS = re.compile(r"\b(error|fatal|critical|exception|panic|failed|cannot|can't|unable|in use|denied|invalid|"
                          r"unknown option|unrecognised|unrecognized|no such)\b", re.IGNORECASE)
_FRAME = re.compile(r"^\s+(from|at)\s|^\s*from \?\?\?|^\s+\S+\.(cr|c|cc|cpp|erl|py|java):\d+")


def broker_error_line(log: str) -> str:
    """The broker's own error line from the log of its last start: the last line that states an
    error; else the last three lines."""
    start = log.rfind("==== conformance")
    since = log[start:] if start >= 0 else log
    lines = [ln.strip() for ln in since.splitlines() if ln.strip() and not ln.startswith("====") and not _FRAME.search(ln)]
    errors = [ln for ln in lines if _ERROR_WORDS.search(ln)]
    if errors:
        return errors[-1][:400]
    return " | ".join(lines[-3:])[:400]


def launch(*, arg: str | None = None, attach: str | None = None, run_dir: str | None = None, **_: object) -> ProcessTarget:
    """Entry point for ``--target process:<definition.yaml>`` (``arg``); ``attach`` controls a running one."""
    if attach:
        state = json.loads((Path(attach) / STATE).read_text())
        return ProcessTarget(load_definition(state["definition"]), attach=attach)
    if not arg:
        raise TargetError("target 'process' needs a definition: a shipped one by name (--target process:lavinmq) or a file (process:FILE.yaml)")
    return ProcessTarget(load_definition(arg), run_dir=run_dir)
