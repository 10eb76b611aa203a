"""The report on a real Spark cluster: a standalone master and worker, and a Spark Connect server,
all started from the installed pyspark package on loopback (reports/local_cluster.py), must produce
the same report as local mode from the same runs.

Why a separate file: these JVMs take tens of seconds to start on a loaded machine, so they are
started once for the module; every process dies with the module (a supervisor watchdog, also on a
crash). The report is run through the CLI in a child process, as a user runs it: a SparkSession
already alive in the test process would otherwise be reused whatever master was asked for.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests.conftest import ROOT, conformance_cmd

pytest.importorskip("pyspark")
#: Three JVMs start here (master, worker, Connect server) and three reports run in child JVMs; on a
#: 2-core machine shared with other test runs that is minutes, not the default 300 s per test.
pytestmark = pytest.mark.timeout(900)

from reports.local_cluster import ClusterError, LocalSpark, connect_jar  # noqa: E402


def _generate(root: Path, records: int) -> None:
    spec = importlib.util.spec_from_file_location("bench_report_pipeline", ROOT / "bench" / "report_pipeline.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.generate(root, records)


def _report(runs: Path, out: Path, master: str) -> dict[str, Any]:
    """``conformance report`` in a child process on ``master``; the matrix.json it wrote, with the
    figures that depend on float summation order rounded (a sum over other partitions differs in
    the last bits, which is not a different report)."""
    proc = subprocess.run(conformance_cmd("report", str(runs / "*"), "--out", str(out), "--spark-master", master),
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, f"report on {master} exited {proc.returncode}: {proc.stderr[-2000:]}"
    assert list((out / "matrix.parquet").glob("*.parquet")) and list((out / "matrix.csv").glob("*.csv"))
    assert (out / "report.html").stat().st_size > 0

    def norm(v: Any) -> Any:
        if isinstance(v, float):
            return round(v, 9)
        if isinstance(v, dict):
            return {k: norm(x) for k, x in v.items()}
        if isinstance(v, list):
            return [norm(x) for x in v]
        return v

    return norm(json.loads((out / "matrix.json").read_text()))


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Synthetic runs of the real schema: 13 targets, flaky cells, failures with traces, one cut line per run."""
    root = tmp_path_factory.mktemp("cluster-runs")
    _generate(root, 2_000)
    return root


@pytest.fixture(scope="module")
def local_report(runs: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _report(runs, tmp_path_factory.mktemp("local") / "report", "local[2]")


@pytest.fixture(scope="module")
def spark_processes() -> Iterator[LocalSpark]:
    cluster = LocalSpark(cores=2, worker_memory="2g")
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def standalone(spark_processes: LocalSpark) -> str:
    """The standalone master's URL: one master and worker for the module's tests."""
    return spark_processes.master_url or spark_processes.start_standalone()


def test_standalone_cluster_gives_the_local_report(standalone: str, runs: Path, local_report: dict[str, Any],
                                                    tmp_path: Path) -> None:
    got = _report(runs, tmp_path / "report", standalone)
    assert got["summary"]["records"] > 1_000 and got["summary"]["quarantined"] >= 1
    assert got == local_report


def test_spark_connect_gives_the_local_report(spark_processes: LocalSpark, runs: Path, local_report: dict[str, Any],
                                              tmp_path: Path) -> None:
    if connect_jar() is None:
        pytest.skip("this pyspark ships no spark-connect jar: a Connect server cannot be started offline")
    pytest.importorskip("grpc", reason="the Spark Connect client needs pyspark[connect] (grpcio, pandas, pyarrow)")
    try:
        url = spark_processes.start_connect()
    except ClusterError as exc:
        pytest.fail(f"the Spark Connect server did not start: {exc}")
    got = _report(runs, tmp_path / "report", url)
    assert got == local_report



def test_soak_runs_are_judged_on_the_standalone_cluster(standalone: str, tmp_path: Path) -> None:
    """The soak job's tasks on the cluster's executors (the code shipped with the job): the verdicts
    and anomaly counts of run_all in this process, a mutated run's failure included."""
    from conformance.soak.checkers import run_all
    from conformance.soak.folders import mutate_run, synthetic_meta, write_run
    from conformance.soak.history import read_history
    from conformance.soak.judge import options_of
    from conformance.soak.synthetic import healthy_history

    folders = []
    for i, nemesis in enumerate(("cut", "kill")):
        ops = healthy_history(i, 1_500)
        folders.append(write_run(tmp_path / f"soak-{i}", ops, synthetic_meta(ops, product="RabbitMQ", version="3.10.8",
                                                                          protocol="amqp-0-9-1", nemesis=[nemesis], seed=i)))
    folders.append(mutate_run(folders[0], tmp_path / "soak-lost", "lose-confirmed"))
    out = tmp_path / "report"
    proc = subprocess.run(conformance_cmd("report", *map(str, folders), "--out", str(out), "--spark-master", standalone),
                          check=False, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, f"report on {standalone} exited {proc.returncode}: {proc.stderr[-2000:]}"
    assert "3 soak run(s)" in proc.stdout and "1 failing" in proc.stdout
    got = {Path(r["folder"]).name: r for r in json.loads((out / "matrix.json").read_text())["soak"]["runs"]}
    for f in folders:
        ref = run_all(read_history(f / "history.jsonl"), options_of(json.loads((f / "soak.json").read_text())))
        assert {k: (v["verdict"], v["counts"]) for k, v in got[f.name]["verdicts"].items()} == \
               {k: (r.verdict, r.counts) for k, r in ref.items()}, f.name
    assert got["soak-lost"]["verdicts"]["queue"]["counts"]["lost"] >= 1 and got["soak-0"]["verdict"] == "pass"
    assert 'id="soak-matrix"' in (out / "report.html").read_text()
