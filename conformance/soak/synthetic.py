"""A healthy model broker's soak history, seeded: what the checkers must pass, and what the
mutations (``mutations``) break.

One queue, producers in confirm, tx and plain mode, manual-ack consumers with a prefetch, nacks
with requeue, and a nemesis that cuts a consumer's or a producer's connection and heals it. The
model keeps every promise the checkers judge and exercises every allowance: an ack lost with its
connection (the message comes back: a duplicate after an unproven ack), unknown confirms and
unknown commits that went either way, plain publishes lost in a cut, rolled-back transactions,
redeliveries flagged with growing delivery counts, and a final drain after every consumer cancels.
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass, field
from typing import Any

MODES = ("confirm", "tx", "plain")


@dataclass
class _Producer:
    name: str
    mode: str
    seq: int = 0
    txn_no: int = 0
    txn_ids: list[str] = field(default_factory=list)

    @property
    def txn(self) -> str:
        return f"{self.name}-t{self.txn_no}"


@dataclass
class _Consumer:
    name: str
    unacked: deque[str] = field(default_factory=deque)
    #: The id of its last ack no later op of it has followed yet (the broker may not have it).
    unproven_ack: str | None = None


class _Model:
    def __init__(self, seed: int, producers: tuple[str, ...], consumers: int, prefetch: int,
                 with_delivery_count: bool) -> None:
        self.rng = random.Random(seed)
        self.ops: list[dict[str, Any]] = []
        self.time = 0
        self.queue: deque[str] = deque()
        self.redelivered: set[str] = set()
        self.delivered_times: dict[str, int] = {}
        self.producers = [_Producer(f"p{i + 1}", mode) for i, mode in enumerate(producers)]
        self.consumers = [_Consumer(f"c{i + 1}") for i in range(consumers)]
        self.prefetch = prefetch
        self.with_delivery_count = with_delivery_count

    def emit(self, process: str, type: str, f: str, value: dict[str, Any]) -> None:
        self.time += self.rng.randint(1_000, 50_000)
        self.ops.append({"index": len(self.ops), "time_ns": self.time, "process": process, "type": type, "f": f, "value": value})

    # --- producers ---------------------------------------------------------------------------

    def _next_id(self, p: _Producer) -> tuple[str, dict[str, Any]]:
        p.seq += 1
        mid = f"{p.name}-{p.seq}"
        value: dict[str, Any] = {"id": mid, "producer": p.name, "seq": p.seq, "mode": p.mode}
        if p.mode == "tx":
            value["txn"] = p.txn
        return mid, value

    def publish(self, p: _Producer, *, cut: bool = False) -> None:
        mid, value = self._next_id(p)
        self.emit(p.name, "invoke", "publish", value)
        if p.mode == "confirm":
            if cut:                             # the confirm was lost with the connection
                if self.rng.random() < 0.5:
                    self.queue.append(mid)
                self.emit(p.name, "unknown", "publish", value)
            elif self.rng.random() < 0.002:     # nacked: the broker will not deliver it
                self.emit(p.name, "fail", "publish", value)
            else:
                self.queue.append(mid)
                self.emit(p.name, "ok", "publish", value)
        elif p.mode == "plain":
            if not cut:                         # a plain publish lost in a cut: allowed
                self.queue.append(mid)
            self.emit(p.name, "ok", "publish", value)
        else:
            self.emit(p.name, "ok", "publish", value)
            p.txn_ids.append(mid)
            if len(p.txn_ids) >= self.rng.randint(2, 5):
                self.end_txn(p)

    def end_txn(self, p: _Producer, *, cut: bool = False) -> None:
        value = {"txn": p.txn, "ids": list(p.txn_ids)}
        if cut:                                 # the commit was in flight: all or none
            self.emit(p.name, "invoke", "commit", value)
            if self.rng.random() < 0.5:
                self.queue.extend(p.txn_ids)
            self.emit(p.name, "unknown", "commit", value)
        elif self.rng.random() < 0.85:
            self.emit(p.name, "invoke", "commit", value)
            self.queue.extend(p.txn_ids)
            self.emit(p.name, "ok", "commit", value)
        else:
            self.emit(p.name, "invoke", "rollback", value)
            self.emit(p.name, "ok", "rollback", value)
        p.txn_ids = []
        p.txn_no += 1

    # --- consumers ---------------------------------------------------------------------------

    def deliver(self, c: _Consumer, process: str | None = None, ack_mode: str = "manual") -> None:
        mid = self.queue.popleft()
        n = self.delivered_times.get(mid, 0)
        self.delivered_times[mid] = n + 1
        self.emit(process or c.name, "ok", "deliver", {
            "id": mid, "consumer": c.name, "redelivered": mid in self.redelivered,
            "delivery_count": n if self.with_delivery_count else None, "ack_mode": ack_mode})
        if ack_mode == "manual":
            c.unacked.append(mid)

    def settle(self, c: _Consumer, f: str) -> None:
        mid = c.unacked.popleft()
        value: dict[str, Any] = {"id": mid, "consumer": c.name}
        if f == "nack":
            value["requeue"] = True
        self.emit(c.name, "invoke", f, value)
        self.emit(c.name, "ok", f, value)
        c.unproven_ack = mid if f == "ack" else None
        if f == "nack":
            self.requeue([mid])

    def requeue(self, ids: list[str]) -> None:
        self.redelivered.update(ids)
        self.queue.extendleft(reversed(ids))

    def subscribe(self, c: _Consumer) -> None:
        value = {"consumer": c.name, "prefetch": self.prefetch, "ack_mode": "manual"}
        self.emit(c.name, "invoke", "consume", value)
        self.emit(c.name, "ok", "consume", value)

    # --- nemesis -----------------------------------------------------------------------------

    def fault(self) -> None:
        if self.rng.random() < 0.6:
            c = self.rng.choice(self.consumers)
            self.emit("nemesis", "invoke", "fault", {"kind": "cut", "target": c.name, "detail": "consumer connection"})
            back = list(c.unacked)
            if self.queue and self.rng.random() < 0.3:
                # the broker had sent the queue's head to it, lost in the cut before it arrived:
                # its first delivery seen comes flagged, with a count that includes the lost one
                head = self.queue[0]
                self.redelivered.add(head)
                self.delivered_times[head] = self.delivered_times.get(head, 0) + 1
            if c.unproven_ack is not None and self.rng.random() < 0.5:
                back.insert(0, c.unproven_ack)  # its last ack never reached the broker
            c.unacked.clear()
            c.unproven_ack = None
            self.requeue(back)
            self.emit("nemesis", "ok", "fault", {"kind": "cut", "target": c.name, "detail": "consumer connection"})
            self.emit("nemesis", "ok", "heal", {"kind": "cut", "target": c.name, "detail": "reconnected"})
            self.subscribe(c)
        else:
            p = self.rng.choice(self.producers)
            self.emit("nemesis", "invoke", "fault", {"kind": "cut", "target": p.name, "detail": "producer connection"})
            self.emit("nemesis", "ok", "fault", {"kind": "cut", "target": p.name, "detail": "producer connection"})
            if p.mode == "tx":
                if p.txn_ids:
                    self.end_txn(p, cut=True)
            else:
                self.publish(p, cut=True)
            self.emit("nemesis", "ok", "heal", {"kind": "cut", "target": p.name, "detail": "reconnected"})

    def step(self, fault_every: int) -> None:
        r = self.rng.random()
        if r < 1 / fault_every * 5:
            self.fault()
        elif r < 0.45:
            self.publish(self.rng.choice(self.producers))
        else:
            c = self.rng.choice(self.consumers)
            if self.queue and len(c.unacked) < self.prefetch and (r < 0.8 or not c.unacked):
                self.deliver(c)
            elif c.unacked:
                self.settle(c, "nack" if self.rng.random() < 0.03 else "ack")

    def drain(self) -> None:
        for p in self.producers:
            if p.txn_ids:
                self.end_txn(p)
        for c in self.consumers:
            value = {"consumer": c.name, "prefetch": self.prefetch, "ack_mode": "manual"}
            self.emit(c.name, "invoke", "cancel", value)
            self.emit(c.name, "ok", "cancel", value)
            self.requeue(list(c.unacked))       # its channel closed: the unacked go back
            c.unacked.clear()
        self.emit("drain", "invoke", "drain", {"consumer": "drain"})
        sink = _Consumer("drain")
        while self.queue:
            self.deliver(sink, "drain", "auto")
        self.emit("drain", "ok", "drain", {"consumer": "drain"})


def healthy_history(seed: int = 0, ops: int = 10_000, *, producers: tuple[str, ...] = MODES, consumers: int = 3,
                    prefetch: int = 8, fault_every: int = 500, with_delivery_count: bool = True) -> list[dict[str, Any]]:
    """About ``ops`` operations (the drain comes on top) of a broker that keeps every promise.
    A fault comes about every ``fault_every`` operations."""
    model = _Model(seed, producers, consumers, prefetch, with_delivery_count)
    for c in model.consumers:
        model.subscribe(c)
    while len(model.ops) < ops:
        model.step(fault_every)
    model.drain()
    return model.ops
