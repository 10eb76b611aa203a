"""Publish/consume throughput through the fault proxy vs. straight to the broker, same run.

Usage: python3 bench/proxy_throughput.py [--messages N] [--size BYTES] [--url amqp://...]
Without --url a private RabbitMQ node is launched. Prints msgs/s straight to the broker, through
the isolated proxy (its own process: what cases use) and through the in-thread proxy (sharing the
client's GIL), and each proxy's cost. Runs are interleaved (direct, isolated, thread, direct, ...)
and the best of each is kept, so a noisy neighbour hurts all sides alike.
"""

from __future__ import annotations

import argparse
import time
import uuid

import pika

from adapters.rabbitmq.launcher import RabbitMQLocalNode
from conformance.nemesis.proxy import FaultProxy
from conformance.nemesis.proxy_isolated import IsolatedFaultProxy


def run(url: str, n: int, size: int) -> float:
    conn = pika.BlockingConnection(pika.URLParameters(url))
    ch = conn.channel()
    q = f"bench-{uuid.uuid4().hex[:8]}"
    ch.queue_declare(q, auto_delete=True)
    body = b"x" * size
    start = time.perf_counter()
    for _ in range(n):
        ch.basic_publish("", q, body)
    ch.basic_qos(prefetch_count=500)
    got = 0
    for method, _props, _body in ch.consume(q, inactivity_timeout=10):
        if method is None:
            raise SystemExit("bench: deliveries stopped")
        got += 1
        if got % 250 == 0 or got == n:
            ch.basic_ack(method.delivery_tag, multiple=True)
        if got == n:
            break
    elapsed = time.perf_counter() - start
    ch.cancel()
    conn.close()
    return n / elapsed


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=20000)
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--url")
    args = ap.parse_args()
    node = None
    url = args.url
    if url is None:
        node = RabbitMQLocalNode()
        node.start()
        url = node.url
    try:
        direct, isolated, threaded = [], [], []
        with IsolatedFaultProxy.for_url(url, trace_limit=1000) as iso, FaultProxy.for_url(url, trace_limit=1000) as thr:
            for _ in range(args.rounds):
                direct.append(run(url, args.messages, args.size))
                isolated.append(run(iso.url(url), args.messages, args.size))
                threaded.append(run(thr.url(url), args.messages, args.size))
            frames = iso.trace.total, thr.trace.total
        d = max(direct)
        print(f"messages={args.messages} size={args.size}B rounds={args.rounds}")
        print(f"direct:          {d:10.0f} msg/s (publish+consume)")
        for label, runs, n in (("isolated proxy", isolated, frames[0]), ("in-thread proxy", threaded, frames[1])):
            p = max(runs)
            print(f"{label + ':':<16} {p:10.0f} msg/s  ratio {p / d:.3f}, cost {100 * (1 - p / d):5.1f}% ({n} frames traced)")
    finally:
        if node is not None:
            node.stop()


if __name__ == "__main__":
    main()
