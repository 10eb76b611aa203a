"""A Spark standalone cluster (master + worker) and a Spark Connect server on loopback, started from
the installed pyspark package's own scripts, for trying (and testing) ``--spark-master`` for real.

Why it exists: ``conformance report --spark-master spark://...`` and ``sc://...`` are the ways a user
points the report at their cluster; a mode that was never run is a mode that does not work. pyspark
ships what both need (``bin/spark-class`` with the Master and Worker classes, ``sbin/
start-connect-server.sh`` and the ``spark-connect`` jar), so both run here offline, on 127.0.0.1, on
free ports, with nothing from the network.

Every JVM is started in its own session with the marker of a :class:`conformance.supervisor.Supervisor`
watchdog, so none outlives the process that started it, however that process ends (``stop`` or an
exception, Ctrl-C, SIGKILL). Readiness is awaited on evidence, each with a deadline: the master's
JSON status lists the worker ALIVE; the Connect server accepts a TCP connection on its gRPC port.

    python3 -m reports.local_cluster          # start both, print the URLs, stop on Enter
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import tempfile
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from conformance.supervisor import Supervisor
from conformance.targets import free_port, wait_until

#: JVM start on a loaded 2-core machine takes 5-20 s; a deadline, not a pause.
BOOT_TIMEOUT_S = float(os.environ.get("CONFORMANCE_SPARK_BOOT_TIMEOUT", "120"))


class ClusterError(RuntimeError):
    """A Spark process did not start or did not become ready; the message names which and why."""


def spark_home() -> Path:
    """The pyspark package directory: it is a complete SPARK_HOME (bin/, sbin/, jars/)."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def connect_jar() -> Path | None:
    """The Spark Connect server jar pyspark ships (pyspark 4 has it in jars/); None if absent."""
    jars = sorted((spark_home() / "jars").glob("spark-connect_*.jar"))
    return jars[0] if jars else None


def _wait(predicate: Callable[[], bool], deadline_s: float, what: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    """Poll ``predicate`` (a cheap readiness query) until true; a process that exits or a deadline
    that passes is a ClusterError with the tail of its log."""
    ready = wait_until(lambda: proc.poll() is not None or predicate(), deadline_s, 0.2)
    if proc.poll() is not None:
        raise ClusterError(f"{what} exited with status {proc.returncode} at start: {_tail(log)}")
    if not ready:
        raise ClusterError(f"{what} was not ready within {deadline_s:.0f}s: {_tail(log)}")


def _tail(log: Path, lines: int = 3) -> str:
    try:
        text = log.read_text(errors="replace").strip().splitlines()
    except OSError:
        return "(no log)"
    return " | ".join(text[-lines:])[:600] or "(empty log)"


def _port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def _alive_workers(webui_port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{webui_port}/json/", timeout=2) as r:
            status = json.load(r)
    except (OSError, ValueError):
        return 0
    return int(status.get("aliveworkers", sum(1 for w in status.get("workers", []) if w.get("state") == "ALIVE")))


@dataclass
class LocalSpark:
    """The processes of one local cluster; use as a context manager (everything stops on exit)."""

    cores: int = 2
    worker_memory: str = "2g"
    dir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="conformance-spark-")))
    master_url: str | None = None
    connect_url: str | None = None
    _sup: Supervisor | None = None
    _procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def __post_init__(self) -> None:
        os.chmod(self.dir, 0o700)
        self._sup = Supervisor.spawn(secrets.token_hex(8), str(self.dir))
        self._sup.wait_ready()

    def _env(self) -> dict[str, str]:
        assert self._sup is not None
        home = str(spark_home())
        return {**os.environ, **self._sup.env(), "SPARK_HOME": home, "SPARK_LOCAL_IP": "127.0.0.1",
                "SPARK_LOG_DIR": str(self.dir / "logs"), "SPARK_PID_DIR": str(self.dir), "SPARK_NO_DAEMONIZE": "1",
                "SPARK_WORKER_DIR": str(self.dir / "work"), "SPARK_LOCAL_DIRS": str(self.dir / "tmp"),
                "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", "python3")}

    def _start(self, name: str, argv: list[str]) -> tuple[subprocess.Popen[bytes], Path]:
        log = self.dir / f"{name}.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, cwd=self.dir,
                                    env=self._env(), start_new_session=True)
        self._procs.append(proc)
        return proc, log

    def start_standalone(self) -> str:
        """A master and one worker (``cores``, ``worker_memory``); returns ``spark://127.0.0.1:P``."""
        spark_class = str(spark_home() / "bin" / "spark-class")
        port, ui = free_port(), free_port()
        master, mlog = self._start("master", [spark_class, "org.apache.spark.deploy.master.Master",
                                              "--host", "127.0.0.1", "--port", str(port), "--webui-port", str(ui)])
        url = f"spark://127.0.0.1:{port}"
        _wait(lambda: _port_open(port) and _port_open(ui), BOOT_TIMEOUT_S, "the Spark master", master, mlog)
        worker, wlog = self._start("worker", [spark_class, "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1",
                                              "--webui-port", str(free_port()), "--cores", str(self.cores),
                                              "--memory", self.worker_memory, "--work-dir", str(self.dir / "work")])
        # the master's own status says the worker registered: the barrier before any job is sent
        _wait(lambda: _alive_workers(ui) >= 1, BOOT_TIMEOUT_S, "the Spark worker", worker, wlog)
        self.master_url = url
        return url

    def start_connect(self, master: str = "local[2]") -> str:
        """A Spark Connect server (sbin/start-connect-server.sh in the foreground) running its
        sessions on ``master``; returns ``sc://127.0.0.1:P``."""
        if connect_jar() is None:
            raise ClusterError(f"this pyspark has no spark-connect jar in {spark_home() / 'jars'}; "
                               "the server cannot be started offline")
        port = free_port()
        script = str(spark_home() / "sbin" / "start-connect-server.sh")
        proc, log = self._start("connect", [script, "--master", master, "--conf", f"spark.connect.grpc.binding.port={port}",
                                            "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
                                            "--conf", "spark.ui.enabled=false", "--conf", "spark.sql.shuffle.partitions=8",
                                            "--conf", "spark.sql.session.timeZone=UTC"])
        _wait(lambda: _port_open(port), BOOT_TIMEOUT_S, "the Spark Connect server", proc, log)
        self.connect_url = f"sc://127.0.0.1:{port}"
        return self.connect_url

    def stop(self) -> None:
        """Every process started here, TERM then KILL after a grace period, and the directory."""
        if self._sup is not None:
            self._sup.stop()
            self._sup = None
        for p in self._procs:
            if p.poll() is None:  # the watchdog found it by marker; reap our handle, or end it here
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()

    def __enter__(self) -> "LocalSpark":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main() -> int:
    with LocalSpark() as spark:
        print(spark.start_standalone(), flush=True)
        print(spark.start_connect(), flush=True)
        input("Enter stops both: ")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
