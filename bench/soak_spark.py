"""Time the soak checkers on Spark over many runs (reports.soak.check_runs) and print operations/second.

    python bench/soak_spark.py                       # 1M and 10M operations, local[*]
    python bench/soak_spark.py --ops 1000000 --master local[2] --root /tmp/soak-bench

Writes synthetic soak run folders (history.jsonl + soak.json, as ``conformance soak --out`` does)
under --root once (reused when they are there: generating 10M operations takes longer than
checking them), brokers x nemeses x seeds, a few with a history mutation (a lost confirm, a
duplicate after an ack, a partial commit) so that the matrix has anomalies. The first --ops set is
a subset of the largest one (the same runs, fewer seeds). Then, per set: Spark local mode judges
every run with checkers.run_all (the session is started first, not timed), and the figures are
printed: seconds, operations/second, runs, the matrix cells with anomalies.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("PYTHONPATH", str(ROOT))

BROKERS = [("RabbitMQ", "3.10.8", "amqp-0-9-1", "quorum"), ("RabbitMQ", "3.10.8", "amqp-1.0", "quorum"),
           ("LavinMQ", "2.9.1", "amqp-0-9-1", "classic"), ("Qpid C++", "1.39.0", "amqp-1.0", "classic")]
NEMESES = [("cut",), ("kill",), ("pause", "cut")]
#: (broker index, nemesis index, seed) -> mutation: the broker keeps its promises elsewhere.
MUTATED = {(1, 0, 1): "lose-confirmed", (2, 1, 2): "duplicate-after-failover", (3, 2, 3): "break-atomicity"}
FORMAT = 2  # bump when the generated folders change


def _one(job: tuple[str, int, int, int, int]) -> int:
    from conformance.soak.folders import synthetic_meta, write_run
    from conformance.soak.history import renumber
    from conformance.soak.mutations import MUTATIONS
    from conformance.soak.synthetic import healthy_history

    folder, b, n, seed, ops_per_run = job
    product, version, protocol, qtype = BROKERS[b]
    ops = healthy_history(seed * 100 + b * 10 + n, ops_per_run, fault_every=300 + 200 * n)
    meta = synthetic_meta(ops, product=product, version=version, protocol=protocol, nemesis=list(NEMESES[n]), seed=seed,
                          queue_type=qtype)
    mutation = MUTATED.get((b, n, seed))
    if mutation:
        ops = renumber(MUTATIONS[mutation][0](ops, seed=seed))
        meta.update(history_mutation=mutation, ops=len(ops))
    try:  # json.dumps of 10M ops is most of the generation; orjson writes the same JSON
        import orjson
    except ImportError:
        write_run(folder, ops, meta)
    else:
        Path(folder).mkdir(parents=True, exist_ok=True)
        with open(Path(folder) / "history.jsonl", "wb") as fh:
            fh.write(b"".join(orjson.dumps(op) + b"\n" for op in ops))
        (Path(folder) / "soak.json").write_text(json.dumps(meta, indent=1) + "\n")
    return len(ops)


def generate(root: Path, ops_total: int, runs: int) -> list[str]:
    """``runs`` run folders of about ops_total operations in all (brokers x nemeses x seeds, in
    that order: the first 12 cover every broker and nemesis once); reused when present (the first
    runs of a larger set of the same run size too)."""
    marker = root / "bench.json"
    per = max(1, ops_total // runs)
    want = {"format": FORMAT, "per_run": per, "runs": runs}
    folders = [str(root / f"run-{i:04d}") for i in range(runs)]
    if marker.exists():  # a larger set of the same runs holds this one: its first runs
        had = json.loads(marker.read_text())
        if had.get("format") == FORMAT and had.get("per_run") == per and had.get("runs", 0) >= runs:
            return folders
    jobs = []
    for i, folder in enumerate(folders):
        cell, seed = i % (len(BROKERS) * len(NEMESES)), i // (len(BROKERS) * len(NEMESES))
        jobs.append((folder, cell // len(NEMESES), cell % len(NEMESES), seed, per))
    start = time.perf_counter()
    with ProcessPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        total = sum(pool.map(_one, jobs, chunksize=1))
    print(f"generated {runs} runs, {total:,} ops under {root} in {time.perf_counter() - start:.0f}s (not timed)", flush=True)
    marker.write_text(json.dumps(want) + "\n")
    return folders


def own_cpu(pid: int) -> float:
    """CPU seconds of one process, all its threads (the Spark JVM: reading the files, Arrow to the
    workers, scheduling). Its Python workers are counted by the tasks themselves (``cpu_s``): the
    worker daemon does not wait for its children, so their CPU is in no parent's counters."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, action="append", help="operations per set (repeatable; default 1M and 10M)")
    ap.add_argument("--runs-per-million", type=int, default=12, help="runs per million operations (default 12: ~83k ops a run)")
    ap.add_argument("--root", type=Path, default=Path("/tmp/conformance-soak-bench"))
    ap.add_argument("--master", default="local[*]")
    ap.add_argument("--repeat", type=int, default=1, help="time each set this many times, print the best")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args()
    sets = sorted(args.ops or [1_000_000, 10_000_000])
    largest = sets[-1]
    runs_total = max(1, round(largest / 1e6 * args.runs_per_million))
    folders = generate(args.root, largest, runs_total)

    os.environ["CONFORMANCE_KEEP_SPARK"] = "1"
    from reports.session import spark_session
    from reports.soak import check_runs, matrix

    start = time.perf_counter()
    spark = spark_session(args.master, app="soak-bench")
    print(f"Spark {spark.version} {args.master} started in {time.perf_counter() - start:.1f}s (not timed)", flush=True)
    jvm = spark.sparkContext._gateway.proc.pid
    check_runs(spark, folders[:1])  # the Python workers and the plan, warm: not a figure of the check
    figures = []
    for n in sets:
        chosen = folders[:max(1, round(runs_total * n / largest))]
        best = None
        for _ in range(args.repeat):
            load = os.getloadavg()[0]
            t, c0, d0 = time.perf_counter(), own_cpu(jvm), time.process_time()
            runs = check_runs(spark, chosen)
            s = time.perf_counter() - t
            cpu = own_cpu(jvm) - c0 + time.process_time() - d0   # the JVM and the driver
            if best is None or s < best[0]:
                best = (s, runs, load, cpu, os.getloadavg()[0])
        s, runs, load, cpu, load_end = best
        ops = sum(r["ops"] for r in runs)
        m = matrix(runs)
        bad = [c for c in m["cells"] if c["anomalies"]]
        task_cpu = sum(r["cpu_s"] or 0 for r in runs)
        total = cpu + task_cpu
        fig = {"ops": ops, "runs": len(runs), "seconds": round(s, 2), "ops_per_s": round(ops / s), "load_average": round(load, 1),
               "load_average_end": round(load_end, 1), "jvm_driver_cpu_seconds": round(cpu, 1), "task_cpu_seconds": round(task_cpu, 1),
               "ops_per_cpu_s": round(ops / total), "idle_cores_estimate_s": round(total / (os.cpu_count() or 2), 1),
               "failed_runs": sum(r["verdict"] == "fail" for r in runs), "mutated_runs": sum(bool(r["mutation"]) for r in runs),
               "broken_runs": sum(r["verdict"] == "broken" for r in runs), "anomalous_cells": len(bad)}
        figures.append(fig)
        print(f"{ops:>12,} ops  {len(runs):>4} runs  {s:7.1f}s  {ops / s:>10,.0f} ops/s   load average {load:.1f} -> {load_end:.1f}", flush=True)
        print(f"      CPU {total:.1f}s: tasks (parse + checkers) {task_cpu:.1f}s, Spark JVM + driver {cpu:.1f}s; {ops / total:,.0f} ops/cpu-s; "
              f"on {os.cpu_count()} idle cores about {fig['idle_cores_estimate_s']:.0f}s", flush=True)
        print(f"      {fig['failed_runs']} failing runs, {fig['mutated_runs']} of them mutated on purpose; {fig['broken_runs']} broken", flush=True)
        for r in runs:
            if r["verdict"] != "pass" and not r["mutation"]:
                print(f"  UNEXPECTED {r['verdict']}: {r['folder']} {r['problem'] or ''}")
    if args.json:
        args.json.write_text(json.dumps({"master": args.master, "sets": figures}, indent=2) + "\n")
    spark.stop()


if __name__ == "__main__":
    main()
