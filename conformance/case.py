"""Cases: one scenario (drives the broker, returns observations) and one verdict (judges them).

A case module reads like an h2spec section: one class per case, naming the requirement it checks::

    class TestFirstDeliveryNotRedelivered(Case):
        requirement = "ACK-FIRST-NOT-REDELIVERED"

        def scenario(self, ctx): ...           # returns plain, JSON-able observations
        def verdict(self, obs, profile, qt): ...  # pure: unit tests feed it violating observations

The pytest plugin supplies the ``conformance_case`` fixture that runs scenario then verdict, applies
the profile, writes the result record and turns the verdict into a pytest outcome.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Callable, ClassVar, cast

from conformance.api import AckMode, Adapter, Connection, Consumer, Delivery, QueueSpec, QueueStats, Session
from conformance.catalogue import Requirement
from conformance.errors import AdapterError, ChannelClosed, ConnectionLost, DeliveriesMissing, OperationTimeout, TargetCannot
from conformance.faults import Fault
from conformance.history import History, Recorded
from conformance.liveness import DELIVERY_WINDOW_S
from conformance.profile import Profile
from conformance.proxy import ProxyBase
from conformance.proxy_isolated import IsolatedFaultProxy
from conformance.targets import Target
from conformance.verdict import Verdict

Obs = dict[str, Any]

#: Generous bound on any single wait inside a case; the case deadline bounds the whole.
WAIT_S = 10.0


def sentinel_body(mid: str) -> bytes:
    """The payload of a sentinel or filler message: ordinary, non-empty bytes. Edge cases of content
    framing (an empty body, a body larger than frame-max) are requirements of their own
    (PUBLISH-EMPTY-BODY, PUBLISH-BODY-LARGER-THAN-FRAME-MAX), never a barrier the run relies on."""
    return f"conformance sentinel {mid}".encode()


class Case:
    """Base of every case. Subclasses set ``requirement`` and implement scenario and verdict."""

    requirement: ClassVar[str]
    #: Queue types the case runs on; None means every queue type of the selected profile.
    queue_types: ClassVar[tuple[str, ...] | None] = None
    #: Extra parameter axis (e.g. which trigger requeues): each value runs as its own case.
    variants: ClassVar[tuple[str, ...] | None] = None
    #: The scenario restarts or kills the broker: it runs alone, never beside another case (cases of
    #: the same fault may share one restart or kill, see conformance.shared_fault).
    disrupts_broker: ClassVar[bool] = False

    def scenario(self, ctx: "CaseContext") -> Obs:
        """A phased case (one that names a :meth:`broker_fault`) runs its phases around its own fault;
        the runner may instead share one fault among many phased cases (conformance.shared_fault)."""
        kind = self.broker_fault(ctx.variant)
        if kind is None:
            raise NotImplementedError
        prepared = self.prepare(ctx)
        if isinstance(prepared, Settled):
            return dict(prepared)
        ctx.restart_broker(kill=kind == "kill")
        return self.observe(ctx, prepared)

    # -- phases of a case that needs a broker fault (restart or kill -9) ----------------------
    # prepare: set up the scenario and return what observe needs (plain data); a Settled answer
    # means the scenario is decided before any fault. The fault comes from the runner, which may
    # share one fault among many cases; observe then looks at this case's own queues.

    def broker_fault(self, variant: str | None) -> str | None:
        """"restart", "kill" or None (the default: the case has no phases, only a scenario)."""
        return None

    def prepare(self, ctx: "CaseContext") -> Obs:
        raise NotImplementedError

    def observe(self, ctx: "CaseContext", prepared: Obs) -> Obs:
        raise NotImplementedError

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        raise NotImplementedError

    # The pytest entry point: collected once per case class, parametrized by the plugin.
    def test(self, conformance_case: Callable[["Case"], None]) -> None:
        conformance_case(self)


class Settled(dict):  # type: ignore[type-arg]
    """What :meth:`Case.prepare` returns when the scenario is decided before any fault: the final
    observations (e.g. the broker refused the declaration the fault was meant to test)."""


class ScenarioVoid(AdapterError):
    """The scenario could not set up the situation the requirement is about (e.g. a fault missed)."""


def delivery_obs(d: Delivery) -> Obs:
    """The parts of a delivery a verdict may judge, as plain data."""
    obs: Obs = {"id": d.message_id, "tag": d.tag, "redelivered": d.redelivered, "delivery_count": d.delivery_count}
    if d.first_acquirer is not None:
        obs["first_acquirer"] = d.first_acquirer
    if d.presettled is not None:
        obs["presettled"] = d.presettled
    return obs


class CaseContext:
    """What a scenario drives the broker with: connections, queues, barriers. The generator's toolbox."""

    def __init__(
        self,
        *,
        adapter: Adapter,
        url: str,
        profile: Profile,
        requirement: Requirement,
        queue_type: str | None,
        variant: str | None = None,
        history: History | None = None,
        target: Target | None = None,
    ) -> None:
        self.adapter = adapter
        self.url = url
        self.profile = profile
        self.requirement = requirement
        self.queue_type = queue_type
        self.variant = variant
        self.history = history or History()
        self.target = target
        #: When the broker last accepted connections again after a fault of this case (monotonic).
        self.fault_at: float | None = None
        self.proxies: list[ProxyBase] = []
        self._closed = False
        self._connections: list[Connection] = []
        self._queues: list[str] = []
        self._admin: Session | None = None
        self._exchanges: list[str] = []
        self._n = 0
        self.last_sentinel: Delivery | None = None
        #: Set when the target stopped answering: teardown cuts connections and deletes nothing
        #: (every delete would wait for a reply that never comes).
        self.skip_cleanup = False
        #: Every node's URL on a cluster target, as the runner chose them (through a mutation proxy
        #: during a self-test); None: the target's own (conformance.cluster).
        self.node_urls: dict[str, str] | None = None

    # -- connections -------------------------------------------------------------------------

    def connect(self, actor: str | None = None, *, via: ProxyBase | None = None, op_timeout: float | None = None,
                url: str | None = None) -> Connection:
        """A new connection, straight to the broker or through a fault proxy (``via``); ``url`` picks
        another node of a cluster target (conformance.cluster.Nodes)."""
        self._n += 1
        actor = actor or f"client{self._n}"
        base = url or self.url
        url = via.url(base) if via is not None else base
        conn = self.adapter.connect(url, name=f"conformance {self.requirement.id} {actor}", op_timeout=op_timeout)
        self._connections.append(conn)
        self.history.add(actor, "connect", f"{conn.server.product} {conn.server.version}" + (f" via proxy :{via.port}" if via else ""))
        return cast(Connection, Recorded(conn, self.history, actor))

    def session(self, actor: str | None = None, *, via: ProxyBase | None = None) -> Session:
        """A fresh connection with one session: the usual unit a consumer under test gets."""
        return self.connect(actor, via=via).session()

    # -- faults --------------------------------------------------------------------------------

    def proxy(self) -> ProxyBase:
        """A fault proxy in front of the target; its wire trace joins the case's report.

        Its relay runs in a process of its own so that neither the client's speed nor a fault's
        timing depends on who holds this process's GIL."""
        p = IsolatedFaultProxy.for_url(self.url, on_event=lambda text: self.history.add("proxy", "event", text))
        p.start()
        self.proxies.append(p)
        self.history.add("suite", "proxy", f"127.0.0.1:{p.port} -> {p.upstream[0]}:{p.upstream[1]}")
        return p

    def expect_fired(self, fault: Fault, frame: str | None = None) -> str:
        """The fault fired on the intended frame, or the scenario is void (an error, never a verdict).

        A fault acting after its frame was forwarded may still be finishing when the client has
        already seen the frame, hence the bounded wait on its condition."""
        if not fault.wait(5.0) or fault.hit is None:
            raise ScenarioVoid(f"fault did not fire: {fault.describe()}")
        want = frame or fault.frame
        if want != "*" and f" {want} on channel" not in fault.hit:
            raise ScenarioVoid(f"fault hit {fault.hit}, not a {want} frame")
        return fault.hit

    def await_queue(self, queue: str, timeout: float = 30.0) -> QueueStats:
        """After a broker restart: wait until ``queue`` answers again (a quorum queue elects a leader)."""
        last: list[QueueStats] = []
        refused: list[str] = []

        def answers() -> bool:
            try:
                last[:] = [self.stats(queue)]
                return True
            except (ChannelClosed, ConnectionLost) as exc:
                self._admin = None
                if isinstance(exc, ChannelClosed):
                    refused[:] = [f"{exc.code} {exc.text}"]
                return False

        try:
            self.wait_for(answers, f"{queue} to answer after the restart", timeout)
        except OperationTimeout as exc:
            if refused:  # e.g. 404 NOT_FOUND: the broker is up and says the queue is gone
                raise OperationTimeout(f"{exc}; the broker's last answer: {refused[0]}") from None
            raise
        return last[0]

    def wire_trace(self) -> str:
        parts = []
        for i, p in enumerate(self.proxies, 1):
            text = p.trace.render()
            if text:
                parts.append(f"-- proxy {i} (127.0.0.1:{p.port} -> {p.upstream[0]}:{p.upstream[1]}) --\n{text}")
        return "\n".join(parts)

    def tether(self, session: Session) -> str:
        """A classic queue ``session`` consumes from: its consumer count falling to 0 is the barrier
        proving the broker has torn that session down (and applied whatever that implies)."""
        name = f"conformance.tether.{uuid.uuid4().hex[:8]}"
        self.admin.declare_queue(QueueSpec(name=name, queue_type="classic", durable=False, auto_delete=False))
        self._queues.append(name)
        session.consume(name, ack_mode=AckMode.MANUAL)
        return name

    def absorb(self, other: "CaseContext") -> None:
        """Take over what ``other`` (the same case's context from an earlier phase, see
        conformance.shared_fault) owns: its history (earlier events first, same clock), queues,
        exchanges, connections and proxies, so this context observes, cleans up and records them."""
        shift = round((self.history.started - other.history.started) * 1000, 1)
        for ev in self.history.events:  # e.g. the broker lock, taken before this context ran
            ev.t_ms = round(ev.t_ms + shift, 1)
        self.history.started = other.history.started
        self.history.events[:0] = other.history.events
        other.history.events = self.history.events  # a late event of an old connection lands here too
        self._queues[:0] = other._queues
        self._exchanges[:0] = other._exchanges
        self._connections[:0] = other._connections
        self.proxies[:0] = other.proxies
        self._n = max(self._n, other._n)
        self.fault_at = other.fault_at
        other._queues, other._exchanges, other._connections, other.proxies = [], [], [], []
        other._closed = True

    def restart_broker(self, *, kill: bool = False) -> None:
        """Broker-level fault: kill -9 (``kill=True``) or a graceful restart of the node, then wait
        until it accepts connections. Every connection the case had is dead afterwards; open new ones
        (``admin`` reconnects by itself)."""
        if self.target is None or not self.target.can_restart:
            name = self.target.name if self.target else "this target"
            raise TargetCannot(f"{name} cannot be restarted or killed by the suite; broker faults need a launched target")
        self._cut_all()
        start = time.monotonic()
        if kill:
            self.target.kill()
            self.history.add("nemesis", "kill -9", self.target.name)
            self.target.start()
        else:
            self.target.restart()
        self.history.add("nemesis", "restart" if not kill else "start", f"{self.target.name} accepting connections after {time.monotonic() - start:.1f}s")
        self.fault_at = time.monotonic()

    def recovery_left(self, window: float) -> float:
        """What remains of a recovery ``window`` counted from the end of the fault (a shared fault
        may have served other cases' observations first): every case gets the same window after
        the same fault, never a fresh one. At least one poll is always made."""
        if self.fault_at is None:
            return window
        return max(0.5, window - (time.monotonic() - self.fault_at))

    @property
    def admin(self) -> Session:
        """A separate session for setup, publishing and barriers, with publisher confirms on."""
        if self._admin is None or not self._admin.is_open:
            conn = self.connect("admin")
            self._admin = conn.session()
            self._admin.enable_confirms()
        return self._admin

    # -- queues and messages -----------------------------------------------------------------

    def queue_name(self, role: str = "q", *, plain: bool = False) -> str:
        """A unique queue name for this case (to reference a queue before declaring it)."""
        kind = "classic" if plain else self.queue_type or "default"
        return f"conformance.{self.requirement.id.lower()}.{kind}.{role}.{uuid.uuid4().hex[:8]}"

    def queue(self, arguments: dict[str, Any] | None = None, *, durable: bool | None = None, plain: bool = False,
              role: str = "q", name: str | None = None) -> str:
        """Declare a uniquely named queue of the case's queue type (``plain``: a classic queue, e.g.
        a dead-letter target), deleted after the case. ``arguments`` add to the type's own."""
        qt = None if plain else self.profile.queue_types.get(self.queue_type or "")
        kind = "classic" if plain else self.queue_type or "default"
        name = name or self.queue_name(role, plain=plain)
        spec = QueueSpec(
            name=name,
            queue_type=kind,
            durable=durable if durable is not None else (qt.durable if qt else True),
            arguments={**(qt.arguments if qt else {}), **(arguments or {})},
        )
        self._queues.append(name)
        self.admin.declare_queue(spec)
        return name

    def exchange(self, kind: str = "direct") -> str:
        """Declare a uniquely named exchange, deleted after the case."""
        name = f"conformance.{self.requirement.id.lower()}.x.{uuid.uuid4().hex[:8]}"
        self.admin.declare_exchange(name, kind)
        self._exchanges.append(name)
        return name

    def publish(self, queue: str, n: int, *, prefix: str = "m", persistent: bool = False, session: Session | None = None) -> list[str]:
        """Publish ``n`` messages with ids prefix1..prefixN; return the ids. By default over the
        confirming admin session; pass ``session`` to publish on the one under test (e.g. inside its
        transaction)."""
        ids = [f"{prefix}{i}" for i in range(1, n + 1)]
        publisher = session if session is not None else self.admin
        for mid in ids:
            publisher.publish(queue, mid.encode(), message_id=mid, persistent=persistent)
        return ids

    def stats(self, queue: str) -> QueueStats:
        """Broker-side counts, not logged (barriers poll it; :meth:`wait_for` logs the outcome)."""
        admin = self.admin
        raw = getattr(admin, "_target", admin)
        return raw.queue_stats(queue)

    # -- waiting -----------------------------------------------------------------------------

    def wait_for(self, predicate: Callable[[], bool], what: str, timeout: float = WAIT_S) -> None:
        """Poll a broker-side condition until it holds; OperationTimeout names what never happened."""
        start = time.monotonic()
        end = start + timeout
        polls = 1
        while not predicate():
            if time.monotonic() >= end:
                self.history.add("suite", "wait", what, error=f"not reached in {timeout:.1f}s ({polls} polls)")
                raise OperationTimeout(f"timed out after {timeout:.1f}s waiting for {what}")
            time.sleep(0.005)  # allowed: polling a broker condition with a deadline
            polls += 1
        self.history.add("suite", "wait", f"{what}: reached after {(time.monotonic() - start) * 1000:.1f}ms ({polls} polls)")

    def await_consumers(self, queue: str, n: int) -> QueueStats | None:
        """Barrier: the queue has processed consumer arrivals/departures (and their requeues).

        Where the protocol cannot count consumers (AMQP 1.0 without a management backend) a
        departure (``n == 0``) is awaited by the adapter's protocol barrier instead, and what proved
        it is recorded in the history; None is returned then, as there are no counts."""
        if n == 0:
            admin = self.admin
            how = getattr(admin, "_target", admin).await_departure(queue)
            if how is not None:
                self.history.add("suite", "barrier", f"{queue}: {how}")
                return None
        last: list[QueueStats] = []

        def check() -> bool:
            last[:] = [self.stats(queue)]
            if last[0].consumers is None:
                raise TargetCannot(f"waiting for {n} consumer(s) on {queue} needs a consumer count; {last[0].method or 'the broker gives none'}")
            return last[0].consumers == n

        self.wait_for(check, f"{queue} to report {n} consumer(s)")
        self.history.add("suite", "stats", f"{queue} -> {last[0]}")
        return last[0]

    def until_sentinel(self, consumer: Consumer, queue: str, timeout: float = DELIVERY_WINDOW_S) -> list[Delivery]:
        """Barrier for a negative check: publish a sentinel to ``queue`` and return what ``consumer``
        receives before it. Whatever the broker held for delivery when the sentinel was enqueued is
        delivered ahead of it, so an empty list proves nothing more was pending."""
        sentinel = f"sentinel-{uuid.uuid4().hex[:8]}"
        self.admin.publish(queue, sentinel_body(sentinel), message_id=sentinel)
        out: list[Delivery] = []
        end = time.monotonic() + timeout
        while True:
            try:
                d = consumer.next(max(0.0, end - time.monotonic()))
            except OperationTimeout:  # the broker withheld the sentinel: an observation, judged as missing
                raise DeliveriesMissing(queue, len(out) + 1, [x.message_id or "" for x in out], timeout,
                                        [*(x.message_id or "" for x in out), sentinel]) from None
            if d.message_id == sentinel:
                self.last_sentinel = d
                return out
            out.append(d)

    def take(self, consumer: Consumer, n: int, *, window: float = DELIVERY_WINDOW_S,
             expected: list[str] | None = None) -> list[Delivery]:
        """``n`` deliveries the broker owes ``consumer`` (messages already in its queue), within one
        explicit ``window``. Fewer is an observation, not the suite's error: DeliveriesMissing
        carries what arrived (and, given ``expected`` ids, what did not) to the verdict."""
        out: list[Delivery] = []
        end = time.monotonic() + window
        while len(out) < n:
            try:
                out.append(consumer.next(max(0.0, end - time.monotonic())))
            except OperationTimeout:
                arrived = [d.message_id or "" for d in out]
                queue = getattr(consumer, "queue", None) or "the queue"
                self.history.add("suite", "take", f"{n} deliveries from {queue}",
                                 error=f"{len(out)} arrived within {window:g}s: {arrived}")
                raise DeliveriesMissing(queue, n, arrived, window, expected) from None
        return out

    def drain(self, queue: str, timeout: float = DELIVERY_WINDOW_S, *, op_timeout: float | None = None) -> list[Delivery]:
        """Everything deliverable from ``queue`` now, in delivery order, proven complete by a sentinel.

        Call it after a barrier (e.g. :meth:`await_consumers`) so requeues have happened. The drained
        deliveries and the sentinel are acknowledged one by one, so a later drain starts clean.
        """
        session = self.connect("drain", op_timeout=op_timeout).session()
        consumer = session.consume(queue, ack_mode=AckMode.MANUAL, prefetch=1000)
        out = self.until_sentinel(consumer, queue, timeout)
        for d in [*out, self.last_sentinel]:
            session.ack(d.tag)
        session.sync()
        session.close()
        return out

    @staticmethod
    def channel_error(fn: Callable[[], Any]) -> Obs:
        """Run ``fn`` and report how the broker answered: no error, or which channel/connection error."""
        try:
            fn()
        except ChannelClosed as exc:
            return {"closed": True, "code": exc.code, "text": exc.text, "hard": exc.hard}
        return {"closed": False, "code": None, "text": "", "hard": False}

    # -- teardown ----------------------------------------------------------------------------

    def _cut_all(self) -> None:
        """Reset every connection of the case (no handshake); ``admin`` reconnects on next use."""
        for c in self._connections:
            try:
                c.cut()
            except Exception:
                pass
        self._admin = None

    def close(self, interrupted: bool = False) -> None:
        """Delete the case's queues and close its connections; never masks the case's own outcome.

        After an interrupted scenario (deadline, broker error) a connection may be mid-frame, so it is
        cut rather than closed with a handshake the broker might never answer, and the queues are
        deleted over a fresh connection.
        """
        if self._closed:
            return
        self._closed = True
        if interrupted:
            self._cut_all()
        try:
            if (self._queues or self._exchanges) and not self.skip_cleanup:
                admin = self.admin
                for q in self._queues:
                    admin.delete_queue(q)
                for x in self._exchanges:
                    admin.delete_exchange(x)
        except Exception as exc:  # cleanup must not turn a verdict into an error
            self.history.add("admin", "cleanup", error=repr(exc))
        for c in self._connections:
            try:
                c.close()
            except Exception:
                pass
        for p in self.proxies:
            p.close()
