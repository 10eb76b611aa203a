"""``--out``: an unusable folder is one line and exit 2; a folder reused by a second run starts fresh
and keeps the previous run's files in ``previous/<start>-<run id>/``."""

from __future__ import annotations

import subprocess
from pathlib import Path

from adapters.rabbitmq.launcher import RabbitMQLocalNode
from conformance.cli import EXIT_OK, EXIT_USAGE
from conformance.runner.results import read_results, read_run
from tests.conftest import ROOT, conformance_cmd


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(conformance_cmd(*args), cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_an_unusable_out_folder_is_one_line_and_exit_2(tmp_path: Path) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    for out in ("/proc/x/y", str(a_file), str(a_file / "below")):
        proc = run_cli("run", "--out", out, "-r", "ACK-UNKNOWN-TAG-406")
        assert proc.returncode == EXIT_USAGE, (out, proc.returncode, proc.stderr)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("conformance: error: --out ") and out in lines[0], proc.stderr
        assert "Traceback" not in proc.stdout + proc.stderr


def test_a_second_run_into_the_same_folder_starts_fresh_and_keeps_the_first(rabbit: RabbitMQLocalNode, tmp_path: Path) -> None:
    out = tmp_path / "latest"
    first = run_cli("run", "--target", rabbit.url, "--out", str(out), "-r", "ACK-UNKNOWN-TAG-406")
    assert first.returncode == EXIT_OK, first.stdout[-2000:] + first.stderr[-2000:]
    assert "previous run" not in first.stdout
    first_run, first_records = read_run(out), list(read_results(out))
    (out / "NOTES.md").write_text("the user's own file, not the run's")
    second = run_cli("run", "--target", rabbit.url, "--out", str(out), "-r", "ACK-UNKNOWN-TAG-406")
    assert second.returncode == EXIT_OK, second.stdout[-2000:] + second.stderr[-2000:]
    kept = list((out / "previous").iterdir())
    assert len(kept) == 1 and kept[0].name.endswith(f"-{first_run['run_id']}"), kept
    said = [line for line in second.stdout.splitlines() if "previous run" in line]
    assert said == [f"{out} held a previous run: moved to {kept[0]}; this run starts fresh"], second.stdout[-2000:]
    # the folder holds the second run alone; the first one, whole, is a run folder of its own
    run, records = read_run(out), list(read_results(out))
    assert run["run_id"] != first_run["run_id"] and run["status"] == "finished"
    assert {r["run_id"] for r in records} == {run["run_id"]} and len(records) == len(first_records)
    assert read_run(kept[0]) == first_run and list(read_results(kept[0])) == first_records
    assert {p.name for p in kept[0].iterdir()} >= {"run.json", "results.jsonl", "junit.xml", "allure-results", "pytest.log"}
    # only the run's own outputs move: a file of the user's stays where it was
    assert (out / "NOTES.md").read_text() == "the user's own file, not the run's" and not (kept[0] / "NOTES.md").exists()
