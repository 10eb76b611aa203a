"""Adapter kit: exercise every neutral-API operation of an adapter against a real broker
and report contract breaks precisely (what was called, what came back, what the contract expects),
before any catalogue verdict through that adapter is trusted.

The contract checked is the one cases rely on (conformance/api.py): bounded waits (a consumer with
nothing to deliver raises OperationTimeout at its deadline, not later, not never), errors in the
neutral vocabulary (never a client library's own exception), ordering (deliveries in publish order,
``sync`` a barrier after which an earlier ack has been applied), the declared capabilities are known
names, and what a protocol cannot express raises Unsupported instead of passing silently.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable

from conformance.api import AckMode, Adapter, Connection, Delivery, QueueSpec, Session
from conformance.catalogue.capabilities import adapter_capabilities
from conformance.errors import ChannelClosed, ConformanceError, ConnectionLost, OperationTimeout, Unsupported, UsageError

#: Slack allowed past a deadline before the wait counts as unbounded.
DEADLINE_SLACK_S = 1.0


@dataclass
class Result:
    operation: str
    #: "ok", "broken" (a contract break) or "not offered" (Unsupported: fine, reported).
    outcome: str
    detail: str

    def line(self) -> str:
        mark = {"ok": "ok  ", "broken": "FAIL", "not offered": "n/a "}[self.outcome]
        return f"{mark} {self.operation}: {self.detail}"


class _Broken(Exception):
    pass


def _expect(cond: bool, called: str, got: Any, expected: str) -> None:
    if not cond:
        raise _Broken(f"called {called}: returned {got!r}; expected {expected}")


def check(adapter: Adapter, url: str, timeout: float = 5.0) -> list[Result]:
    """Every operation in order; a break is reported and the next operations go on where they can."""
    results: list[Result] = []
    state: dict[str, Any] = {"q": f"conformance.adapter-check.{uuid.uuid4().hex[:8]}"}

    def step(name: str, fn: Callable[[], str]) -> None:
        try:
            results.append(Result(name, "ok", fn()))
        except Unsupported as exc:
            results.append(Result(name, "not offered", f"Unsupported: {exc}"))
        except _Broken as exc:
            results.append(Result(name, "broken", str(exc)))
        except ConformanceError as exc:
            results.append(Result(name, "broken", f"raised {type(exc).__name__}: {exc}; expected it to complete"))
        except Exception as exc:  # noqa: BLE001 - the point: a library exception leaking through the neutral API
            results.append(Result(name, "broken", f"raised {type(exc).__module__}.{type(exc).__name__}: {exc}; "
                                                  f"expected the neutral errors of conformance.errors, never the client library's"))

    def s() -> Session:
        return state["session"]  # type: ignore[no-any-return]

    def capabilities() -> str:
        try:
            caps = adapter_capabilities(adapter)
        except UsageError as exc:
            raise _Broken(str(exc)) from None
        _expect(bool(getattr(adapter, "protocol", "")), "Adapter.protocol", getattr(adapter, "protocol", None), "a protocol name")
        return f"protocol {adapter.protocol}, capabilities {sorted(caps) if caps is not None else 'undeclared (protocol lists apply)'}"

    def connect() -> str:
        conn = adapter.connect(url, timeout=timeout, name="conformance adapter-check", op_timeout=timeout)
        state["conn"] = conn
        _expect(bool(conn.server.product) and conn.server.protocol == adapter.protocol, "connect(url).server", conn.server,
                f"product set and protocol {adapter.protocol!r}")
        _expect(conn.is_open is True, "connect(url).is_open", conn.is_open, "True")
        return f"{conn.server.product} {conn.server.version}"

    def session() -> str:
        state["session"] = state["conn"].session()
        _expect(s().is_open is True, "session().is_open", s().is_open, "True")
        return "open"

    def declare() -> str:
        name = s().declare_queue(QueueSpec(name=state["q"], queue_type="classic", durable=True))
        _expect(name == state["q"], f"declare_queue(QueueSpec({state['q']!r}))", name, "the queue's name")
        return f"queue {name}"

    def publish() -> str:
        try:
            s().enable_confirms()
        except Unsupported:
            pass
        for i in (1, 2, 3):
            got = s().publish(state["q"], f"body-{i}".encode(), message_id=f"m{i}", persistent=True)
            _expect(got is None, f"publish(q, b'body-{i}', message_id='m{i}')", got, "None (returns once sent or confirmed)")
        s().sync()
        return "3 messages, then sync()"

    def stats() -> str:
        st = s().queue_stats(state["q"])
        _expect(st.ready == 3, f"queue_stats({state['q']!r}).ready after 3 publishes and sync()", st.ready, "3")
        return f"ready {st.ready}, consumers {st.consumers} {st.method}".strip()

    def consume() -> str:
        state["consumer"] = s().consume(state["q"], ack_mode=AckMode.MANUAL, prefetch=10)
        got = [state["consumer"].next(timeout) for _ in range(3)]
        ids = [d.message_id for d in got]
        _expect(ids == ["m1", "m2", "m3"], "consume(q, MANUAL).next() x3", ids, "['m1', 'm2', 'm3'] in publish order")
        _expect(got[0].body == b"body-1", "next().body", got[0].body, "b'body-1' as published")
        _expect(all(isinstance(d, Delivery) and not d.redelivered for d in got), "next().redelivered", [d.redelivered for d in got],
                "False on first deliveries")
        _expect(len({d.tag for d in got}) == 3, "next().tag", [d.tag for d in got], "three distinct tags")
        state["held"] = got
        return f"tags {[d.tag for d in got]}"

    def deadline() -> str:
        start = time.monotonic()
        try:
            d = state["consumer"].next(0.3)
        except OperationTimeout:
            took = time.monotonic() - start
            _expect(took < 0.3 + DEADLINE_SLACK_S, "next(0.3) on an empty queue", f"OperationTimeout after {took:.2f}s",
                    f"OperationTimeout within {0.3 + DEADLINE_SLACK_S:g}s")
            return f"OperationTimeout after {took * 1000:.0f}ms"
        raise _Broken(f"called next(0.3) on a queue with nothing left: returned {d!r}; expected OperationTimeout")

    def ack_and_sync() -> str:
        s().ack(state["held"][0].tag)
        s().sync()
        st = s().queue_stats(state["q"])
        return f"ack(tag {state['held'][0].tag}) then sync(): ready {st.ready}"

    def nack_requeue() -> str:
        """What NACK does is the broker's (STOMP leaves it to the server): the contract is only that
        the call and the barrier after it complete in the neutral vocabulary."""
        s().nack(state["held"][1].tag, requeue=True)
        s().sync()
        try:
            d = state["consumer"].next(1.0)
        except OperationTimeout:
            return f"nack(tag {state['held'][1].tag}, requeue=True) and sync() answered; nothing came back within 1s (the broker's choice)"
        s().ack(d.tag)
        return f"nack(tag {state['held'][1].tag}, requeue=True) and sync() answered; {d.brief()} came back"

    def bad_tag() -> str:
        try:
            s().ack(999_999)
            s().sync()
        except ConformanceError as exc:  # refused in the neutral vocabulary: by the broker or by the adapter
            state["session_dead"] = isinstance(exc, ChannelClosed)
            return f"ack(999999) refused: {type(exc).__name__}: {exc}"
        return "ack(999999) accepted silently (the broker's business; no library error leaked)"

    def tx() -> str:
        if state.get("session_dead"):
            if not state["conn"].is_open:
                state["conn"] = _fresh(state, adapter, url, timeout)
            state["session"] = state["conn"].session()
        s().select_tx()
        s().publish(state["q"], b"tx", message_id="t1")
        s().rollback()
        s().publish(state["q"], b"tx", message_id="t2")
        s().commit()
        return "select_tx, publish, rollback, publish, commit answered"

    def optional() -> str:
        if not s().is_open:  # e.g. the broker ended the session refusing transactions: its answer, not a break
            if not state["conn"].is_open:
                state["conn"] = _fresh(state, adapter, url, timeout)
            state["session"] = state["conn"].session()
        said = []
        for name, fn in (("get", lambda: s().get(state["q"], timeout=timeout)), ("recover", lambda: s().recover()),
                         ("qos", lambda: s().qos(5))):
            try:
                fn()
                said.append(f"{name}: done")
            except Unsupported as exc:
                said.append(f"{name}: Unsupported ({exc})")
        return "; ".join(said)

    def cut() -> str:
        conn: Connection = state["conn"]
        conn.cut()
        _expect(conn.is_open is False, "cut() then is_open", conn.is_open, "False")
        try:
            s().sync()
        except ConnectionLost as exc:
            return f"after cut(), sync() raised ConnectionLost ({exc})"
        raise _Broken("called sync() after cut(): returned normally; expected ConnectionLost")

    def close() -> str:
        conn = _fresh(state, adapter, url, timeout)
        try:
            conn.session().delete_queue(state["q"])
        except Unsupported:
            pass
        conn.close()
        _expect(conn.is_open is False, "close() then is_open", conn.is_open, "False")
        return "graceful close"

    for name, fn in (("capabilities", capabilities), ("connect", connect), ("session", session), ("declare_queue", declare),
                     ("publish + sync", publish), ("queue_stats", stats), ("consume/next", consume),
                     ("next deadline", deadline), ("ack + sync", ack_and_sync), ("nack requeue", nack_requeue),
                     ("ack unknown tag", bad_tag), ("transactions", tx), ("get/recover/qos", optional), ("cut", cut), ("close", close)):
        if name not in ("capabilities", "connect") and "conn" not in state:
            results.append(Result(name, "broken", "not run: no connection"))
            continue
        step(name, fn)
    return results


def _fresh(state: dict[str, Any], adapter: Adapter, url: str, timeout: float) -> Connection:
    """A new connection (the first was cut, or closed by the broker after a refused ack)."""
    return adapter.connect(url, timeout=timeout, name="conformance adapter-check 2", op_timeout=timeout)


# -- the command: ``conformance adapter-check`` --------------------------------------------------------

def add_parser(sub: Any) -> None:
    ac = sub.add_parser("adapter-check", help="exercise every neutral-API operation of an adapter against a real broker; report contract breaks")
    ac.add_argument("--adapter", required=True, help="adapter plugin name")
    ac.add_argument("--target", required=True, help="broker URL or launcher name")
    ac.set_defaults(func=command)


def command(args: Any) -> int:
    """:func:`check` against a target (launched and stopped here if named)."""
    from urllib.parse import urlsplit

    from conformance.api import adapter_for
    from conformance.cli.exit_codes import EXIT_FAIL, EXIT_OK
    from conformance.errors import TargetError
    from conformance.targets import make_target

    target = make_target(args.target)
    try:
        target.start()
    except TargetError as exc:  # an unreachable broker is one line (exit 2), not a traceback
        raise UsageError(str(exc)) from None
    try:
        adapter = adapter_for(urlsplit(str(target.url)).scheme, args.adapter, target.protocol)()
        results = check(adapter, target.url)
    finally:
        target.stop()
    for r in results:
        print(r.line())
    broken = [r for r in results if r.outcome == "broken"]
    print(f"adapter-check {args.adapter}: {len(results) - len(broken)} of {len(results)} operations keep the contract"
          + (f", {len(broken)} broken" if broken else ""))
    return EXIT_FAIL if broken else EXIT_OK
