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


#: The longest test files, first among files of as many tests (xdist hands out the files with the most
#: tests first: pyproject addopts), so of two equal files the longer one starts first.
SLOW_FIRST = ("test_selftest.py", "test_seed_run_qpid_cpp.py", "test_selftest_qpidd.py", "test_selftest_amqp10.py", "test_e2e_amqp10.py",
              "test_e2e_failover.py", "test_seed_run_lavinmq_2.py", "test_seed_run_lavinmq_1.py", "test_soak_run.py", "test_soak_mutations.py",
              "test_spark_cluster.py", "test_trustworthy_outputs.py", "test_e2e_rabbitmq.py", "test_liveness.py", "test_e2e_proton_broker.py",
              "test_gate.py", "test_process_target.py", "test_stomp.py")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(SLOW_FIRST)}
    items.sort(key=lambda item: rank.get(Path(str(item.fspath)).name, len(SLOW_FIRST)))
