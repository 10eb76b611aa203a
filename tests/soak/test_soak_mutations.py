"""The soak can fail: each soak mutation (conformance.soak.wire_mutations) makes the session's
private RabbitMQ node wrong on the wire, a short real soak's checker catches it, ``--shrink``
reduces the run, and the printed replay fails the same checker again. A soak without a mutation,
under the same options, passes (no false alarm)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from conformance.cli import main


def soak(url: str, out: Path, *args: str) -> tuple[int, dict[str, Any]]:
    code = main(["soak", "--target", url, *args, "--out", str(out)])
    return code, json.loads((out / "soak.json").read_text())


def caught(record: dict[str, Any], checker: str, anomaly: str) -> dict[str, Any]:
    """The checker failed with an anomaly of that kind that cites ops of the history."""
    assert record["verdicts"][checker]["verdict"] == "fail", record["verdicts"]
    found = [a for a in record["anomalies"] if a["checker"] == checker and a["kind"] == anomaly]
    assert found, f"no {anomaly} anomaly of {checker}: {record['anomalies'][:3]}"
    assert found[0]["ops"] and all(isinstance(i, int) and 0 <= i < record["stats"]["ops"] for i in found[0]["ops"])
    return found[0]


def shrunk_and_replayed(url: str, out: Path, checker: str) -> dict[str, Any]:
    shrink = json.loads((out / "shrink.json").read_text())
    assert shrink["checker"] == checker
    assert shrink["command"].startswith("conformance soak --target ") and url not in shrink["command"]  # the password redacted
    assert len(shrink["runs"]) <= shrink["bound"]["max_runs"]
    args = shrink["args"]
    assert args[args.index("--ops") + 1] == str(shrink["best"]["ops"])
    code, replay = soak(url, out / "replay", *args)
    assert code == 1, replay["verdicts"]
    assert replay["verdicts"][checker]["verdict"] == "fail", replay["verdicts"]
    assert replay["mutation"]["name"] == shrink["mutation"]["name"]
    return shrink


def test_confirmed_lost_one_in_a_thousand(rabbit: Any, tmp_path: Path) -> None:
    """At its default rate (one in 1,000 confirm-mode publishes, at a seeded position), within 1,000 publishes."""
    url = str.__str__(rabbit.url)
    out = tmp_path / "lost"
    code, record = soak(url, out, "--ops", "1000", "--modes", "confirm", "--seed", "4", "--mutation", "confirmed-lost",
                        "--shrink", "--shrink-runs", "5")
    assert code == 1
    assert record["mutation"]["name"] == "confirmed-lost" and record["mutation"]["rewritten"] == 1
    assert "not the broker" in record["mutation"]["about"]
    a = caught(record, "queue", "lost")
    assert "confirmed" in a["text"]
    assert record["verdicts"]["queue"]["counts"]["lost"] == 1
    shrink = shrunk_and_replayed(url, out, "queue")
    assert shrink["best"]["ops"] < 1000 and shrink["verified"]


def test_duplicate_after_failover(rabbit: Any, tmp_path: Path) -> None:
    url = str.__str__(rabbit.url)
    schedule = tmp_path / "cuts.yaml"
    schedule.write_text("- {at_s: 0.8, kind: cut}\n- {at_s: 1.6, kind: cut}\n- {at_s: 2.4, kind: cut}\n")
    out = tmp_path / "dup"
    code, record = soak(url, out, "--ops", "1200", "--seed", "6", "--schedule", str(schedule), "--mutation", "duplicate-after-failover",
                        "--shrink", "--shrink-runs", "5")
    assert code == 1
    assert record["stats"]["faults_fired"]
    a = caught(record, "queue", "duplicate-after-ack")
    assert "delivered again" in a["text"]
    shrink = shrunk_and_replayed(url, out, "queue")
    assert len(shrink["best"]["schedule"]) == 1
    assert len(shrink["start"]["schedule"]) > 1 or shrink["best"]["ops"] < 1200, shrink["runs"]


def test_tx_publish_dropped(rabbit: Any, tmp_path: Path) -> None:
    url = str.__str__(rabbit.url)
    out = tmp_path / "tx"
    code, record = soak(url, out, "--ops", "400", "--seed", "2", "--mutation", "tx-publish-dropped", "--shrink", "--shrink-runs", "5")
    assert code == 1
    a = caught(record, "tx", "partial-commit")
    assert "commit ok" in a["text"]
    shrink = shrunk_and_replayed(url, out, "tx")
    assert shrink["best"]["ops"] < 400


def test_no_false_alarm_without_a_mutation(rabbit: Any, tmp_path: Path) -> None:
    """The same workloads, cuts included, with the proxy relaying unchanged: every checker passes."""
    url = str.__str__(rabbit.url)
    schedule = tmp_path / "cuts.yaml"
    schedule.write_text("- {at_s: 1.0, kind: cut}\n")
    code, record = soak(url, tmp_path / "clean", "--ops", "1500", "--seed", "6", "--schedule", str(schedule), "--shrink")
    assert "mutation" not in record
    assert code == 0, record["verdicts"]
    assert not (tmp_path / "clean" / "shrink.json").exists()
    code, record = soak(url, tmp_path / "clean-confirm", "--ops", "1000", "--modes", "confirm", "--seed", "4")
    assert code == 0 and record["verdicts"]["queue"]["counts"]["confirmed_delivered"] == 1000, record["verdicts"]


def test_mutation_usage_errors_exit_2(tmp_path: Path) -> None:
    """Refused before anything runs: an unknown mutation, one the workload or schedule gives nothing to act on."""
    url = "amqp://127.0.0.1:1/"
    assert main(["soak", "--target", url, "--mutation", "meteor", "--out", str(tmp_path / "a")]) == 2
    assert main(["soak", "--target", url, "--mutation", "duplicate-after-failover", "--out", str(tmp_path / "b")]) == 2
    assert main(["soak", "--target", url, "--mutation", "confirmed-lost", "--modes", "tx", "--out", str(tmp_path / "c")]) == 2
    assert main(["soak", "--target", url, "--mutation", "confirmed-lost:0", "--out", str(tmp_path / "d")]) == 2
    assert main(["soak", "--target", url, "--mutation", "duplicate-after-failover:3", "--nemesis", "cut", "--out", str(tmp_path / "e")]) == 2
