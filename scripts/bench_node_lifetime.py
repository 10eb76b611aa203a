"""Benchmark: how long a private RabbitMQ node takes to start and stop, how long its watchdog takes to
start, and how long after a SIGKILL of the launching process the node is entirely gone.

    PYTHONPATH=. python3 scripts/bench_node_lifetime.py --runs 3

Against a checkout without :mod:`conformance.supervisor` it measures start and stop only, which is
how the before/after figures of the watchdog were taken. Prints one line per figure.
"""

from __future__ import annotations

import argparse
import signal
import statistics
import time

from adapters.rabbitmq.launcher import RabbitMQLocalNode


def timed(fn: object) -> float:
    start = time.monotonic()
    fn()  # type: ignore[operator]
    return time.monotonic() - start


def summary(name: str, values: list[float]) -> None:
    print(f"{name}: median {statistics.median(values):.3f}s  min {min(values):.3f}s  max {max(values):.3f}s  (n={len(values)})")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    starts, stops = [], []
    for _ in range(args.runs):
        node = RabbitMQLocalNode(plugins=())
        starts.append(timed(node.start))
        stops.append(timed(node.stop))
    summary("node start", starts)
    summary("node stop", stops)
    try:
        from conformance.supervisor import Supervisor
        from tests.nemesis.test_node_lifetime import start_runner, wait_nothing_left
    except ImportError:
        print("no conformance.supervisor in this checkout: watchdog figures skipped")
        return 0
    sups = []
    for i in range(5):
        begin = time.monotonic()
        sup = Supervisor.start(f"bench{i}{time.monotonic_ns()}", None)
        sups.append(time.monotonic() - begin)
        sup.stop()
    summary("watchdog start", sups)
    gone = []
    for _ in range(args.runs):
        runner, state = start_runner("block")
        killed_at = time.monotonic()
        runner.send_signal(signal.SIGKILL)
        runner.wait()  # not communicate(): the watchdog shares the runner's stderr until it is done
        _, left = wait_nothing_left(state["token"], state["ports"], state["dir"])
        gone.append(time.monotonic() - killed_at)
        runner.communicate()
        if left:
            print(f"LEFT after SIGKILL: {left}")
            return 1
    summary("runner SIGKILL -> node, ports and dir gone", gone)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
