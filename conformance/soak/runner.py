"""A soak run: concurrent producers and consumers on one durable queue while a nemesis fires its
schedule, every operation recorded in the history (docs/soak.md), then a drain and the checkers.

Clients speak the neutral API (conformance.api) through the adapter the target's URL picks, one
connection per client thread. Each client reconnects after a connection loss; every wait has a
deadline: a client waits for the nemesis's heal (an event) or for a connect to succeed, never for
time to pass. The workload's choices (transaction sizes, nack and cancel decisions) come from a
random generator seeded by the run's seed and the client's name; the schedule is made before the
run (conformance.soak.schedule).
"""

from __future__ import annotations

import contextlib
import json
import random
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from conformance.api import AckMode, Adapter, Connection, Consumer, QueueSpec, Session
from conformance.errors import AdapterError, ChannelClosed, ConnectionLost, OperationTimeout, PublishNotConfirmed, Unsupported
from conformance.soak.history import HistoryWriter

MODES = ("confirm", "tx", "plain")
#: How long one connect may take, and each operation after it (a paused broker answers nothing).
CONNECT_S, OP_S = 5.0, 5.0
#: How long a client keeps trying to reconnect before it gives up (the node boots within it).
RECONNECT_S = 90.0
#: A consumer's wait for one delivery before it looks at the stop flag again.
POLL_S = 0.25
#: Acks sent since the last round trip are proven (ok) by the next one, made after this many.
SYNC_EVERY = 8
#: The drain stops when the queue is empty, or at this deadline.
DRAIN_S = 60.0
#: Bound on a cluster being whole again before the drain.
WHOLE_S = 120.0


@dataclass
class SoakOptions:
    seed: int = 1
    seconds: float | None = None
    ops: int | None = None
    producers: int = 3
    consumers: int = 2
    modes: tuple[str, ...] = MODES
    prefetch: int = 10
    nack_rate: float = 0.05
    cancel_rate: float = 0.01
    rollback_rate: float = 0.1
    max_txn: int = 5
    queue_type: str | None = None
    nemesis: tuple[str, ...] = ()
    schedule: list[dict[str, Any]] = field(default_factory=list)
    #: Where the seeded schedule may place faults when the run is bounded by ops, not seconds.
    horizon_s: float = 10.0
    ordered: bool = False
    requeue_counts: bool = False
    #: A soak mutation (conformance.soak.wire_mutations): the proxy makes the broker wrong on purpose.
    mutation: str | None = None

    def record(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("schedule")
        d["modes"] = list(self.modes)
        d["nemesis"] = list(self.nemesis)
        return d


@dataclass
class SoakResult:
    queue: str
    queue_type: str
    product: str
    version: str
    protocol: str
    elapsed_s: float
    counts: dict[str, int]
    fired: list[dict[str, Any]]
    drain: dict[str, Any]
    problems: list[str]


class Soak:
    """One run's clients, nemesis and history. ``target`` is started already; ``url`` is where the
    clients connect (the fault proxy's when a cut is scheduled)."""

    def __init__(self, adapter: Adapter, target: Any, url: str, spec: QueueSpec, options: SoakOptions, history: HistoryWriter,
                 cut_all: Callable[[], None] | None = None, urls: list[str] | None = None,
                 kinds: dict[str, Any] | None = None) -> None:
        self.adapter = adapter
        self.target = target
        self.url = url
        #: Every node's URL on a cluster (clients spread over them and move to the next on a loss).
        self.urls = list(urls or [url])
        self._cursor: dict[str, int] = {}
        #: The fault kind each schedule kind names on this target (``kill`` is a node kill on a cluster).
        self.kinds = kinds or {}
        self.spec = spec
        self.o = options
        self.h = history
        self.cut_all = cut_all
        self.stop_producing = threading.Event()
        self.stop_consuming = threading.Event()
        #: Clear while a broker fault is in progress: clients wait on it (with a deadline) to reconnect.
        self.healthy = threading.Event()
        self.healthy.set()
        self.lock = threading.Lock()
        self.published = 0
        self.problems: list[str] = []
        self.fired: list[dict[str, Any]] = []
        #: Producers whose mode the target refused (confirm, tx), with its words: they publish nothing.
        self.refused_modes: dict[str, str] = {}
        #: Subscriptions opened so far, by client (each one a link: see :meth:`_link`).
        self.links: dict[str, int] = {}
        self.t0 = time.monotonic()

    # -- shared ---------------------------------------------------------------------------------

    def rec(self, process: str, type_: str, f: str, value: dict[str, Any]) -> int:
        return self.h.record(process, type_, f, value)

    def problem(self, text: str) -> None:
        with self.lock:
            self.problems.append(text)

    def take_publish(self) -> bool:
        """One more publish allowed (``--ops`` counts publishes); False once the run is over."""
        if self.stop_producing.is_set():
            return False
        with self.lock:
            if self.o.ops is not None and self.published >= self.o.ops:
                self.stop_producing.set()
                return False
            self.published += 1
            return True

    def connect(self, name: str, stop: threading.Event) -> tuple[Connection, Session] | None:
        """A connection and a session, retried until it works, ``stop`` is set or the deadline passes."""
        end = time.monotonic() + RECONNECT_S
        last = ""
        while time.monotonic() < end:
            if stop.is_set() and name != "drain":
                return None
            self.healthy.wait(max(0.0, end - time.monotonic()))  # a broker fault in progress: its heal
            url = self._next_url(name)
            try:
                conn = self.adapter.connect(url, timeout=CONNECT_S, name=f"soak {name}", op_timeout=OP_S)
                return conn, conn.session()
            except (ConnectionLost, AdapterError, OSError) as exc:
                last = str(exc)
            stop.wait(0.1)  # polling a condition (the broker accepts a connection) with a deadline
        self.problem(f"{name}: could not reconnect within {RECONNECT_S:.0f}s: {last}")
        return None

    def _next_url(self, name: str) -> str:
        """The URL of ``name``'s next connect: on a cluster each client starts on a node of its own
        (p1, p2, p3 on nodes 1, 2, 3; c1, c2 on nodes 2, 3) and every later connect, after a loss
        or a refused attempt, moves on to the next node."""
        n = len(self.urls)
        if name not in self._cursor:
            digits = "".join(ch for ch in name if ch.isdigit())
            self._cursor[name] = (int(digits or 1) - 1 + (1 if name.startswith("c") else 0)) % n
        else:
            self._cursor[name] = (self._cursor[name] + 1) % n
        return self.urls[self._cursor[name]]

    # -- producers ------------------------------------------------------------------------------

    def producer(self, name: str, mode: str) -> None:
        rng = random.Random(f"{self.o.seed}:{name}")
        seq = txn_no = 0
        while not self.stop_producing.is_set():
            got = self.connect(name, self.stop_producing)
            if got is None:
                return
            conn, s = got
            try:
                if mode == "confirm":
                    s.enable_confirms()
                elif mode == "tx":
                    s.select_tx()
            except Unsupported as exc:
                # the broker refused the mode cleanly (an AMQP 1.0 node without a transaction coordinator):
                # the producer stops, and soak.json says why, instead of reconnecting forever
                with self.lock:
                    self.refused_modes[name] = f"{mode}: {exc}"
                _close(conn)
                return
            except (ConnectionLost, ChannelClosed, AdapterError):
                _close(conn)
                continue
            try:
                while True:
                    if mode != "tx":
                        if not self.take_publish():
                            return
                        seq += 1
                        if not self._publish(name, s, seq, mode, None):
                            break
                        if mode == "plain" and seq % SYNC_EVERY == 0:
                            try:  # a round trip now and then: plain publishes keep the broker's pace, not the socket's
                                s.sync()
                            except Exception:  # noqa: BLE001 - the connection went: the next publish finds out and reconnects
                                break
                        continue
                    txn_no += 1
                    txn = f"{name}-t{txn_no}"
                    ids: list[str] = []
                    lost = False
                    for _ in range(rng.randint(1, self.o.max_txn)):
                        if not self.take_publish():
                            break
                        seq += 1
                        ids.append(f"{name}-{seq}")
                        if not self._publish(name, s, seq, mode, txn):
                            lost = True
                            break
                    if lost:
                        break
                    if not ids:
                        return
                    f = "rollback" if rng.random() < self.o.rollback_rate else "commit"
                    self.rec(name, "invoke", f, {"txn": txn, "ids": ids})
                    try:
                        s.rollback() if f == "rollback" else s.commit()
                        self.rec(name, "ok", f, {"txn": txn, "ids": ids})
                    except ChannelClosed as exc:
                        # the broker's refusal closes the channel; a connection close (320 at a shutdown) says nothing of the commit
                        self.rec(name, "unknown" if exc.hard else "fail", f, {"txn": txn, "ids": ids, "error": str(exc)})
                        break
                    except Exception as exc:  # noqa: BLE001 - the connection is gone or the client broke: the outcome cannot be known
                        self.rec(name, "unknown", f, {"txn": txn, "ids": ids, "error": _err(exc)})
                        break
            finally:
                _close(conn)

    def _publish(self, name: str, s: Session, seq: int, mode: str, txn: str | None) -> bool:
        """One publish recorded invoke then its outcome; False when the connection is gone."""
        value: dict[str, Any] = {"id": f"{name}-{seq}", "producer": name, "seq": seq, "mode": mode}
        if txn:
            value["txn"] = txn
        self.rec(name, "invoke", "publish", value)
        try:
            s.publish(self.spec.name, f"{name}-{seq}".encode(), message_id=value["id"], persistent=True)
        except PublishNotConfirmed as exc:
            self.rec(name, "fail", "publish", {**value, "error": str(exc)})
            return True
        except Exception as exc:  # noqa: BLE001 - the connection is gone or the client broke: the outcome cannot be known
            self.rec(name, "unknown", "publish", {**value, "error": _err(exc)})
            return False
        self.rec(name, "ok", "publish", value)
        return True

    # -- consumers ------------------------------------------------------------------------------

    def consumer(self, name: str) -> None:
        rng = random.Random(f"{self.o.seed}:{name}")
        while not self.stop_consuming.is_set():
            got = self.connect(name, self.stop_consuming)
            if got is None:
                return
            conn, s = got
            pending: list[tuple[str, dict[str, Any]]] = []  # acks and nacks sent, not yet proven by a round trip
            try:
                self._consume_on(name, s, rng, pending)
            except Exception as exc:  # noqa: BLE001 - the connection is gone or the client broke: what was in flight is unknown
                for f, v in pending:
                    self.rec(name, "unknown", f, {**v, "error": _err(exc)})
                pending.clear()
                if not isinstance(exc, (ConnectionLost, ChannelClosed, AdapterError)):
                    self.problem(f"{name}: {_err(exc)}")
            finally:
                _close(conn)

    def _settle_proven(self, name: str, s: Session, pending: list[tuple[str, dict[str, Any]]]) -> None:
        if not pending:
            return
        s.sync()
        for f, v in pending:
            self.rec(name, "ok", f, v)
        pending.clear()

    def _link(self, name: str) -> str:
        """A name for the subscription ``name`` opens now (an AMQP 1.0 link, a 0-9-1 consumer tag): the
        checkers tell a redelivery to another link (AMQP 1.0 first-acquirer) from one to the same."""
        with self.lock:
            self.links[name] = self.links.get(name, 0) + 1
            return f"{name}#{self.links[name]}"

    def _subscribe(self, name: str, s: Session) -> tuple[Consumer, str]:
        v: dict[str, Any] = {"consumer": name, "prefetch": self.o.prefetch, "ack_mode": "manual"}
        if len(self.urls) > 1:  # on a cluster: the node (1..N) the consumer's connection is on
            v["node"] = self._cursor.get(name, 0) + 1
        self.rec(name, "invoke", "consume", v)
        try:
            c = s.consume(self.spec.name, ack_mode=AckMode.MANUAL, prefetch=self.o.prefetch)
        except ChannelClosed as exc:
            self.rec(name, "unknown" if exc.hard else "fail", "consume", {**v, "error": str(exc)})
            raise
        except Exception as exc:
            self.rec(name, "unknown", "consume", {**v, "error": _err(exc)})
            raise
        self.rec(name, "ok", "consume", v)
        return c, self._link(name)

    def _consume_on(self, name: str, s: Session, rng: random.Random, pending: list[tuple[str, dict[str, Any]]]) -> None:
        c, link = self._subscribe(name, s)
        while True:
            if self.stop_consuming.is_set():
                self._settle_proven(name, s, pending)
                return
            try:
                d = c.next(POLL_S)
            except OperationTimeout as exc:
                if isinstance(exc, ConnectionLost):
                    raise
                self._settle_proven(name, s, pending)
                continue
            self._handle(name, s, d, rng, pending, link=link)
            if len(pending) >= SYNC_EVERY:
                self._settle_proven(name, s, pending)
            if rng.random() < self.o.cancel_rate:
                if not c.cancel_keeps_held:
                    # the cancel would end what the subscription holds (AMQP 1.0 detach): no more credit, a
                    # drain (the broker's flow answers it: nothing is in flight after), then settle all
                    c.pause()
                    for d in c.drain(0, OP_S):
                        self._handle(name, s, d, rng, pending, link=link)
                self._settle_proven(name, s, pending)
                v = {"consumer": name, "prefetch": self.o.prefetch, "ack_mode": "manual"}
                self.rec(name, "invoke", "cancel", v)
                try:
                    c.cancel()
                except Exception as exc:
                    self.rec(name, "unknown", "cancel", {**v, "error": _err(exc)})
                    raise
                self.rec(name, "ok", "cancel", v)
                while True:  # what arrived before the cancel-ok: held on the channel, still ours to settle
                    try:
                        d = c.next(0.0)
                    except OperationTimeout as exc:
                        if isinstance(exc, ConnectionLost):
                            raise
                        break
                    self._handle(name, s, d, rng, pending, link=link)
                self._settle_proven(name, s, pending)
                c, link = self._subscribe(name, s)

    def _handle(self, name: str, s: Session, d: Any, rng: random.Random, pending: list[tuple[str, dict[str, Any]]],
                nack_rate: float | None = None, link: str = "") -> None:
        mid = d.message_id or d.body.decode(errors="replace")
        value: dict[str, Any] = {"id": mid, "consumer": name, "link": link, "redelivered": bool(d.redelivered),
                                 "delivery_count": d.delivery_count, "ack_mode": "manual"}
        if d.first_acquirer is not None:  # AMQP 1.0's header first-acquirer: the checkers judge 1.0 marks by 1.0 rules
            value["first_acquirer"] = d.first_acquirer
        self.rec(name, "ok", "deliver", value)
        rate = self.o.nack_rate if nack_rate is None else nack_rate
        if rng.random() < rate:
            v = {"id": mid, "consumer": name, "requeue": True}
            # AMQP 1.0 returns a message in two ways (messaging 3.4.4, 3.4.5): released leaves its
            # delivery-count as it was, modified with delivery-failed MUST count the attempt; half each
            outcome = ("modified" if rng.random() < 0.5 else "released") if "outcomes" in self.adapter.features else None
            if outcome:
                v["outcome"] = outcome
            self.rec(name, "invoke", "nack", v)
            pending.append(("nack", v))
            if outcome == "modified":
                s.settle(d.tag, "modified", delivery_failed=True)
            else:
                s.nack(d.tag, requeue=True)
        else:
            v = {"id": mid, "consumer": name}
            self.rec(name, "invoke", "ack", v)
            pending.append(("ack", v))
            s.ack(d.tag)

    # -- nemesis --------------------------------------------------------------------------------

    def nemesis(self, schedule: list[dict[str, Any]], until: Callable[[], bool]) -> None:
        from conformance.nemesis.kinds import KINDS, NODE, strike

        tname = getattr(self.target, "name", "target")
        for n, entry in enumerate(schedule):
            at = self.t0 + float(entry["at_s"])
            while not until() and time.monotonic() < at:  # the schedule's time, or the end of the workload
                self.stop_producing.wait(min(0.2, max(0.0, at - time.monotonic())))
            if until():
                return
            k = entry["kind"]
            v = {"kind": k, "target": tname, "detail": f"scheduled at {entry['at_s']}s"}
            started = time.monotonic()
            self.rec("nemesis", "invoke", "fault", v)
            try:
                if k == "cut":
                    assert self.cut_all is not None
                    self.cut_all()
                    self.rec("nemesis", "ok", "fault", {**v, "detail": "every client connection reset (RST) through the fault proxy"})
                    self.rec("nemesis", "invoke", "heal", v)
                    self.rec("nemesis", "ok", "heal", {**v, "detail": "nothing on the broker to heal: clients reconnect"})
                else:
                    kind = self.kinds.get(k) or KINDS[k]
                    node = None
                    if kind.scope == NODE:  # one node of the cluster: clients on the others keep going
                        names = self.target.node_names()
                        node = names[(int(entry.get("node", 1)) - 1) % len(names)]
                        v["detail"] += f"; node {entry.get('node', 1)} ({node})"
                    fired: list[bool] = []

                    def say(op: str, detail: str, kind: Any = kind, v: dict[str, Any] = v, fired: list[bool] = fired,
                            node: str | None = node) -> None:
                        # the fault kind's own fire, hold and heal (strike) tells its steps: the act, then the node back
                        if op == "note":
                            return
                        if not fired:
                            fired.append(True)
                            act = f"{kind.fired_event or kind.name} {node}" if node else kind.fired_event or kind.does
                            self.rec("nemesis", "ok", "fault", {**v, "detail": act})
                            self.rec("nemesis", "invoke", "heal", v)
                        if op == kind.back_event:
                            self.rec("nemesis", "ok", "heal", {**v, "detail": f"{op}: {detail}"})

                    if node is None:  # a broker fault: the clients wait for its heal
                        self.healthy.clear()
                    try:
                        strike(kind, self.target, say, node=node)
                    finally:
                        self.healthy.set()
            except Exception as exc:  # noqa: BLE001 - a fault that could not be fired or healed is the run's breakage
                self.rec("nemesis", "fail", "fault", {**v, "detail": str(exc)})
                self.problem(f"nemesis {k} at {entry['at_s']}s: {exc}")
                self._heal_anyway()
                return
            self.fired.append({**entry, "entry": n, "took_s": round(time.monotonic() - started, 3)})

    def _heal_anyway(self) -> None:
        """After a fault that broke: the node started if it is not running (every fault heals);
        on a cluster every link let through again and every stopped node started."""
        for heal in ("heal_partition", "start_all"):
            try:
                if hasattr(self.target, heal) and hasattr(self.target, "node_names"):
                    getattr(self.target, heal)()
            except Exception as exc:  # noqa: BLE001
                self.problem(f"could not bring the cluster back ({heal}): {exc}")
        if hasattr(self.target, "node_names"):
            self.healthy.set()
            return
        try:
            if self.target is not None and getattr(self.target, "can_restart", False) and self.target.check_alive():
                self.target.start()
        except Exception as exc:  # noqa: BLE001
            self.problem(f"could not bring the target back: {exc}")
        finally:
            self.healthy.set()

    # -- drain ----------------------------------------------------------------------------------

    def drain(self) -> dict[str, Any]:
        """Read everything left, until a passive declare counts the queue empty, within :data:`DRAIN_S`."""
        end = time.monotonic() + DRAIN_S
        self.rec("drain", "invoke", "drain", {"consumer": "drain"})
        got = 0
        while time.monotonic() < end:
            conn_s = self.connect("drain", threading.Event())
            if conn_s is None:
                break
            conn, s = conn_s
            pending: list[tuple[str, dict[str, Any]]] = []
            try:
                c = s.consume(self.spec.name, ack_mode=AckMode.MANUAL, prefetch=max(self.o.prefetch, 50))
                link = self._link("drain")
                rng = random.Random(0)
                while time.monotonic() < end:
                    try:
                        d = c.next(0.5)
                    except OperationTimeout as exc:
                        if isinstance(exc, ConnectionLost):
                            raise
                        self._settle_proven("drain", s, pending)
                        ready = s.queue_stats(self.spec.name).ready
                        if ready == 0:
                            self.rec("drain", "ok", "drain", {"consumer": "drain", "delivered": got})
                            return {"delivered": got, "left": 0, "complete": True}
                        continue
                    got += 1
                    self._handle("drain", s, d, rng, pending, nack_rate=0.0, link=link)
                    if len(pending) >= 50:
                        self._settle_proven("drain", s, pending)
            except (ConnectionLost, ChannelClosed, AdapterError) as exc:
                for f, v in pending:
                    self.rec("drain", "unknown", f, {**v, "error": str(exc)})
                self.problem(f"drain: connection lost ({exc}); reconnecting")
            finally:
                _close(conn)
        left = None
        try:
            conn, s = self.connect("drain", threading.Event()) or (None, None)
            if s is not None:
                left = s.queue_stats(self.spec.name).ready
                _close(conn)
        except (ConnectionLost, ChannelClosed, AdapterError):
            pass
        self.rec("drain", "fail", "drain", {"consumer": "drain", "delivered": got, "left": left,
                                             "error": f"queue not empty within {DRAIN_S:.0f}s"})
        self.problem(f"drain: the queue still held {left} message(s) after {DRAIN_S:.0f}s")
        return {"delivered": got, "left": left, "complete": False}

    # -- the run --------------------------------------------------------------------------------

    def run(self) -> dict[str, Any]:
        o = self.o
        modes = [o.modes[i % len(o.modes)] for i in range(o.producers)]
        threads = [threading.Thread(target=self.producer, args=(f"p{i + 1}", m), name=f"soak-p{i + 1}", daemon=True)
                   for i, m in enumerate(modes)]
        consumers = [threading.Thread(target=self.consumer, args=(f"c{i + 1}",), name=f"soak-c{i + 1}", daemon=True)
                     for i in range(o.consumers)]
        for t in consumers + threads:
            t.start()
        end = self.t0 + o.seconds if o.seconds is not None else None

        def over() -> bool:
            return self.stop_producing.is_set() or (end is not None and time.monotonic() >= end) \
                or not any(t.is_alive() for t in threads)

        nem = threading.Thread(target=self.nemesis, args=(o.schedule, over), name="soak-nemesis", daemon=True)
        nem.start()
        while not over():
            self.stop_producing.wait(0.2 if end is None else max(0.0, min(0.2, end - time.monotonic())))
        self.stop_producing.set()
        nem.join(RECONNECT_S + 60)  # a fault in progress heals before the clients stop
        for t in threads:
            t.join(RECONNECT_S + 10)
        workload_s = time.monotonic() - self.t0
        self.stop_consuming.set()
        for t in consumers:
            t.join(RECONNECT_S + 10)
        alive = [t.name for t in (*threads, *consumers, nem) if t.is_alive()]
        if alive:
            self.problem(f"client threads still running at the end: {', '.join(alive)}")
        whole = self.await_whole()
        drain = self.drain()
        return {"workload_s": workload_s, "drain": drain, **({"whole": whole} if whole else {})}

    def await_whole(self) -> str:
        """On a cluster, before the drain: every node running, no partition, the queue's leader
        elected and every member online (the target's own bounded wait), recorded in the history."""
        wait = getattr(self.target, "await_whole", None)
        if wait is None or not self.o.nemesis and not self.o.schedule:
            return ""
        v = {"kind": "whole", "target": getattr(self.target, "name", "target"), "detail": "every node running, no partition"}
        self.rec("nemesis", "invoke", "heal", v)
        try:
            said = str(wait(WHOLE_S, queue=self.spec.name))
        except Exception as exc:  # noqa: BLE001 - a cluster that did not come back is the run's breakage
            self.rec("nemesis", "fail", "heal", {**v, "detail": str(exc)})
            self.problem(f"the cluster was not whole before the drain: {exc}")
            return f"not whole: {exc}"
        self.rec("nemesis", "ok", "heal", {**v, "detail": said})
        return said


def _err(exc: BaseException) -> str:
    from conformance.errors import ConformanceError

    return str(exc) if isinstance(exc, ConformanceError) else f"{type(exc).__name__}: {exc}"


def _close(conn: Connection | None) -> None:
    if conn is None:
        return
    with contextlib.suppress(Exception):  # a connection the fault already took: nothing to close
        conn.close()


def queue_spec(profile: Any, queue_type: str | None) -> tuple[QueueSpec, str]:
    """The soak's queue: durable, of ``queue_type`` (default: quorum where the profile offers it, else
    classic), declared as the profile says that type is declared."""
    from conformance.errors import UsageError

    types = getattr(profile, "queue_types", {}) or {}
    chosen = queue_type or ("quorum" if "quorum" in types else "classic")
    qt = types.get(chosen)
    if qt is None and chosen != "classic":
        raise UsageError(f"--queue-type {chosen}: the profile {getattr(profile, 'id', '?')} offers {', '.join(sorted(types)) or 'none'}")
    args = dict(qt.arguments) if qt is not None else {}
    return QueueSpec(name=f"soak-{uuid.uuid4().hex[:8]}", queue_type=chosen, durable=True, arguments=args), chosen


def write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str) + "\n", encoding="utf-8")
    tmp.replace(path)
