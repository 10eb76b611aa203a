"""Brokers that run only as containers here (Qpid Broker-J, ActiveMQ Artemis, LavinMQ).

``--target qpid-broker-j`` / ``--target activemq-artemis`` start the image named in docker/<name>/
through testcontainers and connect the proton adapter to its AMQP port. Without a Docker engine the
target fails at once with a one-line reason (no engine here: run against an external URL instead).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conformance import yamlio
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
            image = f"{d['image']}:{d['version']}" if d.get("version") else d["image"]
            c = DockerContainer(image)
            for k, v in (d.get("environment") or {}).items():
                c = c.with_env(k, str(v))
            c = c.with_exposed_ports(int(d["amqp_port"]))
            c.start()
        except Exception as exc:  # docker.errors.DockerException and friends: no engine, no image
            cause = str(exc).splitlines()[0][:200]
            raise TargetError(f"target {self.name} needs a Docker engine, and none answered ({cause}); "
                              f"run against an external URL instead (--target amqp://HOST:PORT/, credentials in the URL)") from None
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


def _load(name: str, version: str | None = None) -> ContainerTarget:
    path = DOCKER_DIR / name / "target.yaml"
    definition = yamlio.safe_load(path.read_text())
    if version:
        if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}", version):
            raise TargetError(f"target {name}:{version}: not an image tag (e.g. {name}:{definition.get('version', '1.0.0')})")
        definition["version"] = version
    label = f"{name}:{definition['version']}" if definition.get("version") else name
    return ContainerTarget(name=label, definition=definition)


def broker_j(**_: object) -> ContainerTarget:
    return _load("qpid-broker-j")


def artemis(**_: object) -> ContainerTarget:
    return _load("activemq-artemis")


def lavinmq(arg: str | None = None, **_: object) -> ContainerTarget:
    """``--target lavinmq`` (the version pinned in docker/lavinmq/target.yaml) or ``lavinmq:<version>``."""
    return _load("lavinmq", arg)
