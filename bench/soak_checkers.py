"""Time the soak checkers on a synthetic history and print operations/second.

    python bench/soak_checkers.py                  # 1,000,000 operations of a healthy model broker
    python bench/soak_checkers.py --ops 200000 --repeat 5 --mutation lose-confirmed

Generates the history with conformance.soak.synthetic (not timed), optionally mutates it, then
times run_all (ordered, requeue counts on: every checker judges) and each checker alone, the best
of --repeat runs, and prints the verdicts (a healthy history must pass every checker).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from conformance.soak.checkers import CHECKERS, CheckOptions, run_all
from conformance.soak.mutations import MUTATIONS
from conformance.soak.synthetic import healthy_history


def best(fn, repeat: int) -> tuple[float, float]:
    """The best wall and CPU seconds of ``repeat`` calls (CPU time is what a loaded machine's
    other processes do not add to)."""
    wall, cpu = [], []
    for _ in range(repeat):
        w, c = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - w)
        cpu.append(time.process_time() - c)
    return min(wall), min(cpu)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, default=1_000_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--mutation", choices=sorted(MUTATIONS))
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args()
    start = time.perf_counter()
    ops = healthy_history(args.seed, args.ops)
    if args.mutation:
        ops = MUTATIONS[args.mutation][0](ops, seed=args.seed)
    generated = time.perf_counter() - start
    options = CheckOptions(ordered=True, requeue_counts=True)
    n = len(ops)
    print(f"history: {n:,} ops (generated in {generated:.1f}s, not timed){', mutation ' + args.mutation if args.mutation else ''}")
    figures = {"ops": n, "seed": args.seed, "mutation": args.mutation, "checkers": {}}
    for name, check in CHECKERS.items():
        s, c = best(lambda check=check: check(ops, options), args.repeat)
        figures["checkers"][name] = {"seconds": round(s, 3), "cpu_seconds": round(c, 3), "ops_per_s": round(n / s),
                                     "ops_per_cpu_s": round(n / c)}
        print(f"  {name:<11} {s:7.2f}s  {n / s:>12,.0f} ops/s   cpu {c:6.2f}s  {n / c:>12,.0f} ops/cpu-s")
    s, c = best(lambda: run_all(ops, options), args.repeat)
    results = run_all(ops, options)
    figures.update(seconds=round(s, 3), cpu_seconds=round(c, 3), ops_per_s=round(n / s), ops_per_cpu_s=round(n / c),
                   verdicts={k: r.verdict for k, r in results.items()},
                   anomalies={k: r.counts["anomalies"] for k, r in results.items()})
    print(f"  {'run_all':<11} {s:7.2f}s  {n / s:>12,.0f} ops/s   cpu {c:6.2f}s  {n / c:>12,.0f} ops/cpu-s"
          f"   (best of {args.repeat}; load average {os.getloadavg()[0]:.1f})")
    print("verdicts: " + ", ".join(f"{k} {r.verdict} ({r.counts['anomalies']} anomalies)" for k, r in results.items()))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
