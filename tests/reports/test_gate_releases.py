"""The gate across releases on real runs: release N+1 under another profile than release N.

- LavinMQ 1.3.1 (profile lavinmq-1) against 2.9.1 (lavinmq-2.9), the whole catalogue on each
  through its process target: the gate decides (exit 0 or 1, never "profile differs") and lists the
  profile differences with the cells each touched.
- RabbitMQ 3.10.8 against itself: the baseline judged by a user profile without the priority
  deviation (PUBLISH-PRIORITY-TWO-LEVELS fails), the current one by the shipped profile (a
  deviation): the profile, not the broker, moved the cell, so it blocks until the manifest names it.

Each pair of runs is made once per module; a broker that is absent skips with one line.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, conformance_cmd
from tests.reports.test_reports import spark  # noqa: F401 - the module's shared session fixture

pytest.importorskip("pyspark")


def _run(out: Path, *args: str, env: dict[str, str] | None = None) -> str:
    proc = subprocess.run(conformance_cmd("run", *args, "--out", str(out)), capture_output=True, text=True, timeout=600,
                          env={**os.environ, **(env or {})}, cwd=out.parent)
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-3000:]
    return str(out)


def _gate(capsys: pytest.CaptureFixture[str], baseline: str, current: str, out: Path, *extra: str) -> tuple[int, str, dict[str, Any], str]:
    from conformance.cli import main

    code = main(["gate", "--baseline", baseline, "--current", current, "--out", str(out), *extra])
    return code, capsys.readouterr().out, json.loads((out / "gate.json").read_text()), (out / "gate.md").read_text()


#: name -> the shipped process target and the build beside the checkout (docs/targets.md)
LAVINMQ = {"lavinmq-1.3.1": "process:lavinmq-1", "lavinmq-2.9.1": "process:lavinmq"}
BROKERS = ROOT.parent / "shared" / "brokers"


@pytest.fixture(scope="module")
def lavinmq(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    runs = {}
    for name, target in LAVINMQ.items():
        binary = BROKERS / name / "lavinmq"
        if not binary.is_file():
            pytest.skip(f"{name} absent: keep its build at {binary}")
        runs[name] = _run(tmp_path_factory.mktemp(name) / "run", "--target", target, env={"CONFORMANCE_LAVINMQ": str(binary)})
    return runs


def test_a_run_keeps_its_resolved_profile_and_its_digest_hashes_it(lavinmq: dict[str, str]) -> None:
    run = json.loads((Path(lavinmq["lavinmq-2.9.1"]) / "run.json").read_text())
    assert run["profile"] == "lavinmq-2.9" and run["profile_data"]["id"] == "lavinmq-2.9"
    # what the run judged by, inherited entries included (lavinmq-2.9 extends lavinmq-2.4)
    assert "delivery-limit.deliveries" in run["profile_data"]["entries"]
    text = json.dumps(run["profile_data"], sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    assert hashlib.sha256(text.encode()).hexdigest() == run["profile_digest"]  # the data the digest is of, as profiles.profile_digest hashes it


def test_lavinmq_1_3_1_to_2_9_1_decides_and_lists_the_profile_differences_with_their_cells(
        spark: Any, lavinmq: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, data, md = _gate(capsys, lavinmq["lavinmq-1.3.1"], lavinmq["lavinmq-2.9.1"], tmp_path / "gate")
    assert code in (0, 1), out
    assert not any("profile" in c for c in data["causes"]), data["causes"]
    assert "INCONCLUSIVE" not in out
    [comparison] = data["profiles"]
    assert (comparison["product"], comparison["protocol"]) == ("LavinMQ", "amqp-0-9-1")
    assert (comparison["baseline"]["profile"], comparison["current"]["profile"]) == ("lavinmq-1", "lavinmq-2.9")
    assert comparison["baseline"]["origin"].startswith("run.json of ")  # the runs kept their profiles: no fallback
    diffs = {(d["section"], d["key"]): d for d in comparison["differences"]}
    # the bug fixed in 2.4.0 (limit checked at delivery time): a documented deviation on 1.x, the reference on 2.9
    limit = diffs[("entries", "delivery-limit.deliveries")]
    assert limit["change"] == "changed" and "value" in limit["fields"]
    assert (limit["baseline"]["value"], limit["current"]["value"]) == ("limit", "limit+1")
    cells = {(c["requirement"], c["queue_type"]): c for c in limit["cells"]}
    assert cells[("LIMIT-MAX-DELIVERIES", "classic")]["baseline"] == "deviation"
    assert cells[("LIMIT-MAX-DELIVERIES", "classic")]["current"] == "pass"
    assert ("match", "versions") in diffs and diffs[("match", "versions")]["cells"] == []
    # every listed difference is on all three outputs
    assert "PROFILE LavinMQ amqp-0-9-1: baseline lavinmq-1" in out and "vs current lavinmq-2.9" in out
    assert "  changed entries delivery-limit.deliveries (reason, source, value): \"limit\" -> \"limit+1\"" in out
    assert "    touched LIMIT-MAX-DELIVERIES on LavinMQ 2.9.1 amqp-0-9-1 classic (" in out
    assert "### Profile differences: LavinMQ amqp-0-9-1: `lavinmq-1` → `lavinmq-2.9`" in md
    assert "| changed | entries | `delivery-limit.deliveries (reason, source, value)` | \"limit\" | \"limit+1\" | " in md
    # a cell the new profile excused would block; whatever it is, it is listed as excused
    assert all(r["class"] in ("excused", "known") for r in data["excused"])


RABBITMQ = Path("/usr/lib/rabbitmq/bin/rabbitmq-server")
REQUIREMENTS = ("-r", "PUBLISH-PRIORITY-TWO-LEVELS", "-r", "ACK-SINGLE-ONLY-TAG", "--queue-type", "classic")
#: The shipped RabbitMQ 3.10 profile less one entry: a release whose profile did not document
#: that queues ignore priorities unless declared with x-max-priority.
EDITED = """\
id: rabbitmq-3.10-edited
title: RabbitMQ 3.10 without the priority deviation
extends: rabbitmq-3.10
match:
  versions: ">=3.10,<3.12"
deviations:
  - requirement: PUBLISH-PRIORITY-TWO-LEVELS
    observed: priority-ignored
    remove: true
"""


@pytest.fixture(scope="module")
def rabbitmq(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    if not RABBITMQ.exists() or shutil.which("erl") is None:
        pytest.skip("RabbitMQ from the Debian package is not installed (apt-get install rabbitmq-server)")
    root = tmp_path_factory.mktemp("rabbitmq")
    (root / "edited.yaml").write_text(EDITED)
    yield {"edited": _run(root / "edited", "--target", "rabbitmq-local", "--profile", str(root / "edited.yaml"), *REQUIREMENTS),
           "shipped": _run(root / "shipped", "--target", "rabbitmq-local", *REQUIREMENTS)}


def test_a_failure_the_new_profile_excuses_blocks_until_the_manifest_names_it(
        spark: Any, rabbitmq: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, data, md = _gate(capsys, rabbitmq["edited"], rabbitmq["shipped"], tmp_path / "blocked")
    assert code == 1, out
    [row] = [r for r in data["table"] if r["requirement"] == "PUBLISH-PRIORITY-TWO-LEVELS"]
    assert (row["baseline"], row["current"], row["class"], row["blocking"]) == ("fail", "deviation", "excused", "fail")
    assert row["profile_differences"] == [
        "deviations PUBLISH-PRIORITY-TWO-LEVELS observed 'priority-ignored' (added; rabbitmq-3.10-edited -> rabbitmq-3.10)"]
    [comparison] = data["profiles"]
    [diff] = comparison["differences"]  # one entry apart: nothing else is listed
    assert (diff["section"], diff["change"], diff["baseline"]) == ("deviations", "added", None)
    assert [(c["requirement"], c["queue_type"], c["class"]) for c in diff["cells"]] == [("PUBLISH-PRIORITY-TWO-LEVELS", "classic", "excused")]
    assert "EXCUSED PUBLISH-PRIORITY-TWO-LEVELS [MUST] on RabbitMQ 3.10.8 amqp-0-9-1 classic: fail -> deviation" in out
    assert "  Profile:  deviations PUBLISH-PRIORITY-TWO-LEVELS observed 'priority-ignored' (added;" in out
    assert "    touched PUBLISH-PRIORITY-TWO-LEVELS on RabbitMQ 3.10.8 amqp-0-9-1 classic (test[classic]): fail -> deviation (excused) BLOCKS" in out
    assert "| BLOCKS | excused | `PUBLISH-PRIORITY-TWO-LEVELS` |" in md and "**BLOCKS** `PUBLISH-PRIORITY-TWO-LEVELS`" in md
    assert "gate: FAILED (exit 1" in out

    known = tmp_path / "known.yaml"
    known.write_text("known:\n  - requirement: PUBLISH-PRIORITY-TWO-LEVELS\n    target: \"RabbitMQ * amqp-0-9-1 classic\"\n"
                     "    reason: priorities need x-max-priority, documented from this release on\n"
                     "    link: https://www.rabbitmq.com/docs/3.13/priority\n")
    code, out, data, md = _gate(capsys, rabbitmq["edited"], rabbitmq["shipped"], tmp_path / "released", "--known", str(known))
    assert code == 0, out
    [row] = [r for r in data["table"] if r["requirement"] == "PUBLISH-PRIORITY-TWO-LEVELS"]
    assert (row["class"], row["change"], row["blocking"]) == ("known", "excused", None)
    assert "KNOWN PUBLISH-PRIORITY-TWO-LEVELS on RabbitMQ 3.10.8 amqp-0-9-1 classic (excused): priorities need x-max-priority" in out
    assert "gate: PASSED (exit 0" in out


def test_a_remote_run_json_reads_back_as_written(spark: Any, lavinmq: dict[str, str]) -> None:
    """Through Spark (hdfs://, s3a://: here file://) run.json is parsed as text: Spark's JSON schema
    inference would drop the profile's default entry rows (key "") and its empty mappings."""
    from reports.runs import read_local, read_remote

    path = lavinmq["lavinmq-2.9.1"] + "/results.jsonl"
    remote = read_remote(spark, "file://" + path)
    assert remote.problem is None and remote.raw == read_local(path).raw
    assert remote.raw["profile_data"]["entries"]["delivery-limit.deliveries"][""]["value"] == "limit+1"
