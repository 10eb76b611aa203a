"""AMQP 1.0 brokers that run only as containers here (Qpid Broker-J, ActiveMQ Artemis).

``--target qpid-broker-j`` / ``--target activemq-artemis`` start the image named in docker/<name>/
through testcontainers and connect the proton adapter to its AMQP port. Without a Docker engine the
target fails at once with a one-line reason (no engine here: run against an external URL instead).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from conformance.errors import TargetError
from conformance.targets import Target, probe_tcp

DOCKER_DIR = Path(__file__).resolve().parents[2] / "docker"


@dataclass
class ContainerTarget(Target):
    definition: dict[str, Any] | None = None
    _container: Any = None

    def start(self) -> None:
        d = self.definition or {}
        try:
            from testcontainers.core.container import DockerContainer
        except ImportError as exc:
            raise TargetError(f"target {self.name} needs testcontainers (pip install 'broker-conformance[containers]'): {exc}") from None
        try:
            c = DockerContainer(d["image"])
            for k, v in (d.get("environment") or {}).items():
                c = c.with_env(k, str(v))
            c = c.with_exposed_ports(int(d["amqp_port"]))
            c.start()
        except Exception as exc:  # docker.errors.DockerException and friends: no engine, no image
            cause = str(exc).splitlines()[0][:200]
            raise TargetError(f"target {self.name} needs a Docker engine, and none answered ({cause}); "
                              f"run against an external URL instead (--target amqp://user:pass@host:port)") from None
        self._container = c
        host, port = c.get_container_host_ip(), c.get_exposed_port(int(d["amqp_port"]))
        user, password = d.get("user", "guest"), d.get("password", "guest")
        self.url = f"amqp://{user}:{password}@{host}:{port}/"
        end = time.monotonic() + float(d.get("boot_timeout_s", 90))
        while probe_tcp(self.url):
            if time.monotonic() > end:
                raise TargetError(f"target {self.name} did not accept AMQP connections within {d.get('boot_timeout_s', 90)}s")
            time.sleep(0.2)  # allowed: polling a booting container's port with a deadline

    def stop(self) -> None:
        if self._container is not None:
            self._container.stop()
            self._container = None


def _load(name: str) -> ContainerTarget:
    path = DOCKER_DIR / name / "target.yaml"
    definition = yaml.safe_load(path.read_text())
    return ContainerTarget(name=name, definition=definition)


def broker_j(**_: object) -> ContainerTarget:
    return _load("qpid-broker-j")


def artemis(**_: object) -> ContainerTarget:
    return _load("activemq-artemis")
