"""Time the acknowledgement & redelivery area against a running node and print cases/second.

    python bench/ack_area.py                      # launches a private node (boot not timed)
    python bench/ack_area.py --target amqp://...  # an already running broker
    python bench/ack_area.py --repeat 5 --workers 1 2

Reports, per worker count: the run's wall time (process start to exit, including pytest start-up),
the summed in-case time from the result records, and cases/second for both.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from conformance.runner.results import read_results  # noqa: E402


def one_run(url: str, workers: int, area: str) -> tuple[float, float, int]:
    with tempfile.TemporaryDirectory() as d:
        start = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", "conformance.cli", "run", "--target", url, "--area", area, "--out", d, "--workers", str(workers)],
            cwd=ROOT, capture_output=True, text=True,
        )
        wall = time.perf_counter() - start
        if proc.returncode != 0:
            sys.exit(f"run failed (exit {proc.returncode}):\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
        recs = list(read_results(Path(d)))
        return wall, sum(r["duration_s"] for r in recs), len(recs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", help="broker URL; default: launch a private RabbitMQ node")
    ap.add_argument("--area", default="ack")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    args = ap.parse_args()
    node = None
    url = args.target
    if url is None:
        from adapters.rabbitmq.launcher import RabbitMQLocalNode

        node = RabbitMQLocalNode()
        node.start()
        url = node.url
    try:
        one_run(url, 1, args.area)  # warm-up: first queue declarations, module imports
        print(f"{'workers':>7} {'cases':>5} {'wall s (median)':>16} {'in-case s':>10} {'cases/s wall':>13} {'cases/s in-case':>16}")
        for w in args.workers:
            runs = [one_run(url, w, args.area) for _ in range(args.repeat)]
            wall = statistics.median(r[0] for r in runs)
            in_case = statistics.median(r[1] for r in runs)
            n = runs[0][2]
            print(f"{w:>7} {n:>5} {wall:>16.2f} {in_case:>10.2f} {n / wall:>13.1f} {n / in_case:>16.1f}")
    finally:
        if node is not None:
            node.stop()


if __name__ == "__main__":
    main()
