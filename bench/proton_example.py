"""Time the whole catalogue over AMQP 1.0 against the Qpid Proton example broker (goal: under 60 s).

    python bench/proton_example.py                 # launches the broker (--target proton-example)
    python bench/proton_example.py --workers 1 2   # per worker count

Prints, per worker count: wall time of the run (process start to exit, broker launch and pytest
start-up included), the summed in-case time, the verdict counts, and the slowest cases with their
duration (where the time goes).
"""

from __future__ import annotations

import argparse
import collections
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from conformance.runner.results import read_results  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, nargs="+", default=[1])
    ap.add_argument("--slowest", type=int, default=8)
    args = ap.parse_args()
    for workers in args.workers:
        with tempfile.TemporaryDirectory() as d:
            start = time.perf_counter()
            proc = subprocess.run([sys.executable, "-m", "conformance.cli", "run", "--target", "proton-example", "--adapter",
                                   "proton", "--out", d, "--workers", str(workers)], cwd=ROOT, capture_output=True, text=True)
            wall = time.perf_counter() - start
            if proc.returncode not in (0, 1):
                sys.exit(f"run failed (exit {proc.returncode}):\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
            recs = list(read_results(Path(d)))
        counts = collections.Counter(r["verdict"] for r in recs)
        print(f"workers={workers}: wall {wall:.1f}s, in-case {sum(r['duration_s'] for r in recs):.1f}s, "
              f"{len(recs)} cases: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
        for r in sorted(recs, key=lambda r: -r["duration_s"])[: args.slowest]:
            print(f"  {r['duration_s']:6.2f}s {r['verdict']:<11} {r['case_id']}")


if __name__ == "__main__":
    main()
