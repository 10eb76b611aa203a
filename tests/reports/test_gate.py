"""The release gate cannot be fooled (a vanished cell, a new failure, a flaky or errored cell, an
unfinished or incomparable run, a bad manifest), with synthetic runs.

Pure logic (cell classes, the decision, run metadata, the manifest) is tested without Spark; the
end-to-end tests read synthetic run folders through the real pipeline with one shared session.
Each hole makes the gate fail (exit 1) or be inconclusive (exit 2); the same inputs passed the old
gate, which only failed on "pass became fail/error".
"""

from __future__ import annotations

import datetime
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from conformance.errors import UsageError
from reports.gate import EXIT_FAILED, EXIT_INCONCLUSIVE, EXIT_PASSED, RunCheck, check_runs, classify, judge
from reports.manifest import Known, load_manifest
from tests.conftest import conformance_cmd
from tests.reports.test_reports import rec, run_dir, spark  # noqa: F401 - spark: the module's shared session fixture

CONFIG = "RabbitMQ amqp-0-9-1 classic"


def cell(req: str, state: str, *, level: str = "MUST", version: str = "3.11.0", passes: int = 0, decided: int = 0) -> dict[str, Any]:
    """A matrix cell as reports.analysis.cells folds it ('flaky' is a failing verdict with the flag)."""
    flaky = state == "flaky"
    return {"config": CONFIG, "column": f"RabbitMQ {version} amqp-0-9-1 classic", "requirement": req, "level": level, "area": "ack",
            "verdict": "fail" if flaky else state, "flaky": flaky, "passes": passes, "decided": decided,
            "expected": f"{req} holds", "observed": f"{req} {state}", "reason": None}


def decide(was: str | None, now: str | None, *, level: str = "MUST", known: list[Known] = (), **kw: Any) -> tuple[str, int]:
    base = [cell("REQ", was, level=level, version="3.10.8")] if was else []
    cur = [cell("REQ", now, level=level, passes=3, decided=4)] if now else []
    rows = classify(base, cur, list(known), **kw)
    assert len(rows) == 1
    return rows[0]["class"], judge(rows, cur, list(known))["exit_code"]


@pytest.mark.parametrize("was, now, cls, code", [
    ("pass", None, "vanished", EXIT_FAILED),  # --area ack only: every other cell vanishes
    ("pass", "unsupported", "newly unsupported", EXIT_FAILED),  # a profile edit or a dropped feature
    ("pass", "undocumented", "newly undocumented", EXIT_FAILED),
    ("pass", "deviation", "newly deviation", EXIT_FAILED),
    (None, "fail", "new-and-failing", EXIT_FAILED),  # a requirement new in the catalogue fails
    ("pass", "error", "inconclusive", EXIT_INCONCLUSIVE),  # the infrastructure broke: not a broker regression
    (None, "error", "inconclusive", EXIT_INCONCLUSIVE),
    ("pass", "flaky", "flaky", EXIT_FAILED),  # failed in one attempt of four: never a pass
    ("pass", "fail", "regression", EXIT_FAILED),
    ("unsupported", "fail", "regression", EXIT_FAILED),
    ("fail", "pass", "fixed", EXIT_PASSED),
    ("flaky", "pass", "fixed", EXIT_PASSED),
    ("fail", "fail", "still failing", EXIT_PASSED),
    ("fail", "flaky", "still failing", EXIT_PASSED),
    ("pass", "pass", "unchanged", EXIT_PASSED),
    ("unsupported", "unsupported", "unchanged", EXIT_PASSED),
    (None, "pass", "new", EXIT_PASSED),
    ("unsupported", "pass", "changed", EXIT_PASSED),
    ("error", "pass", "changed", EXIT_PASSED),
])
def test_every_cell_gets_one_class_and_the_exit_code_follows(was: str | None, now: str | None, cls: str, code: int) -> None:
    assert decide(was, now) == (cls, code)


def test_levels_outside_the_gate_are_classified_but_never_block() -> None:
    assert decide("pass", None, level="SHOULD") == ("vanished", EXIT_PASSED)
    assert decide("pass", "fail", level="SHOULD") == ("regression", EXIT_PASSED)
    assert decide("pass", "fail", level="SHOULD", levels=("MUST", "SHOULD")) == ("regression", EXIT_FAILED)
    assert decide("pass", "flaky", level="MAY") == ("flaky", EXIT_PASSED)
    assert decide("pass", "flaky", level="MAY", fail_on_new_flaky=True) == ("flaky", EXIT_FAILED)


def test_the_manifest_names_a_blocking_cell_but_never_an_error() -> None:
    k = [Known("REQ", "RabbitMQ * classic", "dropped on purpose", "https://example.invalid/1", None)]
    assert decide("pass", None, known=k) == ("known", EXIT_PASSED)  # vanished: matched on the baseline column
    assert decide("pass", "unsupported", known=k) == ("known", EXIT_PASSED)
    assert decide("pass", "error", known=k) == ("inconclusive", EXIT_INCONCLUSIVE)


def test_precedence_unfinished_or_incomparable_runs_beat_everything_a_decided_regression_beats_an_error() -> None:
    base = [cell("A", "pass", version="3.10.8"), cell("B", "pass", version="3.10.8")]
    cur = [cell("A", "fail"), cell("B", "error")]
    rows = classify(base, cur, [])
    g = judge(rows, cur, [])
    assert (g["outcome"], g["exit_code"]) == ("FAILED", EXIT_FAILED) and "also undecided" in g["causes"][0]
    g = judge(rows, cur, [], runs=RunCheck(["current run x: status 'running'"], []))
    assert (g["outcome"], g["exit_code"]) == ("INCONCLUSIVE", EXIT_INCONCLUSIVE) and g["causes"][0].startswith("current run x")
    ok = [cell("A", "pass")]
    g = judge(classify(base[:1], ok, []), ok, [], runs=RunCheck([], ["suite version differs: baseline 0.1.0 vs current 0.2.0"]))
    assert g["exit_code"] == EXIT_INCONCLUSIVE and "suite version differs" in g["causes"][0]
    g = judge(classify(base[:1], ok, []), ok, [Known("A", "*", "r", "", datetime.date(2020, 1, 1))])
    assert g["exit_code"] == EXIT_FAILED and g["expired"]


@pytest.mark.parametrize("change, cause", [
    ({"suite_version": "0.2.0"}, "suite version differs: baseline 0.1.0 vs current 0.2.0"),
    ({"catalogue_digest": "d" * 64}, "catalogue digest differs: baseline cccccccccccc vs current dddddddddddd"),
    ({"profile": "my-broker"}, "profile my-broker of RabbitMQ amqp-0-9-1 (current): "),  # another profile, its content nowhere
    ({"catalogue_digest": None, "profile_digest": None}, "old-format run(s) without catalogue/profile digest"),
    ({"status": "running"}, "status 'running': the run was killed"),
    ({"status": "aborted: target is down"}, "status 'aborted: target is down'"),
    (None, "no run.json: how the run ended is unknown"),
])
def test_runs_that_cannot_be_compared_or_did_not_finish_are_named(tmp_path: Path, change: dict[str, Any] | None, cause: str) -> None:
    base = run_dir(tmp_path, "base", [rec("ACK-A", "pass")])
    cur = run_dir(tmp_path, "cur", [rec("ACK-A", "pass", version="3.11.0")], **(change or {}))
    if change is None:
        (Path(cur) / "run.json").unlink()
    assert check_runs([base + "/results.jsonl"], [base + "/results.jsonl"]) == RunCheck([], [])
    check = check_runs([base + "/results.jsonl"], [cur + "/results.jsonl"])
    assert any(cause in line for line in check.unfinished + check.differences), check


@pytest.mark.parametrize("text, message", [
    ("known:\n  - {requirement: A, reason: r, expires: 2027-13-45}\n", "an impossible date (month must be in 1..12)"),
    ("known:\n  - {requirement: A, reason: r, expires: tomorrow}\n", "entry 1: expires 'tomorrow' is not a date (YYYY-MM-DD)"),
    ("known:\n  - {requirement: A, reason: r, expire: 2027-01-01}\n", "entry 1: unknown key(s) expire"),
    ("known: {requirement: A, reason: r}\n", "expected a list of entries under 'known:', found dict"),
    ("known:\n  - just text\n", "entry 1 is a str, expected a mapping"),
    ("deviations:\n  - {requirement: A, reason: r}\n", "expected one top-level key 'known:'"),
    ("known:\n  - {requirement: A, reason: [x]}\n", "entry 1: reason must be text"),
    ("known: [unclosed\n", "not valid YAML"),
])
def test_a_bad_manifest_is_one_line(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "known.yaml"
    path.write_text(text)
    with pytest.raises(UsageError) as err:
        load_manifest(path)
    assert message in str(err.value) and len(str(err.value).splitlines()) == 1


def test_a_bad_manifest_is_exit_2_before_spark_starts(tmp_path: Path) -> None:
    run = run_dir(tmp_path, "r", [rec("ACK-A", "pass")])
    known = tmp_path / "known.yaml"
    known.write_text("known:\n  - {requirement: ACK-A, reason: vendor bug, expires: 2027-13-45}\n")
    proc = subprocess.run(conformance_cmd("gate", "--baseline", run, "--current", run, "--known", str(known)),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stdout == "", proc.stdout
    assert proc.stderr.strip().splitlines() == [f"conformance: error: {known}: an impossible date (month must be in 1..12); dates are YYYY-MM-DD"]


def attempts(req: str, verdicts: list[str], **kw: Any) -> list[dict[str, Any]]:
    """``conformance run --repeat N``: one record per attempt, same case and run."""
    return [rec(req, v, attempt=i, **kw) for i, v in enumerate(verdicts, 1)]


def test_gate_end_to_end_every_hole_in_one_table(spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from reports import gate_output
    from reports.gate import run_gate

    base = run_dir(tmp_path, "base", [
        rec("ACK-REGRESS", "pass"), rec("ACK-UNSUP", "pass"), rec("ACK-UNDOC", "pass"), rec("ACK-DEV", "pass"),
        rec("ACK-ERROR", "pass"), rec("ACK-FLAKY", "pass"), rec("ACK-SAME", "pass"), rec("ACK-SHOULD", "pass", level="SHOULD"),
        rec("TX-GONE", "pass", area="tx"), rec("TX-GONE", "pass", area="tx", qt="quorum"),
    ])
    v = {"version": "3.11.0"}
    cur = run_dir(tmp_path, "cur", [
        rec("ACK-REGRESS", "fail", **v), rec("ACK-UNSUP", "unsupported", **v), rec("ACK-UNDOC", "undocumented", **v),
        rec("ACK-DEV", "deviation", spec="fail", **v), rec("ACK-ERROR", "error", **v), *attempts("ACK-FLAKY", ["pass", "fail", "pass", "pass"], **v),
        rec("ACK-SAME", "pass", **v), rec("ACK-SHOULD", "fail", level="SHOULD", **v), rec("ACK-NEW", "fail", **v),
    ])
    g = run_gate([base], [cur])
    classes = {(r["requirement"], r["config"].split()[-1]): r["class"] for r in g["table"]}
    assert classes == {
        ("ACK-REGRESS", "classic"): "regression", ("ACK-UNSUP", "classic"): "newly unsupported",
        ("ACK-UNDOC", "classic"): "newly undocumented", ("ACK-DEV", "classic"): "newly deviation",
        ("ACK-ERROR", "classic"): "inconclusive", ("ACK-FLAKY", "classic"): "flaky", ("ACK-SAME", "classic"): "unchanged",
        ("ACK-SHOULD", "classic"): "regression", ("ACK-NEW", "classic"): "new-and-failing",
        ("TX-GONE", "classic"): "vanished", ("TX-GONE", "quorum"): "vanished",
    }
    assert (g["outcome"], g["exit_code"]) == ("FAILED", 1)
    blocking = {r["requirement"] for r in g["blocking"]}
    assert blocking == {"ACK-REGRESS", "ACK-UNSUP", "ACK-UNDOC", "ACK-DEV", "ACK-FLAKY", "ACK-NEW", "TX-GONE"}  # not SHOULD, not error
    flaky = next(r for r in g["table"] if r["requirement"] == "ACK-FLAKY")
    assert flaky["current_rate"] == "3/4 (75%)"

    gate_output.print_console(g)
    out = capsys.readouterr().out
    assert "1 unchanged cell(s) not shown" in out and "FLAKY ACK-FLAKY [MUST]" in out and "VANISHED TX-GONE [MUST]" in out
    assert "gate: FAILED (exit 1" in out
    md, js = gate_output.write(g, tmp_path / "gate")
    text = md.read_text()
    assert text.startswith("## Release gate: :x: FAILED (exit 1)")
    assert "| BLOCKS | flaky | `ACK-FLAKY` | MUST | RabbitMQ 3.11.0 amqp-0-9-1 classic | pass | flaky 3/4 (75%) |" in text
    assert "| UNDECIDED | inconclusive | `ACK-ERROR` |" in text and "ACK-SAME" not in text
    data = json.loads(js.read_text())
    assert data["schema"] == "conformance.gate/1" and len(data["table"]) == 11 and data["exit_code"] == 1


def test_gate_command_refuses_to_pass_on_an_unfinished_run(spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from conformance.cli import main

    base = run_dir(tmp_path, "base", [rec("ACK-A", "pass"), rec("ACK-A", "fail", run="r0")])  # r0: an earlier run into the same folder
    cur = run_dir(tmp_path, "cur", [rec("ACK-A", "pass", version="3.11.0")], status="running")
    assert main(["gate", "--baseline", base, "--current", cur, "--out", str(tmp_path / "g")]) == 2
    out = capsys.readouterr().out
    assert f"cause: current run {cur}: status 'running': the run was killed" in out and "gate: INCONCLUSIVE (exit 2" in out
    assert f"cause: baseline run {base}: holds records of run(s) r0 that its run.json (run r1) does not describe" in out
    assert ":warning: INCONCLUSIVE (exit 2)" in (tmp_path / "g" / "gate.md").read_text()


def test_report_shows_flaky_cells_with_their_rate_and_unfinished_runs(spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from conformance.cli import main

    recs = (attempts("PERSIST-X", ["pass", "fail", "pass", "pass", "fail"], area="persist")
            + attempts("ACK-A", ["pass"] * 5) + attempts("ACK-B", ["fail"] * 5)
            + [rec("ACK-V", "pass", case="v1"), rec("ACK-V", "fail", case="v2")])  # two variants, one always fails: not flaky
    killed = run_dir(tmp_path, "killed", recs, status="running")
    out = tmp_path / "report"
    assert main(["report", killed, "--out", str(out)]) == 0
    console = capsys.readouterr().out
    assert f"UNFINISHED RUN: current run {killed} did not finish: status 'running'" in console
    assert "1 flaky cell(s): PERSIST-X on RabbitMQ 3.10.8 amqp-0-9-1 classic flaky 60% (3/5)" in console
    page = (out / "report.html").read_text()
    assert 'class="banner unfinished">UNFINISHED RUN: current run' in page
    assert 'class="v flaky"' in page and "flaky 60% (3/5)" in page
    assert page.count('class="v flaky"') == 3  # the matrix cell, the flakiness table, the failing cell's detail
    md = (out / "summary.md").read_text()
    assert "> :warning: **UNFINISHED RUN**: current run" in md
    assert "- `PERSIST-X` [MUST] on RabbitMQ 3.10.8 amqp-0-9-1 classic: flaky 60% (3/5)" in md
    assert "| RabbitMQ 3.10.8 amqp-0-9-1 classic | 25% (1/4) | 2 | 1 | 0 | 0 |" in md  # ACK-B and ACK-V fail, PERSIST-X flaky
    matrix = {c["requirement"]: c for c in json.loads((out / "matrix.json").read_text())["cells"]}
    assert (matrix["PERSIST-X"]["state"], matrix["ACK-V"]["state"], matrix["ACK-A"]["state"]) == ("flaky", "fail", "pass")


def test_the_reports_baseline_diff_names_vanished_and_flaky_cells() -> None:
    from reports.analysis import compare

    base = [cell("A", "pass", version="3.10.8"), cell("GONE", "pass", version="3.10.8")]
    diff = {d["requirement"]: (d["change"], d["baseline"], d["current"]) for d in compare(base, [cell("A", "flaky", passes=3, decided=4)])}
    assert diff == {"A": ("newly failing", "pass", "flaky"), "GONE": ("vanished", "pass", None)}
