"""The two STOMP targets, launched privately on loopback: ActiveMQ Classic from Debian, and a private
RabbitMQ node with its bundled ``rabbitmq_stomp`` plugin.

Both follow the core's rules for launched brokers: free loopback ports, a private 0700 directory,
and the core's watchdog (:mod:`conformance.supervisor`) started first, so the broker never outlives
the run however it ends. Readiness is the protocol's own handshake (CONNECT answered by
CONNECTED), never a sleep.
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

from adapters.rabbitmq.launcher import RabbitMQLocalNode, free_port, write_private
from conformance.errors import TargetError
from conformance.supervisor import MARKER, Supervisor, SupervisorError, exited, teardown
from conformance.targets import Target, wait_until

ACTIVEMQ_HOME = "/usr/share/activemq"
ACTIVEMQ_HINT = "install it with: apt-get update && apt-get install -y --no-install-recommends activemq"


def stomp_ready(port: int) -> bool:
    """True when the port answers a STOMP 1.2 CONNECT with CONNECTED (an ERROR means a broker that
    is up but refuses us, which the adapter reports properly on its own connect)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0) as s:
            s.sendall(b"CONNECT\naccept-version:1.2\nhost:/\n\n\x00")
            head = s.recv(16)
            return head.startswith((b"CONNECTED", b"ERROR"))
    except OSError:
        return False


class ActiveMQLocal(Target):
    """A private ActiveMQ Classic broker: own base/conf/data dirs, one STOMP connector on 127.0.0.1."""

    def __init__(self, name: str = "activemq-local", *, home: str | None = None, base_dir: str | None = None,
                 boot_timeout: float = 60.0, **_: object) -> None:
        super().__init__(name=name)
        self.home = Path(home or os.environ.get("CONFORMANCE_ACTIVEMQ_HOME", ACTIVEMQ_HOME))
        self.dir = Path(base_dir) if base_dir else None
        self._own_dir = base_dir is None
        self.boot_timeout = boot_timeout
        self.port = 0
        self.token = secrets.token_hex(8)
        self.proc: subprocess.Popen[bytes] | None = None
        self._supervisor: Supervisor | None = None
        self._attached = False

    @property
    def can_restart(self) -> bool:
        return True

    def _prepare(self) -> None:
        jar = self.home / "bin" / "activemq.jar"
        if not jar.exists():
            raise TargetError(f"ActiveMQ is not installed ({jar} not found); {ACTIVEMQ_HINT}")
        if shutil.which("java") is None:
            raise TargetError("java not found; install it with: apt-get install -y --no-install-recommends openjdk-17-jre-headless")
        if self.dir is None:
            self.dir = Path(tempfile.mkdtemp(prefix="conformance-activemq-"))
        self.dir.chmod(0o700)
        (self.dir / "conf").mkdir(exist_ok=True)
        (self.dir / "data").mkdir(exist_ok=True)
        self.port = free_port()
        template = (Path(__file__).parent / "activemq.xml").read_text()
        write_private(self.dir / "conf" / "activemq.xml", template.replace("@STOMP_PORT@", str(self.port)))
        log4j = Path("/etc/activemq/instances-available/main/log4j2.properties")
        if log4j.exists():
            write_private(self.dir / "conf" / "log4j2.properties", log4j.read_text())
        write_private(self.dir / "target.json", json.dumps({"port": self.port, "token": self.token}))
        self._urls()

    def _urls(self) -> None:
        self.url = f"stomp://127.0.0.1:{self.port}/"
        self.facts = {"base_dir": str(self.dir), "launcher": "activemq-local", "stomp_port": self.port}

    def _argv(self) -> list[str]:
        d = str(self.dir)
        return ["java", "-Xms64M", "-Xmx256M", "-XX:+UseSerialGC", f"-Dactivemq.base={d}", f"-Dactivemq.conf={d}/conf",
                f"-Dactivemq.data={d}/data", f"-Dactivemq.home={self.home}", "-jar", str(self.home / "bin" / "activemq.jar"),
                "start", f"xbean:file:{d}/conf/activemq.xml"]

    def start(self) -> None:
        if self.check_running():
            return
        if self.dir is None or not (self.dir / "target.json").exists():
            self._prepare()
        assert self.dir is not None
        remove = str(self.dir) if self._own_dir else None
        new_supervisor = self._supervisor is None and not self._attached
        if new_supervisor:
            try:
                self._supervisor = Supervisor.spawn(self.token, remove)
            except OSError as exc:
                raise TargetError(f"ActiveMQ not started: the process supervisor did not start: {exc}") from None
        log = os.fdopen(os.open(self.dir / "console.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600), "ab")
        try:
            env = {**os.environ, MARKER: self.token}  # the watchdog finds every process by this marker
            self.proc = subprocess.Popen(self._argv(), env=env, cwd=self.dir, stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, start_new_session=True)
        finally:
            log.close()
        state = json.loads((self.dir / "target.json").read_text())
        state["pid"] = self.proc.pid
        write_private(self.dir / "target.json", json.dumps(state))
        if new_supervisor and self._supervisor is not None:
            try:
                self._supervisor.wait_ready()
            except SupervisorError as exc:
                teardown(self.token, remove)
                self._supervisor = None
                raise TargetError(f"ActiveMQ not started: {exc}") from None
        proc = self.proc
        ok = wait_until(lambda: proc.poll() is not None or stomp_ready(self.port), self.boot_timeout, 0.1)
        if proc.poll() is not None:
            raise TargetError(f"ActiveMQ exited during boot (code {proc.returncode}): {self._log_tail()}")
        if not ok:
            self._kill_group(signal.SIGKILL)
            raise TargetError(f"ActiveMQ did not answer STOMP CONNECT on 127.0.0.1:{self.port} within {self.boot_timeout:.0f}s: {self._log_tail()}")

    def _log_tail(self) -> str:
        p = self.dir / "console.log" if self.dir else None
        lines = [x for x in p.read_text(errors="replace").splitlines() if x.strip()] if p and p.exists() else []
        return " | ".join(lines[-3:]) or "no log output"

    def _pid(self) -> int | None:
        try:
            return int(json.loads((self.dir / "target.json").read_text())["pid"])  # type: ignore[operator]
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def check_running(self) -> bool:
        pid = self._pid() if self.dir is not None else None
        return pid is not None and not exited(pid, self.proc)

    def _kill_group(self, sig: int) -> None:
        pid = self._pid()
        if pid is None:
            return
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            return
        if not wait_until(lambda: exited(pid, self.proc), 30, 0.02):
            os.killpg(pid, signal.SIGKILL)
            wait_until(lambda: exited(pid, self.proc), 10, 0.02)

    def restart(self) -> None:
        if self.check_running():
            self._kill_group(signal.SIGTERM)
        self.proc = None
        self.start()

    def kill(self) -> None:
        self._kill_group(signal.SIGKILL)
        self.proc = None

    def check_alive(self) -> str | None:
        if not self.check_running():
            return "ActiveMQ is not running"
        return None if stomp_ready(self.port) else f"ActiveMQ does not answer STOMP on port {self.port}"

    def handle(self) -> dict[str, str]:
        return {"launcher": "activemq-local", "node_dir": str(self.dir)}

    @classmethod
    def attached(cls, base_dir: str) -> "ActiveMQLocal":
        t = cls(base_dir=base_dir)
        t._own_dir, t._attached = False, True
        state = json.loads((Path(base_dir) / "target.json").read_text())
        t.port, t.token = int(state["port"]), state["token"]
        t._urls()
        return t

    def stop(self) -> None:
        if self._attached:
            return
        if self._supervisor is None:
            if self._own_dir and self.dir is not None:
                shutil.rmtree(self.dir, ignore_errors=True)
            return
        supervisor, started = self._supervisor, self.proc
        self._supervisor, self.proc = None, None
        supervisor.stop_and_reap(started, "ActiveMQ")


class RabbitMQStompNode(RabbitMQLocalNode):
    """The core's private RabbitMQ node with ``rabbitmq_stomp`` listening on 127.0.0.1 only; the URL
    carries the AMQP port (option ``amqp-port``) for queue setup and counters (see admin.py)."""

    def __init__(self, name: str = "rabbitmq-stomp", **options: object) -> None:
        options.setdefault("plugins", ("rabbitmq_stomp",))
        super().__init__(name=name, **options)  # type: ignore[arg-type]
        self.stomp_port = 0

    def _prepare(self) -> None:
        super()._prepare()
        assert self.dir is not None
        self.stomp_port = free_port()
        conf = self.dir / "rabbitmq.conf"
        write_private(conf, conf.read_text() + f"stomp.listeners.tcp.1 = 127.0.0.1:{self.stomp_port}\nstomp.tcp_listen_options.backlog = 128\n")
        write_private(self.dir / "stomp.json", json.dumps({"port": self.stomp_port}))
        self._stomp_url()

    def _stomp_url(self) -> None:
        self.url = (f"stomp://{self.user}:{quote(self.password, safe='')}@127.0.0.1:{self.stomp_port}/"
                    f"?amqp-port={self.amqp_port}")
        self.facts = {**self.facts, "launcher": "rabbitmq-stomp", "stomp_port": self.stomp_port}

    def start(self) -> None:
        super().start()
        ok = wait_until(lambda: stomp_ready(self.stomp_port), self.boot_timeout, 0.05)
        if not ok:
            raise TargetError(f"RabbitMQ node {self.node}: the STOMP listener on 127.0.0.1:{self.stomp_port} did not answer CONNECT")

    def check_alive(self) -> str | None:
        return super().check_alive() or (None if stomp_ready(self.stomp_port) else f"STOMP port {self.stomp_port} does not answer")

    def handle(self) -> dict[str, str]:
        return {**super().handle(), "launcher": "rabbitmq-stomp"}

    @classmethod
    def attached(cls, node_dir: str, **options: object) -> "RabbitMQStompNode":
        node = super().attached(node_dir, **options)
        assert isinstance(node, RabbitMQStompNode)
        node.stomp_port = int(json.loads((Path(node_dir) / "stomp.json").read_text())["port"])
        node._stomp_url()
        return node


def launch_activemq(**options: object) -> ActiveMQLocal:
    """Entry point for ``--target activemq-local``; ``attach=<dir>`` controls a running broker."""
    attach = options.pop("attach", None)
    if attach:
        return ActiveMQLocal.attached(str(attach))
    return ActiveMQLocal(**options)  # type: ignore[arg-type]


def launch_rabbitmq_stomp(**options: object) -> RabbitMQStompNode:
    """Entry point for ``--target rabbitmq-stomp``."""
    attach = options.pop("attach", None)
    if attach:
        return RabbitMQStompNode.attached(str(attach))
    options.pop("arg", None)
    return RabbitMQStompNode(**options)
