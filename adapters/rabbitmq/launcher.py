"""Private RabbitMQ nodes launched from the Debian package, for local runs and CI.

Everything a node owns is private: node name, AMQP/distribution/epmd ports, data and log dirs, and
its Erlang cookie (through HOME). Nothing system-wide is touched, so several nodes and a system
service can coexist. The node runs in the foreground of its own process group, which is what makes
kill -9 of the node (the start script and beam) a single signal.

The node never outlives the process that launched it: a watchdog (:mod:`conformance.supervisor`)
started before the node stops every process of the node and removes its directory when the launcher
stops it or dies, however it dies. Every socket of the node (AMQP, Erlang distribution, its private
epmd) listens on 127.0.0.1 only, and the directory that holds the node's password is private (0700,
files 0600).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
from pathlib import Path
from urllib.parse import quote

from conformance.errors import TargetError
from conformance.supervisor import MARKER, Supervisor, SupervisorError, exited, teardown
from conformance.targets import Replica, Target, free_port, wait_until

DEFAULT_HOME = "/usr/lib/rabbitmq"
#: Erlang's distribution listener binds every address unless told otherwise (epmd: ERL_EPMD_ADDRESS).
LOOPBACK_DIST_ARGS = "-kernel inet_dist_use_interface {127,0,0,1}"
INSTALL_HINT = "install it with: apt-get update && apt-get install -y --no-install-recommends rabbitmq-server"


def write_private(path: Path, text: str, mode: int = 0o600) -> None:
    """Write a file that only its owner can read, with no moment at a wider mode."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(path, mode)


def amqp_ready(port: int, host: str = "127.0.0.1") -> bool:
    """True when the port answers an AMQP 0-9-1 protocol header with connection.start."""
    try:
        with socket.create_connection((host, port), timeout=1.0) as s:
            s.sendall(b"AMQP\x00\x00\x09\x01")
            head = s.recv(7)
            return len(head) == 7 and head[0] == 1  # a METHOD frame: connection.start
    except OSError:
        return False


class RabbitMQLocalNode(Target):
    """A private RabbitMQ node on 127.0.0.1 with its own ports and data dir."""

    def __init__(
        self,
        name: str = "rabbitmq-local",
        *,
        home: str | None = None,
        node_dir: str | None = None,
        plugins: tuple[str, ...] = ("rabbitmq_amqp1_0",),
        boot_timeout: float = 90.0,
        keep_dir: bool = False,
        **_: object,
    ) -> None:
        super().__init__(name=name)
        self.home = Path(home or os.environ.get("CONFORMANCE_RABBITMQ_HOME", DEFAULT_HOME))
        self._own_dir = node_dir is None
        self.dir = Path(node_dir) if node_dir else None
        self.plugins = tuple(plugins)
        self.boot_timeout = boot_timeout
        self.keep_dir = keep_dir
        self.proc: subprocess.Popen[bytes] | None = None
        self.user = "conformance"
        self.password = secrets.token_urlsafe(12)
        self.node = f"conformance-{secrets.token_hex(3)}@localhost"
        #: The address every listener of the node binds (a cluster node has one of its own on loopback).
        self.host = "127.0.0.1"
        self.amqp_port = self.dist_port = self.epmd_port = 0
        #: The marker that ties this node's processes to its watchdog (kept in node.json for attached restarts).
        self.token = secrets.token_hex(8)
        self._supervisor: Supervisor | None = None

    # -- lifecycle -----------------------------------------------------------------------------

    @property
    def can_restart(self) -> bool:
        return True

    @property
    def server_script(self) -> Path:
        return self.home / "bin" / "rabbitmq-server"

    def _prepare(self) -> None:
        if not self.server_script.exists():
            raise TargetError(f"RabbitMQ is not installed ({self.server_script} not found); {INSTALL_HINT}")
        if shutil.which("erl") is None and not Path("/usr/lib/erlang/bin/erl").exists():
            raise TargetError(f"Erlang runtime not found; {INSTALL_HINT}")
        if self.dir is None:
            self.dir = Path(tempfile.mkdtemp(prefix="conformance-rmq-"))
        self.dir.mkdir(parents=True, exist_ok=True)
        self.dir.chmod(0o700)
        self.amqp_port, self.dist_port = free_port(), free_port()
        self.epmd_port = self.epmd_port or free_port()
        cookie = self.dir / ".erlang.cookie"
        if cookie.exists():
            cookie.chmod(0o600)
        write_private(cookie, self._cookie(), 0o400)
        write_private(self.dir / "rabbitmq.conf",
            "\n".join(
                [
                    f"listeners.tcp.1 = {self.host}:{self.amqp_port}",
                    f"default_user = {self.user}",
                    f"default_pass = {self.password}",
                    "loopback_users = none",
                    "log.console = false",
                    "log.file.level = info",
                    *self._extra_config(),
                ]
            )
            + "\n"
        )
        write_private(self.dir / "enabled_plugins", f"[{','.join(self.plugins)}].\n")
        write_private(self.dir / "rabbitmq-env.conf", "")
        self.url = f"amqp://{self.user}:{quote(self.password, safe='')}@{self.host}:{self.amqp_port}/%2F"
        self.facts = {"node": self.node, "node_dir": str(self.dir), "launcher": "rabbitmq-local"}

    def _cookie(self) -> str:
        """The node's Erlang cookie: random and its own (a cluster's nodes share one)."""
        return secrets.token_hex(16)

    def _extra_config(self) -> list[str]:
        """Lines added to rabbitmq.conf (a cluster node adds its peer discovery)."""
        return []

    def _dist_env(self) -> dict[str, str]:
        """Where the node's Erlang distribution and its epmd listen (a cluster node: its own address)."""
        return {"RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": LOOPBACK_DIST_ARGS, "ERL_EPMD_ADDRESS": "127.0.0.1"}

    def _env(self) -> dict[str, str]:
        assert self.dir is not None
        d = str(self.dir)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("RABBITMQ_", "ERL_"))}
        env.update(
            HOME=d,
            RABBITMQ_NODENAME=self.node,
            RABBITMQ_NODE_IP_ADDRESS=self.host,
            RABBITMQ_NODE_PORT=str(self.amqp_port),
            RABBITMQ_DIST_PORT=str(self.dist_port),
            RABBITMQ_BASE=d,
            RABBITMQ_MNESIA_BASE=f"{d}/mnesia",
            RABBITMQ_LOG_BASE=f"{d}/log",
            RABBITMQ_PID_FILE=f"{d}/node.pid",
            RABBITMQ_CONFIG_FILE=f"{d}/rabbitmq.conf",
            RABBITMQ_ADVANCED_CONFIG_FILE=f"{d}/advanced.config",
            RABBITMQ_ENABLED_PLUGINS_FILE=f"{d}/enabled_plugins",
            RABBITMQ_CONF_ENV_FILE=f"{d}/rabbitmq-env.conf",
            ERL_EPMD_PORT=str(self.epmd_port),
        )
        env.update(self._dist_env())
        env[MARKER] = self.token
        return env

    def start(self) -> None:
        if self.check_running():
            return
        if self.dir is None or not (self.dir / "rabbitmq.conf").exists():
            self._prepare()
        assert self.dir is not None
        new_supervisor = not getattr(self, "_attached", False) and self._supervisor is None
        remove: str | None = None
        if new_supervisor:
            remove = str(self.dir) if self._own_dir and not self.keep_dir else None
            try:  # started first, waited for after the node's spawn: off the boot's critical path
                self._supervisor = Supervisor.spawn(self.token, remove)
            except OSError as exc:
                raise TargetError(f"RabbitMQ node {self.node} not started: the process supervisor did not start: {exc}") from None
        log = os.fdopen(os.open(self.dir / "console.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600), "ab")
        try:
            self.proc = subprocess.Popen(
                [str(self.server_script)],
                env=self._env(),
                cwd=self.dir,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        finally:
            log.close()
        self._save_state(self.proc.pid)
        if new_supervisor and self._supervisor is not None:
            try:
                self._supervisor.wait_ready()
            except SupervisorError as exc:
                teardown(self.token, remove)  # the watchdog's own path, run here since it is gone
                self._supervisor = None
                self.proc = None
                self.dir = None if remove else self.dir
                raise TargetError(f"RabbitMQ node {self.node} not started: {exc}") from None
        proc = self.proc
        ok = wait_until(lambda: proc.poll() is not None or amqp_ready(self.amqp_port, self.host), self.boot_timeout, 0.1)
        if proc.poll() is not None:
            raise TargetError(f"RabbitMQ node {self.node} exited during boot (code {proc.returncode}): {self._log_tail()}")
        if not ok:
            self._kill_group()
            raise TargetError(f"RabbitMQ node {self.node} did not accept AMQP within {self.boot_timeout:.0f}s: {self._log_tail()}")

    # -- state shared with other processes (xdist workers restart the node inside a case) -------

    @property
    def state_file(self) -> Path:
        assert self.dir is not None
        return self.dir / "node.json"

    def _save_state(self, pid: int) -> None:
        state = {"node": self.node, "user": self.user, "password": self.password, "pid": pid,
                 "ports": [self.amqp_port, self.dist_port, self.epmd_port], "plugins": list(self.plugins),
                 "token": self.token, "host": self.host}
        tmp = self.state_file.with_suffix(".tmp")
        write_private(tmp, json.dumps(state))
        tmp.replace(self.state_file)

    def _pid(self) -> int | None:
        """The node's process-group leader, whichever process started it last."""
        try:
            return int(json.loads(self.state_file.read_text())["pid"])
        except (OSError, ValueError, KeyError, AssertionError):
            return None

    def handle(self) -> dict[str, str]:
        """What another process needs to control this node (see :func:`launch` with ``attach``)."""
        assert self.dir is not None
        return {"launcher": "rabbitmq-local", "node_dir": str(self.dir)}

    @classmethod
    def attached(cls, node_dir: str, **options: object) -> RabbitMQLocalNode:
        """Control a node another process launched: restart and kill work; stop() leaves it running."""
        node = cls(node_dir=node_dir, **options)  # type: ignore[arg-type]
        node._own_dir = False
        node._attached = True
        state = json.loads(node.state_file.read_text())
        node.node, node.user, node.password = state["node"], state["user"], state["password"]
        node.amqp_port, node.dist_port, node.epmd_port = state["ports"]
        node.plugins = tuple(state.get("plugins", ()))
        node.token = state.get("token", node.token)
        node.host = state.get("host", node.host)
        node.url = f"amqp://{node.user}:{quote(node.password, safe='')}@{node.host}:{node.amqp_port}/%2F"
        node.facts = {"node": node.node, "node_dir": node_dir, "launcher": "rabbitmq-local"}
        return node

    def _log_tail(self) -> str:
        assert self.dir is not None
        lines: list[str] = []
        for p in [self.dir / "console.log", *sorted((self.dir / "log").glob("*.log"))]:
            if p.exists():
                lines += [line for line in p.read_text(errors="replace").splitlines() if line.strip()]
        tail = " | ".join(lines[-3:]) or "no log output"
        return tail.replace(self.password, "***")

    def _kill_group(self, sig: int = signal.SIGKILL) -> None:
        pid = self._pid() if self.dir is not None else None
        if pid is None and self.proc is not None:
            pid = self.proc.pid
        if pid is None:
            return
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            return
        if not wait_until(lambda: self._gone(pid), 30, 0.02):
            os.killpg(pid, signal.SIGKILL)
            wait_until(lambda: self._gone(pid), 10, 0.02)

    def _gone(self, pid: int) -> bool:
        """The group leader has exited (reaped, or a zombie of whichever process started it)."""
        return exited(pid, self.proc)

    def shutdown(self) -> None:
        """Graceful stop (SIGTERM: the node flushes and exits), data kept for a later start."""
        if self.check_running():
            self._kill_group(signal.SIGTERM)
        self.proc = None

    def check_running(self) -> bool:
        pid = self._pid() if self.dir is not None else None
        return pid is not None and not self._gone(pid)

    def kill(self) -> None:
        """kill -9 of the node's whole process group: no flush, no goodbye to clients."""
        self._kill_group(signal.SIGKILL)
        self.proc = None

    def restart(self) -> None:
        self.shutdown()
        self.start()

    def check_alive(self) -> str | None:
        if not self.check_running():
            code = None if self.proc is None else self.proc.poll()
            return f"node {self.node} is not running" + (f" (exit code {code})" if code is not None else "")
        return None if amqp_ready(self.amqp_port, self.host) else f"node {self.node} does not answer on port {self.amqp_port}"

    def queue_replicas(self, queue: str) -> list[Replica] | None:
        """``rabbitmq-queues quorum_status`` of ``queue`` (default vhost) on this node: each
        replica's Raft state, log index and term. None for a classic queue (the tool refuses it),
        a node that does not answer within 15 s, or output this parser does not know."""
        out = self._tool("rabbitmq-queues", "quorum_status", queue, "--formatter", "json")
        return parse_quorum_status(out) if out is not None else None

    def queue_known(self, queue: str) -> bool | None:
        """Is ``queue`` (default vhost) among the queues ``rabbitmqctl list_queues`` lists on this
        node? With neither --online nor --offline it lists the live queues and the durable ones not
        (yet) running (rabbit_amqqueue:list_down: durable records without a live one), so a name
        missing there has no record left to recover. None when the tool fails or does not answer
        within 15 s (the caller then waits out its window)."""
        out = self._tool("rabbitmqctl", "list_queues", "name", "--no-table-headers", "--timeout", "10")
        return queue in {line.strip() for line in out.splitlines()} if out is not None else None

    def _tool(self, name: str, *args: str) -> str | None:
        """What one of the node's CLI tools (rabbitmqctl, rabbitmq-queues) printed, quietly, against
        this node; None when it is not installed, fails, or does not answer within 15 s."""
        tool = self.home / "bin" / name
        if self.dir is None or not tool.exists():
            return None
        try:
            proc = subprocess.run([str(tool), "-n", self.node, "-q", *args], env=self._env(), capture_output=True, text=True,
                                  timeout=15, stdin=subprocess.DEVNULL, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return proc.stdout if proc.returncode == 0 else None

    def stop(self) -> None:
        """Stop the node, its helpers and epmd, and remove its directory: all done by the watchdog
        (the same path as when this process dies). An attached process leaves the node running."""
        if getattr(self, "_attached", False):
            return
        if self._supervisor is None:  # never started: at most a prepared directory to remove
            if self._own_dir and not self.keep_dir and self.dir is not None:
                shutil.rmtree(self.dir, ignore_errors=True)
                self.dir = None
            return
        supervisor, started = self._supervisor, self.proc
        self._supervisor, self.proc = None, None
        report = supervisor.stop_and_reap(started, f"RabbitMQ node {self.node}")
        if report.removed_dir:
            self.dir = None


def parse_quorum_status(text: str) -> list[Replica] | None:
    """The JSON ``rabbitmq-queues quorum_status --formatter json`` prints (3.8+: a list with "Node
    Name", "Raft State", "Log Index", "Term" per replica); None for anything else."""
    try:
        rows = json.loads(text)
    except ValueError:
        return None
    if not isinstance(rows, list) or not rows or not all(isinstance(r, dict) and "Node Name" in r and "Raft State" in r for r in rows):
        return None

    def number(value: object) -> int | None:
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    return [Replica(node=str(r["Node Name"]), role=str(r["Raft State"]).lower(), log_index=number(r.get("Log Index")),
                    term=number(r.get("Term"))) for r in rows]


def launch(**options: object) -> RabbitMQLocalNode:
    """Entry point for ``--target rabbitmq-local``; ``attach=<node_dir>`` controls a running node."""
    attach = options.pop("attach", None)
    if attach:
        return RabbitMQLocalNode.attached(str(attach), **options)
    return RabbitMQLocalNode(**options)  # type: ignore[arg-type]

