"""Private RabbitMQ nodes launched from the Debian package, for local runs and CI.

Everything a node owns is private: node name, AMQP/distribution/epmd ports, data and log dirs, and
its Erlang cookie (through HOME). Nothing system-wide is touched, so several nodes and a system
service can coexist. The node runs in the foreground of its own process group, which is what makes
kill -9 of the whole node (beam and its helpers) a single signal.
"""

from __future__ import annotations

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
from conformance.targets import Target, wait_until

DEFAULT_HOME = "/usr/lib/rabbitmq"
INSTALL_HINT = "install it with: apt-get update && apt-get install -y --no-install-recommends rabbitmq-server"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def amqp_ready(port: int) -> bool:
    """True when the port answers an AMQP 0-9-1 protocol header with connection.start."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0) as s:
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
        plugins: tuple[str, ...] = (),
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
        self.amqp_port = self.dist_port = self.epmd_port = 0

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
        self.amqp_port, self.dist_port, self.epmd_port = free_port(), free_port(), free_port()
        cookie = self.dir / ".erlang.cookie"
        cookie.write_text(secrets.token_hex(16))
        cookie.chmod(0o400)
        (self.dir / "rabbitmq.conf").write_text(
            "\n".join(
                [
                    f"listeners.tcp.1 = 127.0.0.1:{self.amqp_port}",
                    f"default_user = {self.user}",
                    f"default_pass = {self.password}",
                    "loopback_users = none",
                    "log.console = false",
                    "log.file.level = info",
                ]
            )
            + "\n"
        )
        (self.dir / "enabled_plugins").write_text(f"[{','.join(self.plugins)}].\n")
        (self.dir / "rabbitmq-env.conf").write_text("")
        self.url = f"amqp://{self.user}:{quote(self.password, safe='')}@127.0.0.1:{self.amqp_port}/%2F"
        self.facts = {"node": self.node, "node_dir": str(self.dir), "launcher": "rabbitmq-local"}

    def _env(self) -> dict[str, str]:
        assert self.dir is not None
        d = str(self.dir)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("RABBITMQ_", "ERL_"))}
        env.update(
            HOME=d,
            RABBITMQ_NODENAME=self.node,
            RABBITMQ_NODE_IP_ADDRESS="127.0.0.1",
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
        return env

    def start(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            return
        if self.dir is None or not (self.dir / "rabbitmq.conf").exists():
            self._prepare()
        assert self.dir is not None
        log = open(self.dir / "console.log", "ab")
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
        proc = self.proc
        ok = wait_until(lambda: proc.poll() is not None or amqp_ready(self.amqp_port), self.boot_timeout, 0.1)
        if proc.poll() is not None:
            raise TargetError(f"RabbitMQ node {self.node} exited during boot (code {proc.returncode}): {self._log_tail()}")
        if not ok:
            self._kill_group()
            raise TargetError(f"RabbitMQ node {self.node} did not accept AMQP within {self.boot_timeout:.0f}s: {self._log_tail()}")

    def _log_tail(self) -> str:
        assert self.dir is not None
        lines: list[str] = []
        for p in [self.dir / "console.log", *sorted((self.dir / "log").glob("*.log"))]:
            if p.exists():
                lines += [line for line in p.read_text(errors="replace").splitlines() if line.strip()]
        tail = " | ".join(lines[-3:]) or "no log output"
        return tail.replace(self.password, "***")

    def _kill_group(self, sig: int = signal.SIGKILL) -> None:
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, sig)
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)

    def shutdown(self) -> None:
        """Graceful stop (SIGTERM: the node flushes and exits), data kept for a later start."""
        if self.proc is not None and self.proc.poll() is None:
            self._kill_group(signal.SIGTERM)
        self.proc = None

    def kill(self) -> None:
        """kill -9 of the node's whole process group: no flush, no goodbye to clients."""
        self._kill_group(signal.SIGKILL)
        self.proc = None

    def restart(self) -> None:
        self.shutdown()
        self.start()

    def check_alive(self) -> str | None:
        if self.proc is None or self.proc.poll() is not None:
            code = None if self.proc is None else self.proc.returncode
            return f"node {self.node} is not running (exit code {code})"
        return None if amqp_ready(self.amqp_port) else f"node {self.node} does not answer on port {self.amqp_port}"

    def stop(self) -> None:
        self.shutdown()
        self._stop_epmd()
        if self._own_dir and not self.keep_dir and self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    def _stop_epmd(self) -> None:
        if not self.epmd_port:
            return
        epmd = shutil.which("epmd") or next(iter(sorted(Path("/usr/lib/erlang").glob("erts-*/bin/epmd"))), None)
        if epmd:
            subprocess.run([str(epmd), "-port", str(self.epmd_port), "-kill"], capture_output=True, timeout=10)


def launch(**options: object) -> RabbitMQLocalNode:
    """Entry point for ``--target rabbitmq-local``."""
    return RabbitMQLocalNode(**options)  # type: ignore[arg-type]

