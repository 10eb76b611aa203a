"""``conformance explain`` on a real run's results folder.

One real run of the nack area through the ``nack-multiple-cleared`` mutation (against the session's
private node, its URL with a password passed as ``--target env:...``) gives passing cases
(NACK-SINGLE-*) and failing ones (NACK-MULTIPLE-*, NACK-DISCARD[multiple]) in one node boot; an
erroring case is a record appended to that folder (a real error needs a broken broker, which costs
a run of its own). The rerun command is checked by parsing it with the CLI's own parser.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import urlsplit

import pytest

from conformance.catalogue.explain import TARGET_ENV, rerun, sections, select_records
from conformance.errors import UsageError
from tests.conftest import ROOT, conformance_cmd


@pytest.fixture(scope="module")
def nack_run(rabbit, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    out = tmp_path_factory.mktemp("explain") / "run"
    env = {**os.environ, TARGET_ENV: str(rabbit.url), "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(conformance_cmd("run", "--target", f"env:{TARGET_ENV}", "--area", "nack", "--mutation", "nack-multiple-cleared",
                                          "--out", str(out)), env=env, capture_output=True, text=True, timeout=240, cwd=ROOT)
    assert (out / "results.jsonl").is_file(), proc.stdout[-2000:] + proc.stderr[-2000:]
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    unknown_tag = next(r for r in records if "TestNackUnknownTag" in r["case_id"])
    error = {**unknown_tag, "case_id": "nack/test_basic_nack.py::TestNackUnknownTag::test[classic-synthetic]", "verdict": "error",
             "spec_verdict": None, "vendor_verdict": None, "observed": "queue.declare: no queue.declare-ok within 10s",
             "reason": "scenario did not complete", "traceback": "NoReply: queue.declare: no queue.declare-ok within 10s",
             "variant": "synthetic",
             "wire_trace": ["  1.000ms conn#1 C->S ch0   #1     connection.start-ok  response='***'",
                            "  2.000ms conn#1 C->S ch1   #3     queue.declare  queue='q'"]}
    with (out / "results.jsonl").open("a") as f:
        f.write(json.dumps(error) + "\n")
    yield out


def explain(run: Path, key: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(conformance_cmd("explain", str(run), key), capture_output=True, text=True, timeout=60, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


def test_a_failing_case_shows_requirement_verdicts_history_and_a_rerun_through_the_env(nack_run: Path, rabbit) -> None:
    proc = explain(nack_run, "NACK-MULTIPLE-REQUEUE[classic]")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    for needle in ("requirement: NACK-MULTIPLE-REQUEUE [EXTENSION]", "basic.nack(tag N, multiple=true, requeue=true)",
                   "source (vendor): RabbitMQ", "queue type: classic", "verdict: FAIL", "vendor: fail",
                   "expected: ", "exactly [m2, m3, m4] come back", "observed: ", "missing [m2, m3]",
                   "History (", "consumer   nack(4, multiple=True, requeue=True)", "MUTATED by nack-multiple-cleared"):
        assert needle in out, needle
    password = urlsplit(str(rabbit.url)).password
    assert password and password not in out + proc.stderr
    cmd = next(line.strip() for line in out.splitlines() if line.strip().startswith("conformance run "))
    assert f"--target env:{TARGET_ENV}" in cmd and "--mutation nack-multiple-cleared" in cmd and "-r NACK-MULTIPLE-REQUEUE --queue-type classic" in cmd
    assert f"export {TARGET_ENV}=" in out
    from conformance.cli import build_parser, pytest_args

    os.environ.setdefault(TARGET_ENV, str(rabbit.url))
    args = build_parser().parse_args(shlex.split(cmd)[1:])
    argv = pytest_args(args, Path(args.out))  # the rerun is a valid selection of the CLI's own
    assert ["--requirement", "NACK-MULTIPLE-REQUEUE"] == argv[argv.index("--requirement"):argv.index("--requirement") + 2]


def test_a_passing_case_and_a_whole_requirement(nack_run: Path) -> None:
    proc = explain(nack_run, "NACK-SINGLE-REQUEUE")
    assert proc.returncode == 0, proc.stderr
    from conformance.runner.results import read_results

    cells = [r for r in read_results(nack_run) if r["requirement"] == "NACK-SINGLE-REQUEUE"]
    assert len(cells) > 2  # classic, quorum and their queue configurations
    assert proc.stdout.count("verdict: PASS") == sum(r["verdict"] == "pass" for r in cells) >= 2
    assert "queue type: quorum" in proc.stdout and "History:\n  not kept" in proc.stdout


def test_an_erroring_case_shows_its_cause_traceback_and_wire_trace(nack_run: Path) -> None:
    proc = explain(nack_run, "TestNackUnknownTag::test[classic-synthetic]")
    assert proc.returncode == 0, proc.stderr
    for needle in ("verdict: ERROR", "cause: scenario did not complete", "Traceback", "NoReply: queue.declare",
                   "Wire trace (2 lines, decoded)", "queue.declare  queue='q'", "other variants on this queue type too"):
        assert needle in proc.stdout, needle


def test_an_unknown_case_is_one_line_exit_2_with_the_closest_ids(nack_run: Path) -> None:
    proc = explain(nack_run, "NACK-MULTIPL-REQUEUE")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "closest: NACK-MULTIPLE-REQUEUE" in proc.stderr
    missing = explain(nack_run.parent / "nowhere", "X")
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1


# --- pure logic on synthetic records ---------------------------------------------------------------

def _record(**kw: Any) -> dict[str, Any]:
    return {"case_id": "ack/test_x.py::TestX::test[classic]", "requirement": "ACK-UNKNOWN-TAG-406", "queue_type": "classic",
            "variant": None, "level": "MUST", "verdict": "fail", "protocol": "amqp-0-9-1", **kw}


def test_rerun_uses_the_launcher_or_the_url_as_recorded() -> None:
    launched = rerun({"target": "rabbitmq-cluster", "adapter": "pika"}, _record())
    assert launched.argv[:4] == ("conformance", "run", "--target", "rabbitmq-cluster") and "launcher" in launched.notes[0]
    plain = rerun({"target": "amqp://guest@host:5672/%2F"}, _record(queue_type=None))
    assert "amqp://guest@host:5672/%2F" in plain.argv and "--queue-type" not in plain.argv and not plain.notes


def test_explanation_lines_are_scrubbed() -> None:
    from conformance.secrets import register

    register("hunter2-secret")
    blocks = sections({"target": "rabbitmq-local"}, _record(observed="login with hunter2-secret refused"), None)
    text = "\n".join(line for s in blocks for line in s.lines)
    assert "hunter2-secret" not in text and "login with *** refused" in text


def test_select_records_forms() -> None:
    recs = [_record(), _record(case_id="ack/test_x.py::TestX::test[quorum]", queue_type="quorum")]
    assert len(select_records(recs, "ACK-UNKNOWN-TAG-406")) == 2
    assert len(select_records(recs, "ack-unknown-tag-406[quorum]")) == 1
    assert len(select_records(recs, "TestX::test[classic]")) == 1
    with pytest.raises(UsageError, match="closest"):
        select_records(recs, "ACK-UNKNOWN-TAG")


def test_the_terminal_form_boxes_sections_but_keeps_the_rerun_command_on_one_line(nack_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from conformance.catalogue.explain import explain as explain_in_process

    assert explain_in_process(nack_run, "NACK-MULTIPLE-REQUEUE[classic]", rich=True) == 0
    out = capsys.readouterr().out
    assert "╭─ Verdict" in out and "FAIL" in out
    assert any(line.startswith("conformance run --target env:") and line.endswith("--out runs/rerun-NACK-MULTIPLE-REQUEUE")
               for line in out.splitlines())
