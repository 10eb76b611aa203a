"""The Qpid Proton example broker as a launched target: a generic AMQP 1.0 broker in CI.

Debian's ``libqpid-proton11-dev-examples`` ships ``/usr/share/proton/examples/python/broker.py``, a
minimal in-memory AMQP 1.0 broker written on python-qpid-proton: queues are created when first
addressed, there is no management API, no persistence and no transaction coordinator, and it
announces no product or version. That makes it the suite's non-RabbitMQ target: its verdicts come
from the protocol alone, judged by the spec-only ``amqp-1.0`` profile.

The broker runs with the interpreter running the suite (which has python-qpid-proton), on a free
loopback port, in its own process group so that stopping it stops everything it started. It is
ready when the port answers an AMQP 1.0 protocol header with one of its own. It cannot be
restarted by the suite in any meaningful way: with no persistence a restart is a new, empty broker.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

from conformance.errors import TargetError
from conformance.supervisor import Supervisor, SupervisorError
from conformance.targets import Target, free_port, probe_tcp, wait_until

DEFAULT_SCRIPT = "/usr/share/proton/examples/python/broker.py"
INSTALL_HINT = "install it with: apt-get update && apt-get install -y --no-install-recommends libqpid-proton11-dev-examples"
#: AMQP 1.0 protocol header (transport 2.2): "AMQP", id 0 (plain AMQP), version 1.0.0.
AMQP10_HEADER = b"AMQP\x00\x01\x00\x00"


def amqp10_ready(port: int) -> bool:
    """True when the port answers an AMQP 1.0 protocol header with an AMQP 1.0 header (plain or SASL)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0) as s:
            s.sendall(AMQP10_HEADER)
            head = b""
            while len(head) < 8:
                chunk = s.recv(8 - len(head))
                if not chunk:
                    break
                head += chunk
            return head[:4] == b"AMQP" and head[5:8] == b"\x01\x00\x00"
    except OSError:
        return False


class ProtonExampleBroker(Target):
    """One private Proton example broker on 127.0.0.1, owned by this object from start to stop."""

    def __init__(self, name: str = "proton-example", *, script: str | None = None, boot_timeout: float = 15.0, **_: object) -> None:
        super().__init__(name=name)
        self.script = Path(script or os.environ.get("CONFORMANCE_PROTON_BROKER", DEFAULT_SCRIPT))
        self.boot_timeout = boot_timeout
        self._proc: subprocess.Popen[bytes] | None = None
        self._dir: Path | None = None
        self._supervisor: Supervisor | None = None
        self.port = 0

    def start(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            return
        if not self.script.is_file():
            raise TargetError(f"the Qpid Proton example broker {self.script} is missing; {INSTALL_HINT}")
        self._dir = Path(tempfile.mkdtemp(prefix="conformance-proton-example-"))
        self.port = free_port()
        # the watchdog: the broker never outlives this process, however it ends (SIGKILL included)
        self._supervisor = Supervisor.spawn(secrets.token_hex(8), str(self._dir))
        log = open(self._dir / "broker.log", "wb")
        try:
            self._proc = subprocess.Popen(
                [sys.executable, str(self.script), "-a", f"127.0.0.1:{self.port}"],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=self._dir,
                env={**os.environ, **self._supervisor.env()},
            )
        finally:
            log.close()
        try:
            self._supervisor.wait_ready()
        except SupervisorError as exc:
            self.stop()
            raise TargetError(f"the Proton example broker was not started: {exc}") from None
        self.url = f"amqp://127.0.0.1:{self.port}"
        self.facts = {"launcher": "proton-example", "script": str(self.script), "port": str(self.port),
                      "pid": str(self._proc.pid), "dir": str(self._dir)}
        proc = self._proc
        if not wait_until(lambda: proc.poll() is not None or amqp10_ready(self.port), self.boot_timeout):
            self.stop()
            raise TargetError(f"the Proton example broker did not answer an AMQP 1.0 header on 127.0.0.1:{self.port} "
                              f"within {self.boot_timeout:.0f}s")
        if proc.poll() is not None:
            tail = self._log_tail()
            self.stop()
            raise TargetError(f"the Proton example broker exited with status {proc.returncode} at start: {tail}")

    def _log_tail(self) -> str:
        if self._dir is None:
            return ""
        try:
            lines = (self._dir / "broker.log").read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return lines[-1][:300] if lines else "(no output)"

    def check_alive(self) -> str | None:
        if self._proc is not None and self._proc.poll() is not None:
            return f"the Proton example broker exited with status {self._proc.returncode}: {self._log_tail()}"
        return probe_tcp(self.url)

    def stop(self) -> None:
        """SIGTERM to the broker's process group, SIGKILL if it is still there after 5 s; then its dir goes."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            for sig, grace in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
                try:
                    os.killpg(proc.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    proc.wait(grace)
                    break
                except subprocess.TimeoutExpired:
                    continue
        if self._supervisor is not None:
            self._supervisor.stop()  # removes the private dir too
            self._supervisor = None
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None


def launch(**options: object) -> ProtonExampleBroker:
    """Entry point for ``--target proton-example``."""
    options.pop("attach", None)  # nothing to attach to: the broker cannot be controlled from another process
    return ProtonExampleBroker(**options)  # type: ignore[arg-type]
