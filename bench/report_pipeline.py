"""Time the report pipeline (ingest -> matrix, scores, flakiness, durations -> HTML/MD/JSON/Parquet/CSV)
on synthetic run folders, and print records/second.

    python bench/report_pipeline.py                 # 10k and 1M case records
    python bench/report_pipeline.py --records 200000 --keep /tmp/runs

The generator writes real ``conformance.result/1`` records: many targets (product x version x
protocol x queue type), every requirement of the catalogue, repetitions with a few flaky cases,
a sprinkling of failures with expected/observed text and wire traces, one corrupted line per run.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from conformance.catalogue.requirements import catalogue  # noqa: E402

TARGETS = [("RabbitMQ", v, p) for v in ("3.10.8", "3.12.14", "3.13.7", "4.0.9", "4.3.0") for p in ("amqp-0-9-1", "amqp-1.0")] + \
          [("LavinMQ", "2.1.0", "amqp-0-9-1"), ("Qpid Broker-J", "9.2.0", "amqp-1.0"), ("in-house", "1.4.0", "amqp-0-9-1")]
QUEUE_TYPES = ("classic", "quorum")


#: Above this many records the generator writes this many and copies them as further runs (run ids
#: rewritten): json.dumps of 10M records takes longer than the report it feeds, on a loaded machine.
DISTINCT_MAX = 1_000_000


def generate(root: Path, records: int, *, seed: int = 7) -> list[Path]:
    """Run folders under ``root`` holding about ``records`` case records in all; above
    DISTINCT_MAX, copies of a DISTINCT_MAX set under other run ids (other runs of the same targets)."""
    if records <= DISTINCT_MAX:
        return _generate(root, records, seed=seed)
    base = _generate(root, DISTINCT_MAX, seed=seed)
    folders = list(base)
    for copy in range(1, round(records / DISTINCT_MAX)):
        for folder in base:
            run_id = folder.name
            new_id = f"c{copy:03d}{run_id}"
            dest = root / new_id
            dest.mkdir()
            for name in ("results.jsonl", "run.json"):
                data = (folder / name).read_bytes()
                (dest / name).write_bytes(data.replace(f'"run_id": "{run_id}"'.encode(), f'"run_id": "{new_id}"'.encode()))
            folders.append(dest)
    return folders


def _generate(root: Path, records: int, *, seed: int = 7) -> list[Path]:
    rnd = random.Random(seed)
    reqs = list(catalogue().values())
    per_run = len(reqs) * len(QUEUE_TYPES)
    runs = max(1, min(200, records // per_run))  # a run repeats the catalogue: fewer, larger files, like real CI runs
    reps = max(1, round(records / (per_run * runs)))
    folders = []
    trace = "\n".join(f"  {i * 0.3:8.3f}ms conn#1 C->S ch1   #{i:<5} basic.ack  delivery_tag={i} multiple=False" for i in range(40))
    for r in range(runs):
        product, version, protocol = TARGETS[r % len(TARGETS)]
        run_id = f"run{r:06d}"
        folder = root / run_id
        folder.mkdir(parents=True)
        lines = []
        for req, qt, attempt in ((q, t, a) for a in range(1, reps + 1) for q in reqs for t in QUEUE_TYPES):
            roll = rnd.random()
            flaky = hash((req.id, product, version, qt)) % 97 == 0
            verdict = "fail" if (roll < 0.02 or (flaky and roll < 0.3)) else "deviation" if roll < 0.04 else "unsupported" if roll < 0.08 else "pass"
            rec = {"schema": "conformance.result/1", "run_id": run_id, "case_id": f"{req.area}/test_{req.area}.py::Test{req.id}::test[{qt}]",
                   "requirement": req.id, "level": req.level, "area": req.area, "queue_type": qt, "variant": None,
                   "verdict": verdict, "spec_verdict": "fail" if verdict == "deviation" else verdict, "vendor_verdict": verdict,
                   "reason": "documented" if verdict != "pass" else "", "citation": "", "expected": f"{req.id}: {req.text[:80]}",
                   "observed": "as expected" if verdict == "pass" else "came back [m1, m2] (missing [m3])",
                   "duration_s": rnd.expovariate(5.0), "attempt": attempt, "finished_at": time.time(), "target": "synthetic",
                   "product": product, "version": version, "protocol": protocol, "adapter": "pika", "profile": "synthetic",
                   "suite_version": "0.1.0", "wire_trace": trace if verdict == "fail" else None}
            lines.append(json.dumps(rec))
        lines.append('{"schema": "conformance.result/1", "requirement": "TRUNC')  # a run killed mid-line
        (folder / "results.jsonl").write_text("\n".join(lines) + "\n")
        (folder / "run.json").write_text(json.dumps({"schema": "conformance.run/1", "run_id": run_id, "product": product, "version": version}))
        folders.append(folder)
    return folders


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, action="append", help="records per measurement (repeatable; default 10000 and 1000000)")
    ap.add_argument("--keep", type=Path, help="generate into this folder and keep it")
    ap.add_argument("--spark-master", help="Spark master URL (default local[*])")
    ap.add_argument("--in-process", action="store_true", help=argparse.SUPPRESS)  # one measurement, in this process
    args = ap.parse_args()
    sizes = args.records or [10_000, 1_000_000]
    if not args.in_process:
        # Each size in a fresh process: a second report in the same process reuses the first one's
        # warm JVM (the py4j gateway outlives the session), which is not what a user's run costs.
        import subprocess

        for n in sizes:
            cmd = [sys.executable, __file__, "--in-process", "--records", str(n)]
            cmd += ["--keep", str(args.keep)] if args.keep else []
            cmd += ["--spark-master", args.spark_master] if args.spark_master else []
            if subprocess.run(cmd).returncode:
                return 1
        return 0
    from reports.report import build

    for n in sizes:
        root = args.keep or Path(tempfile.mkdtemp(prefix="bench-report-"))
        t0 = time.monotonic()
        done = root / f"n{n}" / ".complete"  # --keep: generated data is reused (10M records take minutes to write)
        if done.is_file():
            folders = sorted(p for p in (root / f"n{n}").iterdir() if p.is_dir())
        else:
            shutil.rmtree(root / f"n{n}", ignore_errors=True)
            folders = generate(root / f"n{n}", n)
            done.write_text(str(n))
        gen_s = time.monotonic() - t0
        t1 = time.monotonic()
        result = build([str(root / f"n{n}" / "*")], root / f"n{n}-report", master=args.spark_master)
        took = time.monotonic() - t1
        got = result["summary"]["records"]
        print(f"{got:>9} records in {len(folders)} runs: report in {took:6.1f} s ({got / took:,.0f} records/s end to end, "
              f"Spark start included); {result['summary']['quarantined']} quarantined; generation {gen_s:.1f} s", flush=True)
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
