"""Publish/consume throughput through the fault proxy vs. straight to the broker, same run.

Usage: python3 bench/proxy_throughput.py [--messages N] [--size BYTES] [--url amqp://...]
Without --url a private RabbitMQ node is launched. Prints msgs/s both ways and the proxy's cost.
Runs are interleaved (direct, proxy, direct, proxy, ...) and the best of each is kept, so a noisy
neighbour hurts both sides alike.
"""

from __future__ import annotations

import argparse
import time
import uuid

import pika

from adapters.rabbitmq.launcher import RabbitMQLocalNode
from conformance.proxy import FaultProxy


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
        direct, proxied = [], []
        with FaultProxy.for_url(url, trace_limit=1000) as proxy:
            purl = proxy.url(url)
            for _ in range(args.rounds):
                direct.append(run(url, args.messages, args.size))
                proxied.append(run(purl, args.messages, args.size))
            frames = proxy.trace.total
        d, p = max(direct), max(proxied)
        print(f"messages={args.messages} size={args.size}B rounds={args.rounds}")
        print(f"direct:  {d:10.0f} msg/s (publish+consume)")
        print(f"proxy:   {p:10.0f} msg/s ({frames} frames traced)")
        print(f"ratio proxy/direct = {p / d:.3f}  (proxy cost {100 * (1 - p / d):.1f}% of direct throughput)")
    finally:
        if node is not None:
            node.stop()


if __name__ == "__main__":
    main()
