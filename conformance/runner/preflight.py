"""Preflight: the suite's own assumptions about the target, checked in a few seconds before the catalogue.

Every case relies on the same machinery: a connection and a channel, queue.declare, a synchronous
round trip, a publish the broker confirms, counting ready messages and consumers (passive
queue.declare), a delivery that carries the message-id and payload it was published with, and a
sentinel published after other messages arriving after them (the barrier of every negative
check). A target that breaks one of these would make every case stall to its deadline or judge
garbage. So they are checked first, each with a short deadline, and a broken one is reported as its
own result (run.json ``preflight``) while the cases that depend on it end at once as
``blocked: <assumption>`` (verdict :attr:`Outcome.BLOCKED`), never at their deadline.

``blocked`` is its own verdict, between error and deviation: not the suite's breakage (error) and
not a judgement of the requirement (fail), but "the broker broke something the case needs to judge
it". No fallback mechanism exists yet for these basics: every area needs all of them (``NEEDED_BY``).
"""

from __future__ import annotations

import time
import uuid
from dataclasses import asdict, dataclass
from typing import Any, Callable

from conformance.api import AckMode, Adapter, Connection, Consumer, QueueSpec, Session
from conformance.catalogue.requirements import Requirement
from conformance.errors import ChannelClosed, ConformanceError, DeliveriesMissing, OperationTimeout, Unsupported
from conformance.kit.verdicts import Outcome, Verdict

#: Deadline of each check: a local broker answers each in milliseconds.
CHECK_TIMEOUT_S = 5.0

#: Assumption -> the areas whose cases rely on it ("*": every area). Order is the order of checks.
NEEDED_BY: dict[str, tuple[str, ...]] = {
    "connection and channel open": ("*",),
    "queue.declare answered": ("*",),
    "synchronous round trip": ("*",),
    "publish confirmed": ("*",),
    "ready messages counted (passive queue.declare message-count)": ("*",),
    "published message delivered": ("*",),
    "message-id and payload passed through": ("*",),
    "consumers counted (passive queue.declare consumer-count)": ("*",),
    "sentinel arrives after the messages published before it": ("*",),
}


@dataclass
class Check:
    """One assumption's outcome: ok True (held), False (broken), None (not checked or not offered)."""

    assumption: str
    ok: bool | None
    observed: str
    seconds: float = 0.0

    def as_record(self) -> dict[str, Any]:
        return asdict(self)


class _Broken(Exception):
    """A check saw the assumption broken (the observed text says how)."""


class _NotOffered(Exception):
    """The protocol or adapter offers no way to check this (e.g. no consumer count over AMQP 1.0)."""


def run_preflight(adapter: Adapter, url: str, timeout: float = CHECK_TIMEOUT_S) -> list[Check]:
    """Check every assumption in order; after the first broken one the rest are not checked (they
    build on it). Never raises for the broker's behaviour: that is what the result reports."""
    results: list[Check] = []
    state: dict[str, Any] = {}
    conn: Connection | None = None
    body = f"conformance preflight {uuid.uuid4().hex[:8]}".encode()
    q = f"conformance.preflight.{uuid.uuid4().hex[:8]}"

    def open_channel() -> str:
        nonlocal conn
        conn = adapter.connect(url, timeout=timeout, name="conformance preflight", op_timeout=timeout)
        state["session"] = conn.session()
        return f"{conn.server.product} {conn.server.version}"

    def declare() -> str:
        session(state).declare_queue(QueueSpec(name=q, queue_type="classic", durable=False, auto_delete=False))
        return f"queue {q} declared"

    def round_trip() -> str:
        start = time.monotonic()
        session(state).sync()
        return f"answered in {(time.monotonic() - start) * 1000:.1f}ms"

    def confirmed() -> str:
        s = session(state)
        try:
            s.enable_confirms()
        except Unsupported as exc:  # fallback: an unconfirmed publish followed by a round trip
            s.publish(q, body, message_id="preflight-1")
            s.sync()
            return f"confirms not offered ({exc}); fell back to publish + synchronous round trip"
        s.publish(q, body, message_id="preflight-1")
        return f"confirmed: an ordinary {len(body)}-byte message"

    def counted() -> str:
        ready = session(state).queue_stats(q).ready
        if ready is None:
            raise _NotOffered("this protocol gives no ready count")
        if ready != 1:
            raise _Broken(f"message-count {ready} after one confirmed publish")
        return "message-count 1"

    def delivered() -> str:
        consumer = session(state).consume(q, ack_mode=AckMode.MANUAL, prefetch=10)
        state["consumer"] = consumer
        state["first"] = _one(consumer, timeout, q)
        return f"delivery_tag {state['first'].tag}"

    def passthrough() -> str:
        d = state["first"]
        if d.message_id != "preflight-1" or d.body != body:
            raise _Broken(f"delivered message-id {d.message_id!r}, body of {len(d.body or b'')} bytes (sent 'preflight-1', {len(body)} bytes)")
        return "message-id and body as published"

    def consumers() -> str:
        stats = session(state).queue_stats(q)
        n = stats.consumers
        if n is None:  # e.g. AMQP 1.0 without a management backend: cases use a departure barrier
            raise _NotOffered(f"this protocol gives no consumer count{': ' + stats.method if getattr(stats, 'method', '') else ''}")
        if n != 1:
            raise _Broken(f"consumer-count {n} with one consumer subscribed")
        return "consumer-count 1"

    def sentinel() -> str:
        s = session(state)
        s.publish(q, body, message_id="preflight-2")
        s.publish(q, body, message_id="preflight-sentinel")
        got: list[str | None] = []
        end = time.monotonic() + timeout
        while "preflight-sentinel" not in got:  # a duplicate or a redelivery on the way is the cases' business
            got.append(_one(state["consumer"], max(0.0, end - time.monotonic()), q).message_id)
        if "preflight-2" not in got:
            raise _Broken(f"the sentinel came before the message published ahead of it: delivered {got}")
        return "delivered after the message published ahead of it"

    steps: list[Callable[[], str]] = [open_channel, declare, round_trip, confirmed, counted, delivered, passthrough, consumers, sentinel]
    broken = False
    try:
        for assumption, step in zip(NEEDED_BY, steps):
            if broken:
                results.append(Check(assumption, None, "not checked: an earlier assumption is broken"))
                continue
            start = time.monotonic()
            try:
                results.append(Check(assumption, True, step(), round(time.monotonic() - start, 4)))
            except (Unsupported, _NotOffered) as exc:
                results.append(Check(assumption, None, f"not offered by the adapter or target: {exc}", round(time.monotonic() - start, 4)))
            except (_Broken, ConformanceError, OSError) as exc:
                broken = True
                results.append(Check(assumption, False, _describe(exc), round(time.monotonic() - start, 4)))
    finally:
        _cleanup(adapter, url, conn, state, q, timeout, healthy=not broken)
    return results


def session(state: dict[str, Any]) -> Session:
    return state["session"]


def _one(consumer: Consumer, timeout: float, q: str) -> Any:
    try:
        return consumer.next(timeout)
    except OperationTimeout:
        raise DeliveriesMissing(q, 1, [], timeout) from None


def _describe(exc: BaseException) -> str:
    if isinstance(exc, ChannelClosed):
        return f"refused: {exc}"
    return str(exc) or type(exc).__name__


def _cleanup(adapter: Adapter, url: str, conn: Connection | None, state: dict[str, Any], q: str, timeout: float, *, healthy: bool) -> None:
    """Delete the preflight queue; after a broken check the connection is cut (it may be mid-frame)."""
    if conn is None:
        return
    try:
        if healthy:
            session(state).delete_queue(q)
            conn.close()
        else:
            conn.cut()
            if "session" in state:  # the queue was maybe declared: delete it over a fresh connection
                with_fresh = adapter.connect(url, timeout=timeout, name="conformance preflight cleanup", op_timeout=timeout)
                try:
                    with_fresh.session().delete_queue(q)
                finally:
                    with_fresh.close()
    except Exception:  # cleanup never hides the preflight's own findings
        pass


def broken(checks: list[Check]) -> Check | None:
    """The first broken assumption, or None."""
    return next((c for c in checks if c.ok is False), None)


def blocking(checks: list[Check], req: Requirement) -> Verdict | None:
    """The verdict of a case whose requirement relies on a broken assumption, or None to run it."""
    for c in checks:
        if c.ok is False and ("*" in NEEDED_BY.get(c.assumption, ("*",)) or req.area in NEEDED_BY[c.assumption]):
            return Verdict(Outcome.BLOCKED, req.text, f"blocked: {c.assumption}: {c.observed}",
                           reason=f"preflight: the target broke the suite's assumption '{c.assumption}'")
    return None


def render(checks: list[Check]) -> str:
    """One line per assumption, for the console."""
    mark = {True: "ok", False: "BROKEN", None: "--"}
    return "\n".join(f"preflight {mark[c.ok]:>6}  {c.assumption}: {c.observed}" for c in checks)


def from_records(records: list[dict[str, Any]]) -> list[Check]:
    """Checks handed to an xdist worker as JSON."""
    return [Check(**r) for r in records]
