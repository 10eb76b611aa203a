"""Time the whole AMQP 0-9-1 catalogue on a launched private node, beside a raw-client floor.

    python bench/catalogue.py                       # one run of the catalogue, --workers 1
    python bench/catalogue.py --workers 1 2 --repeat 3
    python bench/catalogue.py --area ack --repeat 3
    python bench/catalogue.py --selftest            # also the full self-test (minutes)
    python bench/catalogue.py --workers 1 2 --ordinary   # also the ordinary cases alone, on the wall clock

The node is launched once and attached to every run (``--attach-target``): its boot is never timed.
For each worker count it prints the run's wall time (pytest start-up included), the cases per area
with their in-case time, the broker restart/kill time taken from the records' histories (nemesis
events; the runs keep every history), and cases/s. The floor is measured in the same process: a
raw pika client opening as many connections and doing as many round trips as the run's histories
show (one round trip per recorded operation). Load average is printed beside the figures: on a
shared machine they are noisy, so repeat and read medians.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from conformance.runner.results import read_results  # noqa: E402

#: "rabbitmq-local accepting connections after 2.4s" (conformance.kit.case.CaseContext.restart_broker)
RESTART_RE = re.compile(r"accepting connections after ([0-9.]+)s")
#: "... (one restart shared by 7 cases)" (conformance.runner.shared_faults): each case carries 1/7 of it
SHARED_RE = re.compile(r"shared by ([0-9]+) cases")


def pytest_argv(handle: dict[str, str], out: Path, workers: int, areas: list[str], timeout: float, extra: tuple[str, ...] = ()) -> list[str]:
    from conformance.cli import pytest_args

    ns = argparse.Namespace(target="rabbitmq-local", adapter=None, profile=None, requirement=None, area=areas or None,
                            workers=workers, case_timeout=timeout, keep_history=True, verbose=False, mutation=None)
    return pytest_args(ns, out) + ["--attach-target", json.dumps(handle), *extra]


def one_run(handle: dict[str, str], workers: int, areas: list[str], timeout: float, extra: tuple[str, ...] = ()) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-catalogue-") as d:
        out = Path(d)
        env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "pytest", *pytest_argv(handle, out, workers, areas, timeout, extra)],
                              cwd=ROOT, capture_output=True, text=True, env=env)
        wall = time.perf_counter() - start
        recs = list(read_results(out))
        if not recs:
            sys.exit(f"run wrote no records (exit {proc.returncode}):\n{proc.stdout[-3000:]}{proc.stderr[-2000:]}")
    return {"wall": wall, "records": recs, "exit": proc.returncode}


def restart_s(rec: dict[str, Any]) -> float:
    """Seconds the record's history spent in broker restarts/kills (0 for an ordinary case)."""
    total = 0.0
    for ev in rec.get("history") or []:
        if ev.get("actor") == "nemesis":
            m = RESTART_RE.search(ev.get("detail") or "")
            if m:
                shared = SHARED_RE.search(ev.get("detail") or "")
                total += float(m.group(1)) / (int(shared.group(1)) if shared else 1)
    return total


def is_disruptive(rec: dict[str, Any]) -> bool:
    return any(ev.get("actor") == "nemesis" for ev in rec.get("history") or [])


def ops_of(recs: list[dict[str, Any]]) -> tuple[int, int]:
    """(connections, round trips) the run's histories show."""
    conns = trips = 0
    for rec in recs:
        for ev in rec.get("history") or []:
            if ev.get("actor") in ("nemesis", "suite"):
                continue
            trips += 1
            if ev.get("op") in ("connect", "connection"):
                conns += 1
    return conns, trips


def floor(url: str, connections: int, trips: int) -> float:
    """A raw pika client: ``connections`` connect+channel+close, ``trips`` round trips (declare-ok)."""
    import pika

    params = pika.URLParameters(url)
    per = max(1, trips // max(1, connections))
    start = time.perf_counter()
    done = 0
    for _ in range(max(1, connections)):
        conn = pika.BlockingConnection(params)
        ch = conn.channel()
        for _ in range(per):
            if done >= trips:
                break
            ch.queue_declare("bench.floor", durable=False, auto_delete=True)  # one synchronous round trip
            done += 1
        conn.close()
    return time.perf_counter() - start


def summary(run: dict[str, Any], label: str) -> dict[str, Any]:
    recs = [r for r in run["records"] if r.get("attempt", 1) == 1]
    per_area: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in recs:
        per_area[r["area"]].append(r)
    disruptive = [r for r in recs if is_disruptive(r)]
    ordinary = [r for r in recs if not is_disruptive(r)]
    verdicts: dict[str, int] = defaultdict(int)
    for r in recs:
        verdicts[r["verdict"]] += 1
    return {
        "label": label,
        "wall": run["wall"],
        "cases": len(recs),
        "in_case": sum(r["duration_s"] for r in recs),
        "ordinary_n": len(ordinary),
        "ordinary_s": sum(r["duration_s"] for r in ordinary),
        # the wait for the broker lock (a disruptive case held it), apart from in-case time since
        # records carry it (lock_wait_s); before that it was inside duration_s
        "lock_wait_s": sum(r.get("lock_wait_s") or 0.0 for r in ordinary),
        "lock_waiters": sum(1 for r in ordinary if (r.get("lock_wait_s") or 0.0) >= 0.05),
        "disruptive_n": len(disruptive),
        "disruptive_s": sum(r["duration_s"] for r in disruptive),
        "restart_s": sum(restart_s(r) for r in disruptive),
        "restarts": round(sum(sum(1 / (int(m.group(1)) if (m := SHARED_RE.search(ev.get("detail") or "")) else 1)
                                  for ev in r.get("history") or [] if RESTART_RE.search(ev.get("detail") or "")) for r in disruptive)),
        "per_area": {a: (len(rs), sum(r["duration_s"] for r in rs)) for a, rs in sorted(per_area.items())},
        "verdicts": dict(verdicts),
        "verdict_by_case": {r["case_id"]: r["verdict"] for r in recs},
        "ops": ops_of(recs),
        "slowest": sorted(((r["duration_s"], r["case_id"]) for r in ordinary), reverse=True)[:6],
    }


def span_s(recs: list[dict[str, Any]]) -> float:
    """Seconds from the first case's start to the last case's end (records carry their end time and
    duration): the run's wall time without pytest's start-up, collection and the node attach."""
    ends = [float(r["finished_at"]) for r in recs]
    starts = [float(r["finished_at"]) - float(r["duration_s"]) - float(r.get("lock_wait_s") or 0.0) for r in recs]
    return max(ends) - min(starts) if recs else 0.0


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, nargs="+", default=[1])
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--area", action="append", default=[], help="only this area (repeatable; default: the whole catalogue)")
    ap.add_argument("--case-timeout", type=float, default=60.0)
    ap.add_argument("--selftest", action="store_true", help="also time the full self-test on the same node")
    ap.add_argument("--ordinary", action="store_true", help="also time runs of the ordinary cases alone (no restart/kill), per worker count")
    ap.add_argument("--json", type=Path, help="write the figures here too")
    args = ap.parse_args()

    from adapters.rabbitmq.launcher import RabbitMQLocalNode

    node = RabbitMQLocalNode()
    t = time.perf_counter()
    node.start()
    print(f"node boot {time.perf_counter() - t:.1f}s (excluded from every figure)   load {load()}")
    results: list[dict[str, Any]] = []
    ordinary_runs: list[dict[str, Any]] = []
    try:
        handle = node.handle()
        for w in args.workers:
            for i in range(args.repeat):
                before = load()
                s = summary(one_run(handle, w, args.area, args.case_timeout), f"workers={w} #{i + 1}")
                s["load"] = f"{before} -> {load()}"
                results.append(s)
                print(f"\n== {s['label']}  load {s['load']}  verdicts {s['verdicts']}")
                print(f"   wall {s['wall']:.1f}s for {s['cases']} cases = {s['cases'] / s['wall']:.1f} cases/s "
                      f"(in-case sum {s['in_case']:.1f}s)")
                print(f"   ordinary   {s['ordinary_n']:>4} cases {s['ordinary_s']:7.1f}s in-case  "
                      f"{s['ordinary_n'] / max(s['ordinary_s'], 1e-9):6.1f} cases/s; "
                      f"{s['lock_waiters']} waited >= 50 ms for the broker lock, {s['lock_wait_s']:.1f}s in all")
                print(f"   disruptive {s['disruptive_n']:>4} cases {s['disruptive_s']:7.1f}s in-case, of which "
                      f"{s['restart_s']:.1f}s in {s['restarts']} broker restarts/kills")
                for area, (n, secs) in s["per_area"].items():
                    print(f"     {area:<10} {n:>4} cases {secs:7.2f}s  {n / max(secs, 1e-9):6.1f} cases/s")
                print("   slowest ordinary: " + ", ".join(f"{cid.split('::', 1)[1]} {d:.2f}s" for d, cid in s["slowest"]))
        # the floor: as many connections and round trips as the last run's histories show
        conns, trips = results[-1]["ops"]
        conns, trips = max(conns, results[-1]["cases"]), max(trips, results[-1]["cases"])
        f = floor(node.url, conns, trips)
        print(f"\nfloor: raw pika, {conns} connections and {trips} round trips: {f:.2f}s  load {load()}")
        for s in results:
            print(f"   {s['label']}: wall / floor = {s['wall'] / f:.1f}x; ordinary in-case / floor = {s['ordinary_s'] / f:.1f}x")
        if args.ordinary:
            # the throughput target of ordinary (non-restart) cases, 30 cases/s: a run of them alone (--disruptive exclude),
            # timed on the wall clock from the first case's start to the last one's end, so the
            # figure under two workers is the concurrency's, not a sum of per-process times
            print("\nordinary cases alone (--disruptive exclude), wall clock from first case start to last case end:")
            for w in args.workers:
                for i in range(args.repeat):
                    before = load()
                    run = one_run(handle, w, args.area, args.case_timeout, ("--disruptive", "exclude"))
                    recs, span = run["records"], span_s(run["records"])
                    o = {"label": f"ordinary workers={w} #{i + 1}", "cases": len(recs), "wall": run["wall"], "span": span,
                         "verdicts": dict(sorted(Counter(r["verdict"] for r in recs).items())),
                         "load": f"{before} -> {load()}"}
                    ordinary_runs.append(o)
                    print(f"   workers={w} #{i + 1}: {o['cases']} cases in {span:.2f}s = {o['cases'] / max(span, 1e-9):.1f} cases/s "
                          f"(wall with pytest start-up {run['wall']:.1f}s)  verdicts {o['verdicts']}  load {o['load']}")
        if len({json.dumps(s["verdict_by_case"], sort_keys=True) for s in results}) > 1:
            print("   WARNING: runs disagree on some case's verdict (see --json)")
        if args.selftest:
            t = time.perf_counter()
            with tempfile.TemporaryDirectory(prefix="bench-selftest-") as d:
                env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
                proc = subprocess.run([sys.executable, "-m", "conformance.cli", "selftest", "--target", "rabbitmq-local", "--out", d],
                                      cwd=ROOT, capture_output=True, text=True, env=env)
            print(f"\nself-test (own node, boot included): {time.perf_counter() - t:.1f}s exit {proc.returncode}  load {load()}")
        if args.json:
            args.json.write_text(json.dumps({"results": results, "floor_s": f, "ordinary_alone": ordinary_runs}, indent=1))
    finally:
        node.stop()


if __name__ == "__main__":
    main()
