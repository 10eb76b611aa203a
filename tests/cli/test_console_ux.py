"""What a person sees: the run's console in a real terminal, a case page in a real browser.

The terminal test starts ``conformance run`` in a detached tmux session of a fixed size against the
session's private node, through the ``nack-multiple-cleared`` mutation (real failing cases), with
the node's URL reaching the command only as ``--target env:NAME`` (set in tmux's environment, never
typed on the pane). It captures the pane while the run goes on (the live bar) and after it ended
(the failing-case blocks, no runner traceback, no password).

The browser test builds a report from synthetic records (the report tests' helpers) with a failing
case that kept its history and wire trace, and screenshots that cell's page in headless Chromium.
The progress logic itself is tested on synthetic records, without a terminal.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Iterator
from urllib.parse import urlsplit

import pytest

from conformance.runner.progress import Console, ResultsTail, RunProgress, StepProgress, case_block, clock, counts_text, eta_s
from tests.conftest import ROOT
from tests.reports.test_reports import rec, run_dir

TARGET_ENV = "CONFORMANCE_UX_TARGET"
#: The pane's size: wide enough that the bar's line is not wrapped, fixed so captures compare.
COLS, ROWS = 150, 45


def _wait_for(what: str, probe: Callable[[], str | None], deadline_s: float) -> str:
    """Poll ``probe`` until it returns text or the deadline passes (the condition, never a fixed sleep)."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        got = probe()
        if got is not None:
            return got
        time.sleep(0.05)
    raise AssertionError(f"no {what} within {deadline_s:.0f}s")


@pytest.fixture(scope="module")
def tty_run(rabbit: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """One real run in a real terminal: the pane during the run and its whole scrollback after."""
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed")
    out = tmp_path_factory.mktemp("tty") / "run"
    session = f"conformance-ux-{uuid.uuid4().hex[:8]}"
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", str(COLS), "-y", str(ROWS),
                    "-e", f"{TARGET_ENV}={rabbit.url}", "-e", f"PYTHONPATH={ROOT}", "-c", str(ROOT),
                    "bash", "--norc", "--noprofile"], check=True, timeout=20)
    try:
        subprocess.run(["tmux", "set-option", "-t", session, "history-limit", "5000"], check=True, timeout=10)
        cmd = (f"python3 -m conformance.cli run --target env:{TARGET_ENV} --area nack --mutation nack-multiple-cleared "
               f"--out {out}; echo RUN-ENDED-$?")
        subprocess.run(["tmux", "send-keys", "-t", session, cmd, "Enter"], check=True, timeout=10)

        def pane(history: bool = False) -> str:
            args = ["tmux", "capture-pane", "-p", "-J", "-t", session] + (["-S", "-5000"] if history else [])
            return subprocess.run(args, capture_output=True, text=True, check=True, timeout=10).stdout

        during = _wait_for("progress bar", lambda: (lambda p: p if re.search(r"\d+/\d+ cases", p) else None)(pane()), 120)
        after = _wait_for("end of the run", lambda: (lambda p: p if re.search(r"^RUN-ENDED-\d+\s*$", p, re.M) else None)(pane(True)), 180)
        yield {"during": during, "after": after, "out": out, "password": urlsplit(str(rabbit.url)).password}
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], timeout=10)


def test_the_terminal_shows_a_live_bar_then_failing_cases_in_the_suites_words(tty_run: dict[str, Any]) -> None:
    during, after = tty_run["during"], tty_run["after"]
    bar = next(line for line in during.splitlines() if re.search(r"\d+/\d+ cases", line))
    assert bar.lstrip().startswith("conformance run") and "elapsed" in bar and ("left" in bar or "estimating" in bar), bar
    assert re.search(r"now: nack · Test\w+::test\[", during) or "pass " in during or "fail " in during, during
    # the failing case's block, as decided: requirement, level, Expected / Actual, where the trace is
    assert "FAIL NACK-MULTIPLE-REQUEUE [EXTENSION] classic" in after, after[-3000:]
    block = after.split("FAIL NACK-MULTIPLE-REQUEUE [EXTENSION] classic", 1)[1]
    assert re.search(r"Expected: .*exactly \[m2, m3, m4\] come back", " ".join(block.split()))
    assert re.search(r"Actual: .*missing \[m2, m3\]", " ".join(block.split()))
    assert "conformance explain" in block and "results.jsonl" in block
    assert re.search(r"^RUN-ENDED-0\s*$", after, re.M)  # EXTENSION failures only: no MUST failed
    # pytest's own console is gone: no tracebacks of the runner, no dots or percentages
    for noise in ("Traceback", "run_case", "pytest_plugin/", "case_runner.py", "[100%]", "short test summary", "passed in"):
        assert noise not in after, noise
    assert tty_run["password"] and tty_run["password"] not in during + after
    records = [json.loads(line) for line in (tty_run["out"] / "results.jsonl").read_text().splitlines()]
    assert sum(r["verdict"] == "fail" for r in records) == sum(1 for line in after.splitlines() if line.startswith("FAIL "))


# --- the progress logic on synthetic records (no terminal) -------------------------------------------

def _record(verdict: str, n: int, **kw: Any) -> dict[str, Any]:
    return {"case_id": f"ack/test_x.py::TestX::test[classic-{n}]", "requirement": "ACK-X", "level": "MUST", "verdict": verdict,
            "queue_type": "classic", "expected": "exactly [m1] come back", "observed": "came back []", **kw}


def test_plain_form_is_one_line_per_decided_case_and_a_block_per_failure(tmp_path: Path) -> None:
    stream = io.StringIO()
    progress = RunProgress(Console(stream, live=False), tmp_path, debug=False)
    progress.begin()
    progress.start(3)
    results = tmp_path / "results.jsonl"
    results.write_text(json.dumps(_record("pass", 1)) + "\n" + json.dumps(_record("fail", 2, reason="mutation", traceback="Trace!"))
                       + "\n" + '{"half": ')  # a line the worker has not finished writing
    progress.case_finished("ack/test_x.py::TestX::test[classic-2]")
    text = stream.getvalue()
    assert "3 cases selected" in text
    assert re.search(r"^PASS +ack/test_x.py::TestX::test\[classic-1\]  ACK-X \[MUST\]$", text, re.M)
    assert "FAIL ACK-X [MUST] classic  ack/test_x.py::TestX::test[classic-2]\n  Expected: exactly [m1] come back\n  Actual:   came back []" in text
    assert "  Cause:    mutation" in text and f"conformance explain {tmp_path}" in text and "Trace!" not in text
    assert progress.status()["done"] == 2 and progress.status()["counts"] == Counter({"pass": 1, "fail": 1})
    with results.open("a") as f:
        f.write('"x"}\n')  # the half line completed: now a whole record (not a case): counted once, never twice
    assert progress._tail is not None and progress._tail.read() == [{"half": "x"}]


def test_debug_brings_the_suites_traceback_into_the_block_and_secrets_never_show(tmp_path: Path) -> None:
    from conformance.secrets import register

    register("pw-in-block-77")
    lines = case_block(_record("error", 1, observed="login pw-in-block-77 refused", traceback="NoReply: x\n  at y"), tmp_path, debug=True)
    assert "pw-in-block-77" not in "\n".join(lines) and any("NoReply: x" in line for line in lines)
    assert not any("NoReply" in line for line in case_block(_record("error", 1, traceback="NoReply: x"), tmp_path))


def test_estimate_and_counts() -> None:
    assert eta_s(0, 10, 5.0) is None and eta_s(5, 10, 10.0) == 10.0 and eta_s(10, 10, 3.0) == 0.0
    assert clock(None) == "-:--" and clock(75) == "1:15" and clock(3725) == "1:02:05"
    assert counts_text(Counter({"fail": 2, "pass": 7})) == "pass 7  fail 2"


def test_the_tail_starts_where_the_file_ended(tmp_path: Path) -> None:
    """A results folder reused by a second run: its earlier records are not this run's progress."""
    f = tmp_path / "results.jsonl"
    f.write_text(json.dumps(_record("pass", 1)) + "\n")
    tail = ResultsTail(f)
    assert tail.read() == []
    with f.open("a") as fh:
        fh.write(json.dumps(_record("fail", 2)) + "\n")
    assert [r["verdict"] for r in tail.read()] == ["fail"]


# --- a case page in a real browser -------------------------------------------------------------------

def test_a_matrix_cell_page_in_headless_chromium(tmp_path: Path) -> None:
    from reports.case_pages import page_path
    from reports.report import build
    from reports.session import spark_session

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    history = [{"t_ms": 1.5, "actor": "consumer", "op": "nack", "detail": "4, multiple=True, requeue=True"},
               {"t_ms": 9.0, "actor": "consumer", "op": "deliver", "detail": "m4 redelivered=True"}]
    trace = ["  1.000ms conn#1 C->S ch1   #7     basic.nack  delivery_tag=4 multiple=True requeue=True <b>"]
    failing = rec("NACK-MULTIPLE-REQUEUE", "fail", level="EXTENSION", area="nack", case="nack/test_basic_nack.py::TestNackMultipleRequeue::test[classic]",
                  expected="exactly [m2, m3, m4] come back", observed="came back [m4] (missing [m2, m3])", finished_at=2.0, attempt=2,
                  history=history, wire_trace=trace)
    older = {**failing, "verdict": "pass", "spec_verdict": "pass", "vendor_verdict": "pass", "observed": "as expected", "attempt": 1,
             "finished_at": 1.0, "history": None, "wire_trace": None}
    a = run_dir(tmp_path, "run", [older, failing, rec("ACK-GET-EMPTY", "pass", qt=None)])
    os.environ["CONFORMANCE_KEEP_SPARK"] = "1"
    spark = spark_session("local[1]")
    try:
        result = build([a], tmp_path / "report")
    finally:
        os.environ.pop("CONFORMANCE_KEEP_SPARK", None)
        spark.stop()
    cell = next(c for c in result["cells"] if c["requirement"] == "NACK-MULTIPLE-REQUEUE")
    page_file = tmp_path / "report" / page_path(cell)
    report = (tmp_path / "report" / "report.html").read_text()
    assert f'href="{page_path(cell)}"' in report  # the matrix cell links to it
    assert len(list((tmp_path / "report" / "cases").glob("*.html"))) == len(result["cells"]) == 2
    page = page_file.read_text()
    for needle in ("NACK-MULTIPLE-REQUEUE [EXTENSION] on RabbitMQ 3.10.8 · AMQP 0-9-1, classic queue",
                   "basic.nack(tag N, multiple=true, requeue=true)",  # the requirement's text, from the catalogue
                   "source (vendor): RabbitMQ", "verdict: FAIL", "expected: exactly [m2, m3, m4] come back",
                   "observed: came back [m4] (missing [m2, m3])", "2 attempt(s): fail 1, pass 1", "(attempt 2)",
                   "History (2 operations)", "consumer   nack(4, multiple=True, requeue=True)", "Wire trace (1 lines, decoded)",
                   "basic.nack  delivery_tag=4", "&lt;b&gt;", "Rerun exactly this case", "../report.html#matrix"):
        assert needle in page, needle
    assert "http" not in page.split("<body>")[0]  # offline: nothing loaded from a network
    if chromium is None:
        pytest.skip("chromium is not installed (scripts/install.sh installs it)")
    png = tmp_path / "case.png"
    subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                    "--disable-sync", "--no-first-run", f"--user-data-dir={tmp_path / 'chromium-profile'}", f"--screenshot={png}",
                    "--window-size=1200,900", "--hide-scrollbars", page_file.as_uri()], capture_output=True, timeout=120)
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000  # a blank page compresses to far less


def test_step_progress_shows_done_total_the_steps_going_on_and_the_kills(tmp_path: Path) -> None:
    """The self-test's and the report's bar, rendered as the terminal would show it."""
    from rich.console import Console as RichConsole

    stream = io.StringIO()
    progress = StepProgress("selftest: mutation runs", Console(stream, live=False))
    progress.begin("clean run through the probing proxy")
    progress.finish("clean run through the probing proxy", count=False)
    progress.plan(3)
    progress.begin("requeue-cleared")
    progress.begin("nack-multiple-cleared")
    progress.finish("requeue-cleared", line="  [ 1/3] requeue-cleared: 12 cases (fail=8 pass=4)", note="kills so far: 8")
    screen = RichConsole(file=io.StringIO(), width=140, force_terminal=False)
    screen.print(progress.render())
    text = screen.file.getvalue()  # type: ignore[attr-defined]
    assert "selftest: mutation runs" in text and "1/3" in text and "kills so far: 8" in text and "left" in text
    assert "now: nack-multiple-cleared" in text and "requeue-cleared" not in text.split("now:")[1]
    assert stream.getvalue() == "  [ 1/3] requeue-cleared: 12 cases (fail=8 pass=4)\n"  # off a terminal: the plain lines only
