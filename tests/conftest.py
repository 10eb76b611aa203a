"""Shared fixtures: one private RabbitMQ node for the whole test session (a real broker, never a mock)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Iterator

import pytest

from adapters.rabbitmq.launcher import RabbitMQLocalNode

ROOT = Path(__file__).resolve().parent.parent
os.environ.setdefault("PYTHONPATH", str(ROOT))


@pytest.fixture(scope="session")
def rabbit() -> Iterator[RabbitMQLocalNode]:
    """The node also serves AMQP 1.0 on the same port (the bundled plugin picks by protocol header)."""
    node = RabbitMQLocalNode(plugins=("rabbitmq_amqp1_0",))
    node.start()
    try:
        yield node
    finally:
        node.stop()


def conformance_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "conformance.cli", *args]
