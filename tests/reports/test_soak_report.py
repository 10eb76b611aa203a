"""Soak runs on Spark (reports.soak) and in the report: the Spark job's verdicts and anomaly counts
are run_all's, on synthetic histories and on their mutated copies; the report's soak section shows
the matrix, the runs and the anomalies, escaped, with no password.

The session is test_reports' (one per module, kept across build() calls): Spark's start is the cost."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conformance.soak.checkers import run_all
from conformance.soak.folders import mutate_run, synthetic_meta, write_run
from conformance.soak.history import read_history, write_history
from conformance.soak.judge import options_of
from conformance.soak.mutations import MUTATIONS
from conformance.soak.synthetic import healthy_history
from tests.reports import test_reports
from tests.reports.test_reports import rec, run_dir

pytest.importorskip("pyspark")
spark = test_reports.spark  # the report tests' session fixture: one Spark session for the module


def _runs(root: Path) -> list[Path]:
    """Healthy runs of two brokers and two nemeses (one judged ordered, with requeue counts), each
    mutation applied to one of them, and a run whose history breaks its schema."""
    folders = []
    for i, (product, nemesis, extra) in enumerate([("RabbitMQ", "cut", {}), ("RabbitMQ", "kill", {}),
                                                   ("LavinMQ", "cut", {"ordered": True, "requeue_counts": True})]):
        ops = healthy_history(i, 2_500)
        meta = synthetic_meta(ops, product=product, version="1.0", protocol="amqp-0-9-1", nemesis=[nemesis], seed=i, **extra)
        folders.append(write_run(root / f"run-{i}", ops, meta))
    for j, name in enumerate(MUTATIONS):
        folders.append(mutate_run(folders[j], root / f"mutated-{name}", name, seed=j))
    broken = write_run(root / "broken", [], synthetic_meta([], product="RabbitMQ", version="1.0", protocol="amqp-0-9-1",
                                                          nemesis=["cut"], seed=9))
    ops = read_history(folders[0] / "history.jsonl")
    write_history(broken / "history.jsonl", ops[:5] + ops[6:50])
    damaged = write_run(root / "damaged", ops, {})
    (damaged / "soak.json").write_text('{"product": "RabbitMQ", "opt')   # torn: what ran is unknown
    missing = write_run(root / "no-history", ops, json.loads((folders[0] / "soak.json").read_text()))
    (missing / "history.jsonl").unlink()
    return [*folders, broken, damaged, missing]


def test_the_spark_job_gives_run_alls_verdicts_and_counts(spark: Any, tmp_path: Path) -> None:
    from reports.soak import check_runs, matrix

    folders = _runs(tmp_path)
    runs = {Path(r["folder"]).name: r for r in check_runs(spark, [str(f) for f in folders])}
    assert len(runs) == len(folders)
    for f in folders[:-3]:
        r = runs[f.name]
        ref = run_all(read_history(f / "history.jsonl"), options_of(json.loads((f / "soak.json").read_text())))
        assert r["problem"] is None and r["ops"] == sum(1 for _ in (f / "history.jsonl").open())
        assert list(r["verdicts"]) == list(ref)
        for name, res in ref.items():
            got = r["verdicts"][name]
            assert (got["verdict"], got["counts"], got["anomalies"], got["note"]) == (res.verdict, res.counts, res.counts["anomalies"], res.note), \
                f"{f.name} {name}: Expected {res.verdict} {res.counts}; Actual {got['verdict']} {got['counts']}"
            assert got["listed"] == [a.to_dict() for a in res.anomalies[:5]]
    assert runs["run-2"]["verdicts"]["order"]["verdict"] == "pass"  # judged ordered: its own options, not the default
    for name, (_, checker, kind) in MUTATIONS.items():
        r = runs[f"mutated-{name}"]
        assert r["verdict"] == "fail" and r["verdicts"][checker]["counts"][kind] >= 1 and r["mutation"] == name
    assert runs["broken"]["verdict"] == "broken" and "index 6, expected 5" in runs["broken"]["problem"]
    assert runs["damaged"]["verdict"] == "broken" and "soak.json unreadable" in runs["damaged"]["problem"]
    assert runs["no-history"]["verdict"] == "broken" and "no history.jsonl read" in runs["no-history"]["problem"]

    m = matrix([r for name, r in runs.items() if name not in ("damaged", "no-history")])
    cells = {(c["broker"], c["nemesis"]): c for c in m["cells"]}
    assert m["left_out_mutated"] == len(MUTATIONS)
    assert cells[("RabbitMQ 1.0 · AMQP 0-9-1", "cut")] | {"by_checker": None} == {
        "broker": "RabbitMQ 1.0 · AMQP 0-9-1", "nemesis": "cut", "runs": 2, "failed": 0, "broken": 1, "ops": runs["run-0"]["ops"],
        "anomalies": 0, "rate_per_million": 0.0, "by_checker": None}
    assert set(m["nemeses"]) == {"cut", "kill"} and len(m["brokers"]) == 2


def test_the_report_shows_soak_runs_escaped_and_without_secrets(spark: Any, tmp_path: Path) -> None:
    from reports.report import build

    ops = healthy_history(5, 2_000)
    meta = synthetic_meta(ops, product="<script>alert(1)</script>", version="2.9.1", protocol="amqp-0-9-1", nemesis=["kill", "pause"],
                          seed=5, queue_type="classic")
    meta["target"] = "amqp://soaker:s3cr3t-pw@127.0.0.1:5672/%2F"  # an older run's soak.json, unredacted
    runs = tmp_path / "runs"
    healthy = write_run(runs / "soak-lavinmq", ops, meta)
    failing = mutate_run(healthy, runs / "soak-lost", "lose-confirmed")
    run_dir(runs, "compliance", [rec("ACK-A", "pass")])
    out = tmp_path / "report"
    result = build([str(runs / "*")], out)  # one glob: the compliance run and both soak runs, each read its own way

    assert result["summary"]["records"] == 1 and result["soak"]["totals"]["runs"] == 2
    page = (out / "report.html").read_text()
    for name in ("report.html", "summary.md", "matrix.json"):
        assert "s3cr3t-pw" not in (out / name).read_text(), name
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    section = page[page.index('<h2 id="soak">'):page.index('<h2 id="areas">')]
    assert 'id="soak-matrix"' in section and "nemesis: kill,pause" in section and "0 per M ops" in section
    assert "self-check: history mutated (lose-confirmed)" in section and "<b>queue: lost</b> Expected:" in section
    assert 'href="../runs/soak-lost/history.jsonl"' in section and str(failing) in section
    assert "compliance-matrix" in page  # the compliance part is there too
    md = (out / "summary.md").read_text()
    assert "**Soak runs:** 2 run(s)" in md and "self-check fail" in md

    only = build([str(failing)], tmp_path / "only-soak")
    page = (tmp_path / "only-soak" / "report.html").read_text()
    assert only["soak"]["totals"]["failed"] == 1 and 'id="soak-matrix"' not in page  # a mutated run is in no matrix cell
    assert 'id="soak-runs"' in page and "compliance-matrix" not in page and "Spec rule coverage" not in page


def test_a_run_made_wrong_on_the_wire_is_a_self_check_too(tmp_path: Path) -> None:
    """``conformance soak --mutation`` records the operator in soak.json: like an edited history, the
    run says nothing about the broker and stays out of the matrix."""
    from reports.soak import matrix, run_info

    ops = healthy_history(3, 200)
    meta = synthetic_meta(ops, product="RabbitMQ", version="3.10.8", protocol="amqp-0-9-1", nemesis=["cut"], seed=3, queue_type="quorum")
    meta["mutation"] = {"name": "confirmed-lost", "operator": "confirmed-publish-lost-1-in:1000", "expected_checker": "queue"}
    info = run_info(str(write_run(tmp_path / "wire", ops, meta)))
    assert (info["mutation"], info["mutation_where"]) == ("confirmed-lost", "wire")
    judged = {**info, "broker": "RabbitMQ 3.10.8", "verdict": "fail", "ops": len(ops), "anomalies": 1, "verdicts": {}}
    assert matrix([judged])["left_out_mutated"] == 1 and matrix([judged])["cells"] == []


def test_the_runs_documented_deviation_holds_when_the_same_anomalies_are_judged_again() -> None:
    from reports.soak import _documented

    judged = {"verdict": "fail", "anomalies": 3, "counts": {}}
    doc = {"anomalies": 3, "verdict": "deviation", "undocumented": 0, "entries": [{"requirement": "PERSIST-X", "as": "deviation"}]}
    assert _documented(judged, doc)["verdict"] == "deviation"
    assert _documented(judged, {**doc, "anomalies": 2})["verdict"] == "fail"  # other anomalies: judged here, not excused
    assert _documented(judged, None) is judged
