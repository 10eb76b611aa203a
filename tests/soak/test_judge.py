"""The per-run judgement the Spark job runs in its tasks (conformance.soak.judge), without Spark:
it parses a history as read_history does and gives run_all's verdicts; a torn or schema-breaking
history is a problem, never judged. And how ``conformance report`` tells soak runs from compliance
runs among its paths (reports.soak.split_paths)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conformance.soak import judge
from conformance.soak.checkers import CheckOptions, run_all
from conformance.soak.folders import mutate_run, synthetic_meta, write_run
from conformance.soak.history import read_history, write_history
from conformance.soak.synthetic import healthy_history


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("judge") / "history.jsonl"
    write_history(path, healthy_history(3, 3_000))
    return path


@pytest.mark.parametrize("fast", [True, False], ids=["orjson", "json"])
def test_parse_reads_what_read_history_reads(history: Path, monkeypatch: pytest.MonkeyPatch, fast: bool) -> None:
    if not fast:
        monkeypatch.setattr(judge, "_orjson", None)
    text = history.read_text()
    assert judge.parse(text) == read_history(history)
    assert judge.parse(text.replace("\n", "\n\n", 5).encode()) == read_history(history)  # blank lines skipped, bytes read
    lines = text.splitlines(keepends=True)
    with pytest.raises(ValueError, match=r"h:3: not JSON"):
        judge.parse("".join(lines[:2]) + '{"torn\n' + "".join(lines[2:]), "h")
    with pytest.raises(ValueError, match=r"h:2: not a JSON object"):
        judge.parse(lines[0] + "[1, 2]\n", "h")
    two_on_a_line = text.replace("}\n", "}", 1)
    with pytest.raises(ValueError, match=r"h:1: not JSON"):
        judge.parse(two_on_a_line, "h")


def test_judge_text_is_run_all(history: Path) -> None:
    ops = read_history(history)
    for options in (CheckOptions(), CheckOptions(ordered=True, requeue_counts=True)):
        got = judge.judge_text(history.read_text(), options)
        ref = run_all(ops, options)
        assert got["problem"] is None and got["ops"] == len(ops)
        assert {k: (v["verdict"], v["counts"], v["anomalies"], v["note"]) for k, v in got["verdicts"].items()} == \
               {k: (r.verdict, r.counts, r.counts["anomalies"], r.note) for k, r in ref.items()}


def test_a_broken_history_is_a_problem_not_a_verdict(history: Path) -> None:
    torn = judge.judge_text(history.read_text() + '{"index": 99', CheckOptions(), source="x/history.jsonl")
    assert torn["verdicts"] == {} and torn["problem"].startswith("x/history.jsonl:")
    ops = read_history(history)
    del ops[10]  # the index sequence broken: the runner's own fault, never judged as the broker's
    gap = judge.judge_text("".join(json.dumps(op) + "\n" for op in ops), CheckOptions())
    assert gap["verdicts"] == {} and "index 11, expected 10" in gap["problem"]


def test_soak_folders_are_told_from_compliance_runs(tmp_path: Path) -> None:
    from reports.soak import split_paths

    ops = healthy_history(1, 500)
    a = write_run(tmp_path / "runs" / "soak-a", ops, synthetic_meta(ops, product="X", version="1", protocol="amqp-0-9-1",
                                                                   nemesis=["cut"], seed=1))
    b = mutate_run(a, tmp_path / "runs" / "soak-b", "lose-confirmed")
    assert json.loads((b / "soak.json").read_text())["history_mutation"] == "lose-confirmed"
    (tmp_path / "runs" / "compliance").mkdir()
    (tmp_path / "runs" / "compliance" / "results.jsonl").write_text("")
    only_soak = str(tmp_path / "runs" / "soak-*")
    mixed = str(tmp_path / "runs" / "*")
    assert split_paths([str(a)]) == ([], [str(a)])
    assert split_paths([only_soak]) == ([], [str(a), str(b)])
    assert split_paths([mixed, str(a)]) == ([mixed], [str(a), str(b)])
    assert split_paths([str(tmp_path / "runs" / "compliance"), "hdfs://nn/runs/x"]) == \
           ([str(tmp_path / "runs" / "compliance"), "hdfs://nn/runs/x"], [])
