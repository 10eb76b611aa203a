"""The fault proxy with its relay in a child process, behind the same interface.

A relay thread in the case's own process shares the GIL with the client library: every frame it
forwards waits for the client's Python code and the reverse, which cut a pika client's throughput
through the proxy by about 40% in bench/proxy_throughput.py. In its own process the relay runs
beside the client on another core, and a fault's timing no longer depends on what the client's
thread is doing.

The child is forked from a forkserver that has the proxy preloaded, so a proxy starts in
milliseconds after the first. The parent keeps the case-facing objects: armed faults are sent as
data and their ``fired``/``hit`` are set when the child reports them; the trace, errors and
connection count are fetched on demand and kept as a final copy on close (reports read the trace
after the case closed its proxies).
"""

from __future__ import annotations

import itertools
import multiprocessing
import threading
from multiprocessing.connection import Connection
from typing import Any, Callable

from conformance.nemesis.faults import Fault
from conformance.nemesis.proxy import FaultProxy, ProxyBase, TraceEntry, TraceReader

START_TIMEOUT_S = 15.0
CALL_TIMEOUT_S = 10.0
_FAULT_FIELDS = ("action", "frame", "sender", "nth", "moment", "channel", "connection", "delay_s", "until")

_context_lock = threading.Lock()
_context: Any = None


class ProxyProcessError(RuntimeError):
    """The proxy's process could not be started or stopped answering."""


def _mp_context() -> Any:
    global _context
    with _context_lock:
        if _context is None:
            ctx = multiprocessing.get_context("forkserver")
            ctx.set_forkserver_preload(["conformance.nemesis.proxy_isolated"])
            _context = ctx
        return _context


class RemoteTrace(TraceReader):
    """The child's trace, fetched whenever it is read; frozen once the proxy closed."""

    def __init__(self, owner: "IsolatedFaultProxy") -> None:
        self._owner = owner
        self.started = 0.0

    @property  # type: ignore[override]
    def total(self) -> int:
        return int(self._owner._state("trace_total"))

    def entries(self) -> list[TraceEntry]:
        self.started, _, entries = self._owner._state("trace")
        return entries

    def render(self) -> str:
        self.started, total, entries = self._owner._state("trace")  # total and entries of one moment
        return self._render(entries, total)


class IsolatedFaultProxy(ProxyBase):
    """Relay ``127.0.0.1:<port>`` to ``upstream`` from a child process; see the module docstring."""

    def __init__(
        self,
        upstream: tuple[str, int],
        *,
        trace_limit: int = 20000,
        on_event: Callable[[str], None] | None = None,
        mutation: str | None = None,
    ) -> None:
        self.upstream = upstream
        self.mutation = mutation
        self.port = 0
        self.trace = RemoteTrace(self)
        self._trace_limit = trace_limit
        self._on_event = on_event
        self._conn: Connection | None = None
        self._process: Any = None
        self._reader: threading.Thread | None = None
        self._send_lock = threading.Lock()
        self._ids = itertools.count(1)
        self._pending: dict[int, list[Any]] = {}
        self._faults: dict[int, Fault] = {}
        self._fault_ids: dict[int, int] = {}  # id(fault) -> fault id in the child
        self._final: dict[str, Any] | None = None
        self._died: str | None = None

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> "IsolatedFaultProxy":
        ctx = _mp_context()
        parent, child = ctx.Pipe()
        self._process = ctx.Process(target=_serve, args=(child, self.upstream, self._trace_limit, self.mutation), daemon=True, name="fault-proxy")
        self._process.start()
        child.close()
        self._conn = parent
        if not parent.poll(START_TIMEOUT_S):
            self._process.kill()
            raise ProxyProcessError(f"fault proxy process did not start within {START_TIMEOUT_S:.0f}s")
        try:
            kind, value = parent.recv()
        except EOFError:
            raise ProxyProcessError("fault proxy process exited while starting") from None
        if kind != "ready":
            self._process.kill()
            raise ProxyProcessError(f"fault proxy process failed to start: {value}")
        self.port = value
        self._reader = threading.Thread(target=self._read, name="fault-proxy-events", daemon=True)
        self._reader.start()
        return self

    def close(self) -> None:
        if self._final is not None or self._conn is None:
            return
        try:
            self._final = {key: self._call(key) for key in ("trace", "trace_total", "errors", "connections", "mutation")}
            self._call("close")
        except ProxyProcessError as exc:
            self._final = {"trace": (0.0, 0, []), "trace_total": 0, "errors": [str(exc)], "connections": 0, "mutation": None}
        self._process.join(5)
        if self._process.is_alive():
            self._process.kill()
            self._process.join(5)
        self._conn.close()

    # -- the case-facing interface -------------------------------------------------------------

    def arm(self, fault: Fault) -> Fault:
        self.expressible(fault)
        if fault.following is not None and id(fault.following) not in self._fault_ids:
            raise ValueError(f"fault {fault.describe()!r} follows a fault not armed on this proxy; arm that one first")
        fid = next(self._ids)
        spec = {name: getattr(fault, name) for name in _FAULT_FIELDS}
        spec["following"] = self._fault_ids[id(fault.following)] if fault.following is not None else None
        self._faults[fid] = fault
        self._fault_ids[id(fault)] = fid
        self._call("arm", (fid, spec))
        return fault

    def cut_all(self) -> None:
        if self._final is None:
            self._call("cut_all")

    @property
    def errors(self) -> list[str]:
        return list(self._state("errors"))

    @property
    def connections(self) -> int:
        return int(self._state("connections"))

    def mutation_stats(self) -> dict[str, Any] | None:
        return self._state("mutation")  # type: ignore[no-any-return]

    # -- plumbing ------------------------------------------------------------------------------

    def _state(self, key: str) -> Any:
        if self._final is not None:
            return self._final[key]
        return self._call(key)

    def _call(self, op: str, args: Any = None) -> Any:
        if self._died is not None:
            raise ProxyProcessError(self._died)
        rid = next(self._ids)
        slot: list[Any] = [threading.Event()]
        self._pending[rid] = slot
        try:
            with self._send_lock:
                assert self._conn is not None
                self._conn.send((rid, op, args))
        except (OSError, ValueError) as exc:
            self._pending.pop(rid, None)
            raise ProxyProcessError(f"fault proxy process unreachable: {exc!r}") from None
        if not slot[0].wait(CALL_TIMEOUT_S):
            self._pending.pop(rid, None)
            raise ProxyProcessError(f"fault proxy process did not answer {op!r} within {CALL_TIMEOUT_S:.0f}s")
        ok, value = slot[1], slot[2]
        if ok is None:
            raise ProxyProcessError(value)
        if not ok:
            raise ValueError(value)
        return value

    def _read(self) -> None:
        """Replies go to their waiting caller; fired faults and events are applied here."""
        conn = self._conn
        assert conn is not None
        while True:
            try:
                msg = conn.recv()
            except (EOFError, OSError):
                break
            kind = msg[0]
            if kind == "reply":
                slot = self._pending.pop(msg[1], None)
                if slot is not None:
                    slot += [msg[2], msg[3]]
                    slot[0].set()
            elif kind == "fired":
                fault = self._faults.get(msg[1])
                if fault is not None:
                    fault.hit = msg[2]
                    fault.fired.set()
            elif kind == "struck":
                fault = self._faults.get(msg[1])
                if fault is not None:
                    fault.hit = msg[2]
                    fault.struck.set()
            elif kind == "event" and self._on_event is not None:
                try:
                    self._on_event(msg[1])
                except Exception:
                    pass
        if self._final is None:
            self._died = "fault proxy process exited unexpectedly"
        for slot in list(self._pending.values()):
            slot += [None, self._died or "fault proxy process closed"]
            slot[0].set()
        self._pending.clear()


def _serve(conn: Connection, upstream: tuple[str, int], trace_limit: int, mutation: str | None = None) -> None:
    """The child: a thread-mode FaultProxy driven over ``conn`` until told to close or orphaned."""
    send_lock = threading.Lock()

    def send(msg: tuple) -> None:
        with send_lock:
            conn.send(msg)

    faults: dict[int, Fault] = {}
    fired_ids: dict[int, int] = {}
    engine = FaultProxy(
        upstream,
        trace_limit=trace_limit,
        on_event=lambda text: send(("event", text)),
        on_fired=lambda f: send(("fired", fired_ids[id(f)], f.hit)),
        on_struck=lambda f: send(("struck", fired_ids[id(f)], f.hit)),
        mutation=mutation,
    )
    try:
        engine.start()
    except BaseException as exc:
        send(("failed", repr(exc)))
        return
    send(("ready", engine.port))
    try:
        while True:
            try:
                rid, op, args = conn.recv()
            except (EOFError, OSError):
                return  # the parent is gone: nobody will read the results
            try:
                if op == "arm":
                    fid, spec = args
                    follows = spec.pop("following")
                    fault = Fault(**spec, following=faults[follows] if follows is not None else None)
                    faults[fid] = fault
                    fired_ids[id(fault)] = fid
                    engine.arm(fault)
                    value: Any = None
                elif op == "cut_all":
                    value = engine.cut_all()
                elif op == "trace":
                    value = (engine.trace.started, engine.trace.total, engine.trace.entries())
                elif op == "trace_total":
                    value = engine.trace.total
                elif op == "errors":
                    value = engine.errors
                elif op == "connections":
                    value = engine.connections
                elif op == "mutation":
                    value = engine.mutation_stats()
                elif op == "close":
                    engine.close()
                    send(("reply", rid, True, None))
                    return
                else:
                    raise ValueError(f"unknown proxy operation {op!r}")
                send(("reply", rid, True, value))
            except Exception as exc:
                send(("reply", rid, False, f"{type(exc).__name__}: {exc}"))
    finally:
        engine.close()

