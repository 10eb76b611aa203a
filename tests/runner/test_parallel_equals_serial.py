"""A run with two workers decides every case as a serial run does (same case ids, same
verdicts), against one real private node."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from adapters.rabbitmq.launcher import RabbitMQLocalNode
from conformance.cli import EXIT_OK, build_parser, pytest_args
from conformance.runner.results import read_results
from tests.conftest import ROOT


def verdicts(node: RabbitMQLocalNode, out: Path, workers: int, area: str) -> dict[str, str]:
    ns = build_parser().parse_args(["run", "--target", "rabbitmq-local", "--out", str(out), "--area", area, "--workers", str(workers)])
    argv = pytest_args(ns, out) + ["--attach-target", json.dumps(node.handle())]
    proc = subprocess.run([sys.executable, "-m", "pytest", *argv], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == EXIT_OK, proc.stdout[-3000:] + proc.stderr[-2000:]
    recs = list(read_results(out))
    if workers > 1:
        assert len({r["worker"] for r in recs}) > 1  # really ran on several workers
    return {r["case_id"]: r["verdict"] for r in recs}


def test_two_workers_decide_the_ack_area_as_one_does(tmp_path: Path) -> None:
    node = RabbitMQLocalNode()
    node.start()
    try:
        serial = verdicts(node, tmp_path / "serial", 1, "ack")
        parallel = verdicts(node, tmp_path / "parallel", 2, "ack")
    finally:
        node.stop()
    assert len(serial) > 20 and "@" not in "".join(serial)
    assert parallel == serial
