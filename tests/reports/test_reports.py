"""The report pipeline on small synthetic runs, with one Spark session for the whole module.

Synthetic records use the real schema (conformance.result/1); the pipeline never sees a broker.
"""

from __future__ import annotations

import datetime
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any, Iterator

import pytest

from conformance.errors import UsageError
from tests.conftest import conformance_cmd

pytest.importorskip("pyspark")


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    from reports.session import spark_session

    os.environ["CONFORMANCE_KEEP_SPARK"] = "1"  # build() and run_gate() reuse this session
    session = spark_session("local[2]")
    yield session
    os.environ.pop("CONFORMANCE_KEEP_SPARK", None)
    session.stop()


def rec(req: str, verdict: str, *, level: str = "MUST", area: str = "ack", qt: str = "classic", version: str = "3.10.8",
        run: str = "r1", case: str | None = None, spec: str | None = None, **extra: Any) -> dict[str, Any]:
    return {"schema": "conformance.result/1", "run_id": run, "case_id": case or f"{area}/test_x.py::T{req}::test[{qt}]",
            "requirement": req, "level": level, "area": area, "queue_type": qt, "variant": None, "verdict": verdict,
            "spec_verdict": spec or verdict, "vendor_verdict": verdict, "reason": "", "citation": "",
            "expected": f"{req} holds", "observed": f"{req} {verdict}", "duration_s": 0.5, "attempt": 1,
            "target": "rabbitmq-local", "product": "RabbitMQ", "version": version, "protocol": "amqp-0-9-1",
            "adapter": "pika", "profile": "rabbitmq-3.10", "suite_version": "0.1.0", **extra}


CATALOGUE_DIGEST, PROFILE_DIGEST = "c" * 64, "a" * 64


def run_meta(records: list[dict[str, Any]], **overrides: Any) -> dict[str, Any]:
    """run.json as a finished run writes it (the runner's contract: digests and status)."""
    first = records[0] if records else {}
    return {"schema": "conformance.run/1", "run_id": first.get("run_id", "x"), "status": "finished",
            "suite_version": first.get("suite_version", "0.1.0"), "catalogue_digest": CATALOGUE_DIGEST,
            "profile": first.get("profile", "rabbitmq-3.10"), "profile_digest": PROFILE_DIGEST,
            "product": first.get("product", "RabbitMQ"), "version": first.get("version", "3.10.8"),
            "protocol": first.get("protocol", "amqp-0-9-1"), **overrides}


def run_dir(root: Path, name: str, records: list[dict[str, Any]], *, extra_lines: list[str] = (), meta: dict[str, Any] | None = None,
            **overrides: Any) -> str:
    """A run folder of synthetic records; ``meta`` replaces run.json entirely, ``overrides`` change fields of it."""
    d = root / name
    d.mkdir(parents=True)
    lines = [json.dumps(r) for r in records] + list(extra_lines)
    (d / "results.jsonl").write_text("\n".join(lines) + "\n")
    (d / "run.json").write_text(json.dumps(meta if meta is not None else run_meta(records, **overrides)))
    return str(d)


def cells(spark: Any, paths: list[str]) -> dict[tuple[str, str], dict[str, Any]]:
    from reports.report import figures

    result, _ = figures(spark, paths)
    result.pop("_cases")
    return {(c["requirement"], c["column"]): c for c in result["cells"]}


BASE = [rec("ACK-A", "pass"), rec("ACK-B", "pass", qt="quorum"), rec("ACK-C", "fail", level="SHOULD"),
        rec("LIMIT-X", "unsupported", level="EXTENSION", area="limit"), rec("ACK-D", "deviation", spec="fail")]
#: BASE's cells that stay as they were, on the current version (for gate tests about other cells).
UNCHANGED_REST = [rec("LIMIT-X", "unsupported", level="EXTENSION", area="limit", version="3.11.0"),
                  rec("ACK-D", "deviation", spec="fail", version="3.11.0")]


def test_a_corrupted_line_is_quarantined_and_changes_nothing_else(spark: Any, tmp_path: Path) -> None:
    from reports.report import figures

    clean = run_dir(tmp_path, "clean", BASE)
    damaged = run_dir(tmp_path, "damaged", BASE, extra_lines=['{"schema": "conformance.result/1", "requirement": "ACK-A", "verd', "not json at all"])
    a, _ = figures(spark, [clean])
    b, data = figures(spark, [damaged])
    assert b["summary"]["quarantined"] == 2 and a["summary"]["quarantined"] == 0
    assert data.quarantined_examples and "not json" in data.quarantined_examples[-1]["line"] + data.quarantined_examples[0]["line"]
    strip = lambda r: sorted((c["requirement"], c["column"], c["verdict"], c["records"]) for c in r["cells"])  # noqa: E731
    assert strip(a) == strip(b)


def test_an_unknown_schema_version_is_refused(spark: Any, tmp_path: Path) -> None:
    from reports.ingest import ingest

    path = run_dir(tmp_path, "future", [rec("ACK-A", "pass") | {"schema": "conformance.result/9"}])
    with pytest.raises(UsageError, match=r"unknown result schema 'conformance.result/9'"):
        ingest(spark, [path])


def test_matrix_keeps_spec_and_vendor_verdicts_apart_and_shows_the_worst(spark: Any, tmp_path: Path) -> None:
    recs = BASE + [rec("ACK-A", "fail", run="r2"), rec("ACK-A", "pass", run="r3")]
    c = cells(spark, [run_dir(tmp_path, "r", recs)])
    col = "RabbitMQ 3.10.8 amqp-0-9-1 classic"
    assert c[("ACK-A", col)]["verdict"] == "fail" and c[("ACK-A", col)]["runs"] == 3
    assert abs(c[("ACK-A", col)]["pass_rate"] - 2 / 3) < 1e-9
    assert (c[("ACK-D", col)]["verdict"], c[("ACK-D", col)]["spec_verdict"]) == ("deviation", "fail")
    assert c[("ACK-B", "RabbitMQ 3.10.8 amqp-0-9-1 quorum")]["verdict"] == "pass"


def test_self_test_records_never_count_as_results(spark: Any, tmp_path: Path) -> None:
    from reports.report import figures

    recs = BASE + [rec("ACK-A", "fail", run="m", mutation="acks-dropped"), rec("ACK-B", "pass", mutation="probe", qt="quorum", run="p")]
    result, _ = figures(spark, [run_dir(tmp_path, "m", recs)])
    assert result["summary"]["mutated"] == 1
    assert {c["requirement"]: c["verdict"] for c in result["cells"] if c["queue_type"] == "classic"}["ACK-A"] == "pass"


def test_flakiness_scores_and_durations(spark: Any, tmp_path: Path) -> None:
    from reports.report import figures

    recs = [rec("ACK-A", v, run=f"r{i}") for i, v in enumerate(["pass", "fail", "pass", "pass"])] + [rec("ACK-B", "pass", run=f"r{i}") for i in range(4)]
    result, _ = figures(spark, [run_dir(tmp_path, "f", recs)])
    flaky = [f for f in result["flakiness"] if f["flaky"]]
    assert [(f["requirement"], f["repetitions"], f["pass_rate"]) for f in flaky] == [("ACK-A", 4, 0.75)]
    area = {(s["column"], s["area"]): s for s in result["area_scores"]}[("RabbitMQ 3.10.8 amqp-0-9-1 classic", "ack")]
    assert (area["pass"], area["fail"], area["judged"]) == (1, 1, 2)
    assert result["durations"][0]["cases"] == 8


def _reference(lines: list[str]) -> dict[str, Any]:
    """The report's figures computed the obvious way, record by record in plain Python: what the
    one-pass Spark pipeline (reports.groupings) must agree with."""
    from reports.runs import broker_name
    from reports.schema import VERDICTS

    rank = {v: i for i, v in enumerate(VERDICTS)}
    good, bad, mutated = [], 0, 0
    for line in lines:
        try:
            r = json.loads(line)
        except ValueError:
            bad += 1
            continue
        if any(r.get(k) is None for k in ("requirement", "level", "area", "verdict")):
            bad += 1
        elif r.get("mutation") not in (None, "probe"):
            mutated += 1
        else:
            r["product"], r["version"] = broker_name(r.get("product"), r.get("version"), r.get("target"))
            good.append(r)
    cells: dict[tuple[str, str], dict[str, Any]] = {}
    per_case: dict[tuple[str, str, Any], list[str]] = {}
    for r in good:
        qt = r.get("queue_type") or "-"
        column = " ".join(str(x) for x in (r["product"], r["version"], r["protocol"], qt) if x is not None)
        c = cells.setdefault((r["requirement"], column), {"records": 0, "cases": set(), "runs": set(), "passes": 0, "decided": 0,
                                                          "v": 99, "s": 99, "d": 99, "worst": None})
        c["records"] += 1
        c["cases"].add(r["case_id"]) if r["case_id"] is not None else None
        c["runs"].add(r["run_id"])
        c["passes"] += r["verdict"] == "pass"
        c["decided"] += r["verdict"] in ("pass", "fail")
        v = rank.get(r["verdict"], len(VERDICTS))
        # the cell shows its worst verdict's case's latest record (case id, then latest attempt)
        key = (v, r["case_id"] or "", -r["finished_at"], -r["attempt"], r["run_id"], r["observed"] or "")
        c["worst"] = key if c["worst"] is None or key < c["worst"] else c["worst"]
        c["v"], c["s"], c["d"] = min(c["v"], v), min(c["s"], rank.get(r["spec_verdict"], 7)), min(c["d"], rank.get(r["vendor_verdict"], 7))
        per_case.setdefault((column, r["requirement"], r["case_id"]), []).append(r["verdict"])
    names = (*VERDICTS, "none")
    out = {}
    for (req, column), c in cells.items():
        flaky = any("pass" in vs and "fail" in vs for (col, rq, case), vs in per_case.items() if (rq, col) == (req, column) and case is not None)
        out[(req, column)] = {"verdict": names[c["v"]], "spec_verdict": names[c["s"]], "vendor_verdict": names[c["d"]], "records": c["records"],
                              "cases": len(c["cases"]), "runs": len(c["runs"]), "passes": c["passes"], "decided": c["decided"], "flaky": flaky,
                              "case_id": c["worst"][1] or None, "observed": c["worst"][5]}
    flakiness = sorted((col, rq, case, len([v for v in vs if v in ("pass", "fail")]), vs.count("pass"))
                       for (col, rq, case), vs in per_case.items() if len([v for v in vs if v in ("pass", "fail")]) > 1)
    return {"cells": out, "ok": len(good), "quarantined": bad, "mutated": mutated, "flakiness": flakiness,
            "durations": sorted((" ".join(str(x) for x in (r["product"], r["version"], r["protocol"], r.get("queue_type") or "-") if x is not None), r["area"])
                                for r in good if r.get("duration_s") is not None)}


def test_the_one_pass_figures_equal_a_plain_python_reading_of_the_records(spark: Any, tmp_path: Path) -> None:
    """Random records over several runs, with repetitions, flaky cases, nulls, self-test records
    and damaged lines: every cell, count, flakiness row and duration group Spark reports is what
    reading the lines one by one gives (the figures come from a single pass)."""
    import random
    from collections import Counter

    from reports.report import figures

    rnd = random.Random(20)
    folders, all_lines = [], []
    for run in range(6):
        lines = []
        version = rnd.choice(["3.10.8", "3.13.7"])
        for _ in range(rnd.randint(20, 60)):
            req, qt = rnd.choice(["ACK-A", "ACK-B", "LIMIT-X", "TX-Y"]), rnd.choice(["classic", "quorum", None])
            verdict = rnd.choice(["pass", "pass", "pass", "fail", "deviation", "unsupported", "error"])
            extra: dict[str, Any] = {}
            if rnd.random() < 0.1:
                extra["mutation"] = rnd.choice(["acks-dropped", "probe"])
            if rnd.random() < 0.2:  # a broker that announces no product is named by its target
                extra.update(product=rnd.choice(["unknown", "", None]), target=rnd.choice(["proton-example", "amqp://h:5672/"]))
            r = rec(req, verdict, qt=qt, version=rnd.choice(["0", "", "1.2"]) if "product" in extra else version, run=f"run{run}", area=req.split("-")[0].lower(), spec=rnd.choice([verdict, "fail"]),
                    case=rnd.choice([None, f"case-{rnd.randint(0, 2)}"]) or f"{req}::c", duration_s=rnd.choice([None, rnd.random()]),
                    observed=f"obs-{rnd.randint(0, 9)}", finished_at=rnd.random(), **extra)
            if rnd.random() < 0.05:
                r["case_id"] = None
            lines.append(json.dumps(r))
        lines += ["not json", '{"schema": "conformance.result/1", "requirement": "ACK-A"}'][: rnd.randint(0, 2)]
        folders.append(run_dir(tmp_path, f"run{run}", [json.loads(x) for x in lines if x.startswith("{") and '"verdict"' in x],
                               extra_lines=[x for x in lines if not (x.startswith("{") and '"verdict"' in x)]))
        all_lines += [x for x in (Path(folders[-1]) / "results.jsonl").read_text().splitlines() if x]
    want = _reference(all_lines)
    got, _ = figures(spark, folders)
    got.pop("_cases")
    assert (got["summary"]["records"], got["summary"]["quarantined"], got["summary"]["mutated"]) == (want["ok"], want["quarantined"], want["mutated"])
    fields = ("verdict", "spec_verdict", "vendor_verdict", "records", "cases", "runs", "passes", "decided", "flaky", "case_id", "observed")
    assert {(c["requirement"], c["column"]): {f: c[f] for f in fields} for c in got["cells"]} == want["cells"]
    assert sorted((f["column"], f["requirement"], f["case_id"], f["repetitions"], f["passes"]) for f in got["flakiness"]) == want["flakiness"]
    counted = Counter(want["durations"])
    assert {(d["column"], d["area"]): d["cases"] for d in got["durations"]} == dict(counted)
    assert all(d["p50_s"] <= d["p95_s"] <= d["max_s"] for d in got["durations"])


def test_baseline_differences(spark: Any, tmp_path: Path) -> None:
    from reports.analysis import compare
    from reports.report import figures

    base, _ = figures(spark, [run_dir(tmp_path, "b", BASE)])
    now_recs = [rec("ACK-A", "fail", version="3.11.0"), rec("ACK-B", "pass", qt="quorum", version="3.11.0"),
                rec("ACK-C", "pass", level="SHOULD", version="3.11.0"), rec("ACK-D", "unsupported", version="3.11.0"),
                rec("LIMIT-X", "unsupported", level="EXTENSION", area="limit", version="3.11.0")]
    now, _ = figures(spark, [run_dir(tmp_path, "n", now_recs)])
    diff = {d["requirement"]: d["change"] for d in compare(base["cells"], now["cells"])}
    assert diff == {"ACK-A": "newly failing", "ACK-C": "fixed", "ACK-D": "newly unsupported"}


def test_gate_exit_codes_known_deviation_xpass_and_expiry(spark: Any, tmp_path: Path) -> None:
    from reports.gate import run_gate

    base = run_dir(tmp_path, "base", BASE)
    # Every baseline cell is present now (a missing one would be "vanished" and block on its own).
    cur = run_dir(tmp_path, "cur", [rec("ACK-A", "fail", version="3.11.0"), rec("ACK-B", "pass", qt="quorum", version="3.11.0"),
                                    rec("ACK-C", "pass", level="SHOULD", version="3.11.0"), *UNCHANGED_REST])
    g = run_gate([base], [cur])
    assert not g["passed"] and [d["requirement"] for d in g["regressions"]] == ["ACK-A"]
    manifest = tmp_path / "known.yaml"
    future = (datetime.date.today() + datetime.timedelta(days=30)).isoformat()
    manifest.write_text(f"known:\n  - {{requirement: ACK-A, target: 'RabbitMQ * classic', reason: vendor bug, link: 'https://example.invalid/1', expires: {future}}}\n"
                        f"  - {{requirement: ACK-C, target: '*', reason: 'fixed upstream', expires: {future}}}\n")
    g = run_gate([base], [cur], manifest=manifest)
    assert g["passed"] and [d["requirement"] for d in g["known"]] == ["ACK-A"]
    assert [x["requirement"] for x in g["xpass"]] == ["ACK-C"]
    manifest.write_text("known:\n  - {requirement: ACK-A, target: '*', reason: vendor bug, expires: 2020-01-01}\n")
    g = run_gate([base], [cur], manifest=manifest)
    assert not g["passed"] and g["expired"] and not g["regressions"]


def test_gate_and_report_refuse_bad_input_in_one_line(tmp_path: Path) -> None:
    for args in (("gate", "--baseline", str(tmp_path / "nope"), "--current", str(tmp_path)),
                 ("report", str(tmp_path / "missing"), "--out", str(tmp_path / "o"))):
        proc = subprocess.run(conformance_cmd(*args), capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("known: [{reason: no requirement}]\n")
    run_dir(tmp_path, "r", BASE)
    proc = subprocess.run(conformance_cmd("gate", "--baseline", str(tmp_path / "r"), "--current", str(tmp_path / "r"), "--known", str(bad)),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "entry 1 needs at least 'requirement' and 'reason'" in proc.stderr


KILLMATRIX = {"schema": "conformance.killmatrix/1", "product": "RabbitMQ", "version": "3.10.8", "protocol": "amqp-0-9-1", "wall_s": 3.0,
              "ok": True, "problems": [], "unproven": [], "unproven_deviation": [],
              "counts": {"cases": 1, "provable": 1, "mutations": 1, "kills": 1, "blind_spots": 0, "unproven": 0, "unproven_must": 0,
                         "unproven_deviation": 0, "false_alarms": 0},
              "mutations": [{"name": "acks-dropped", "description": "drops acks"}],
              "cases": [{"case": "ack/test_x.py::TACK-A::test[classic]", "clean": "pass"}],
              "cells": [{"case": "ack/test_x.py::TACK-A::test[classic]", "mutation": "acks-dropped", "verdict": "fail"}],
              "kills": [{"case": "ack/test_x.py::TACK-A::test[classic]", "mutation": "acks-dropped", "observed": "came back"}]}


def test_report_outputs_and_the_page_in_a_real_browser(spark: Any, tmp_path: Path) -> None:
    from reports.report import build

    a = run_dir(tmp_path, "classic", BASE + [rec("ACK-E", "fail", wire_trace="C->S basic.ack <script>x</script>")])
    b = run_dir(tmp_path, "quorum", [rec(r["requirement"], r["verdict"], qt="quorum", level=r["level"], area=r["area"]) for r in BASE])
    (Path(a) / "killmatrix.json").write_text(json.dumps(KILLMATRIX))
    out = tmp_path / "report"
    build([a, b], out, baseline=[a])
    for name in ("report.html", "summary.md", "matrix.json"):
        assert (out / name).stat().st_size > 0
    assert list((out / "matrix.parquet").glob("*.parquet")) and list((out / "matrix.csv").glob("*.csv"))
    # the tables hold the matrix.json cells, read back as Spark reads such folders (written by the
    # driver: a report on a remote cluster must find them in --out, not on the cluster's disks)
    cells = json.loads((out / "matrix.json").read_text())["cells"]
    table = spark.read.parquet(str(out / "matrix.parquet"))
    assert "wire_trace" not in table.columns and dict(table.dtypes)["records"] == "bigint" and dict(table.dtypes)["flaky"] == "boolean"
    assert sorted((r["requirement"], r["column"], r["verdict"], r["records"]) for r in table.collect()) == \
        sorted((c["requirement"], c["column"], c["verdict"], c["records"]) for c in cells)
    csv_rows = spark.read.option("header", True).csv(str(out / "matrix.csv")).collect()
    assert len(csv_rows) == len(cells) and "expected" not in csv_rows[0].asDict() and {r["flaky"] for r in csv_rows} <= {"true", "false"}
    page = (out / "report.html").read_text()
    assert "<script>x</script>" not in page and "&lt;script&gt;" in page  # traces are escaped
    assert "http" not in page.split("<body>")[0]  # nothing loaded from a network
    assert "Suite strength" in page and "acks-dropped" in page
    assert 'id="coverage"' in page and 'id="rule-amqp-0-9-1-basic-reject-requeue-01"' in page  # the coverage section
    assert "not testable: a client obligation" in page
    assert json.loads((out / "matrix.json").read_text())["rule_coverage"]["figures"]["amqp-0-9-1"]["total"] > 0
    md = (out / "summary.md").read_text()
    assert "| RabbitMQ 3.10.8 amqp-0-9-1 classic |" in md and "ACK-E" in md
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("chromium is not installed (scripts/install.sh installs it)")
    profile = tmp_path / "chromium-profile"
    dom = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                          "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
                          "--dump-dom", (out / "report.html").as_uri()], capture_output=True, text=True, timeout=120).stdout
    assert 'id="compliance-matrix"' in dom
    assert dom.count('class="v fail"') >= 1 and dom.count('class="v pass"') >= 4
    assert "RabbitMQ 3.10.8 amqp-0-9-1 quorum" in dom and "quorum queue" in dom  # the column key as title, its readable label shown


def test_gate_command_exit_codes_and_xpass(spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from conformance.cli import main

    base = run_dir(tmp_path, "base", BASE)
    cur = run_dir(tmp_path, "cur", [rec("ACK-A", "fail", version="3.11.0"), rec("ACK-C", "pass", level="SHOULD", version="3.11.0"),
                                    rec("ACK-B", "pass", qt="quorum", version="3.11.0"), *UNCHANGED_REST])
    assert main(["gate", "--baseline", base, "--current", cur]) == 1
    out = capsys.readouterr().out
    assert "REGRESSION ACK-A [MUST]" in out and "gate: FAILED" in out
    known = tmp_path / "known.yaml"
    known.write_text("known:\n  - {requirement: ACK-A, target: '*', reason: vendor bug}\n  - {requirement: ACK-C, target: '*', reason: old bug}\n")
    assert main(["gate", "--baseline", base, "--current", cur, "--known", str(known)]) == 0
    out = capsys.readouterr().out
    assert "KNOWN ACK-A" in out and "XPASS ACK-C" in out and "gate: PASSED" in out


def test_coverage_section_shows_each_rule_with_its_requirements_verdicts_or_why_none() -> None:
    """Without Spark: the section's data joins the rule map with the report's cells."""
    from conformance.catalogue.coverage import as_data
    from reports.render import coverage_context

    grid = {("NACK-REJECT-REQUEUE", "RabbitMQ 3.10.8 amqp-0-9-1 classic"): {"verdict": "deviation", "label": "deviation"}}
    ctx = coverage_context({"rule_coverage": as_data()}, grid, ["RabbitMQ 3.10.8 amqp-0-9-1 classic"])
    assert ctx is not None
    rows = {(r["protocol"], r["id"]): r for r in ctx["rules"]}
    reject = rows[("amqp-0-9-1", "basic/reject/requeue/01")]
    assert reject["covering"] == [{"id": "NACK-REJECT-REQUEUE", "cells": [{"verdict": "deviation", "label": "deviation"}]}]
    assert rows[("amqp-0-9-1", "basic/reject/03")]["reason"].startswith("not testable")
    assert set(ctx["figures"]) == {"amqp-0-9-1", "amqp-1.0"}
    assert coverage_context({}, grid, []) is None  # a result without rule coverage renders without the section


# --- a quiet console, and queue-type-independent requirements inside their target ----------------------

def test_matrix_layout_spans_a_queue_type_independent_requirement_over_its_target() -> None:
    """Pure layout on synthetic cells: no stray ``... -`` column, readable group and column titles."""
    from reports.render import matrix_layout

    def cell(req: str, qt: str, protocol: str = "amqp-0-9-1") -> dict[str, Any]:
        return {"requirement": req, "queue_type": qt, "product": "RabbitMQ", "version": "3.10.8", "protocol": protocol,
                "column": f"RabbitMQ 3.10.8 {protocol} {qt}", "verdict": "pass"}

    cells = [cell("ACK-A", "classic"), cell("ACK-A", "quorum"), cell("ACK-GET-EMPTY", "-"), cell("LINK-X", "-", "amqp-1.0")]
    reqs = [{"requirement": r} for r in ("ACK-A", "ACK-GET-EMPTY", "LINK-X")]
    grid = {(c["requirement"], c["column"]): c for c in cells}
    layout = matrix_layout(cells, reqs, grid)
    assert [(t["title"], [c["label"] for c in t["columns"]]) for t in layout["targets"]] == [
        ("RabbitMQ 3.10.8 · AMQP 0-9-1", ["classic queue", "quorum queue"]), ("RabbitMQ 3.10.8 · AMQP 1.0", ["any queue type"])]
    spans = {r: [(e["cell"] or {}).get("queue_type") for e in es] for r, es in layout["rows"].items()}
    assert spans["ACK-GET-EMPTY"] == ["-", None]  # one cell over classic+quorum, then the 1.0 target's empty cell
    assert layout["rows"]["ACK-GET-EMPTY"][0]["span"] == 2 and spans["ACK-A"] == ["classic", "quorum", None]
    # every row fills exactly the header's columns
    width = sum(len(t["columns"]) for t in layout["targets"])
    assert all(sum(e["span"] for e in es) == width for es in layout["rows"].values())


def test_report_prints_only_its_own_lines_and_the_page_has_no_stray_column(tmp_path: Path) -> None:
    """The real command in a subprocess, a JVM of its own: no JVM or Spark start-up noise on either stream."""
    a = run_dir(tmp_path, "run", [rec("ACK-A", "pass"), rec("ACK-A", "fail", qt="quorum"), rec("ACK-GET-EMPTY", "pass", qt=None)])
    out = tmp_path / "report"
    env = {k: v for k, v in os.environ.items() if k != "CONFORMANCE_KEEP_SPARK"}
    proc = subprocess.run(conformance_cmd("report", a, "--out", str(out), "--spark-master", "local[1]"), capture_output=True, text=True,
                          timeout=180, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = (proc.stdout + proc.stderr).splitlines()
    noise = [line for line in lines if any(w in line for w in ("WARN", "log4j", "incubator", "NativeCodeLoader", "Stage"))]
    assert not noise, noise
    assert lines[0].startswith("report: 3 case records, 1 target(s) over 2 queue-type configuration(s), 2 requirements") and proc.stderr == ""
    page = (out / "report.html").read_text()
    matrix = page.split('id="compliance-matrix"')[1].split("</table>")[0]
    assert "amqp-0-9-1 -<" not in matrix and ">RabbitMQ 3.10.8 · AMQP 0-9-1</th>" in matrix
    assert 'colspan="2"' in matrix and ">classic queue</th>" in matrix and ">quorum queue</th>" in matrix


def test_many_brokers_no_empty_column_and_an_unannounced_broker_named_by_its_target(spark: Any, tmp_path: Path) -> None:
    """Through the whole pipeline: a broker without quorum queues (each quorum case recorded
    unsupported) gets no quorum column, and a broker that announced no product ("unknown", "0", as
    the AMQP 1.0 adapter records the Proton example broker) is named by its target in the matrix,
    its headings, summary.md, matrix.json and the gate's table."""
    from reports.gate import run_gate
    from reports.report import build

    no_quorum = "profile acme-2 has no queue type 'quorum'"
    acme = run_dir(tmp_path, "acme", [rec("ACK-A", "pass", product="Acme", version="2.0", target="acme-local"),
                                      rec("ACK-A", "unsupported", qt="quorum", product="Acme", version="2.0", reason=no_quorum)])
    # a case run in a worker not attached to the launched target records its URL: the run's target names it
    anon = [rec("ACK-A", "pass", product="unknown", version="0", target="proton-example", protocol="amqp-1.0"),
            rec("ACK-B", "fail", product="unknown", version="0", target="amqp://127.0.0.1:16860", protocol="amqp-1.0")]
    ex = run_dir(tmp_path, "example", anon, target="proton-example")
    again = run_dir(tmp_path, "again", [{**r, "run_id": "r2", "target": "amqp://127.0.0.1:17001"} for r in anon], target="proton-example")
    out = tmp_path / "report"
    result = build([acme, ex, run_dir(tmp_path, "rmq", BASE)], out)
    assert {c["column"] for c in result["cells"]} >= {"proton-example amqp-1.0 classic", "Acme 2.0 amqp-0-9-1 quorum"}  # matrix.json keeps them
    page = (out / "report.html").read_text()
    header = page.split('id="compliance-matrix"')[1].split("</thead>")[0]
    assert ">proton-example · AMQP 1.0</th>" in header and "unknown" not in page.split("<body>")[1].split('id="coverage"')[0]
    assert header.count(">quorum queue</th>") == 1 and ">Acme 2.0 · AMQP 0-9-1</th>" in header  # RabbitMQ's quorum column only
    assert "Acme 2.0 · AMQP 0-9-1, quorum queue (1 cell" in page
    md = (out / "summary.md").read_text()
    assert "| proton-example amqp-1.0 classic |" in md and "`ACK-B` [MUST] on proton-example amqp-1.0 classic" in md
    g = run_gate([ex], [again])  # another run on another port is the same broker
    assert {r["column"] for r in g["table"]} == {"proton-example amqp-1.0 classic"} and g["counts"] == {"unchanged": 1, "still failing": 1}
