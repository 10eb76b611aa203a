"""The AMQP 1.0 catalogue on the container brokers (ActiveMQ Artemis, Qpid Broker-J), the way a
user runs it: ``conformance run --target <name> --adapter proton`` starts the image pinned in
docker/<name>/ through testcontainers. Where no Docker engine answers, the run refuses in one line
(exit 2) and the test skips with that line; where one does, every cell gets a verdict: no error,
no unsupported without its kind, and each fail names its requirement with expected vs. observed."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from conformance.runner.results import read_results
from tests.conftest import conformance_cmd

TARGETS = ("activemq-artemis", "qpid-broker-j")
UNSUPPORTED_KINDS = ("cannot-express", "refused", "no-fault")


@pytest.mark.parametrize("target", TARGETS)
def test_the_amqp10_catalogue_on_a_container_broker(target: str, tmp_path: Path) -> None:
    out = tmp_path / "run"
    out.mkdir()
    proc = subprocess.run(conformance_cmd("run", "--target", target, "--adapter", "proton", "--out", str(out)),
                          capture_output=True, text=True, timeout=900, cwd=tmp_path)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    if proc.returncode == 2 and lines and "needs a Docker engine" in lines[-1]:
        assert len(lines) == 1, proc.stderr  # one line, no traceback
        pytest.skip(lines[-1])
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-3000:]
    records = list(read_results(out))
    assert records and all(r["protocol"] == "amqp-1.0" for r in records)
    assert [r["case_id"] for r in records if r["verdict"] == "error"] == []
    assert [r["case_id"] for r in records if r["verdict"] == "unsupported" and r.get("unsupported_kind") not in UNSUPPORTED_KINDS] == []
    assert all(r["expected"] and r["observed"] for r in records if r["verdict"] == "fail")
