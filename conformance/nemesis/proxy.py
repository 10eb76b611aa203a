"""The fault-injecting proxy: a loopback TCP relay that knows where every protocol frame begins.

A case connects its client to the proxy instead of the broker. Bytes are forwarded unchanged, one
whole frame at a time, so a fault can act between two frames: after the broker received tx.commit
but before commit-ok reached the client, on the 3rd basic.deliver, on the first AMQP 1.0
disposition. Network tools cannot do this; they see bytes, not frames.

Every frame both ways is recorded in a :class:`Trace` (time, connection, sender, frame name, key
fields decoded on demand) that failing cases attach to their report. Bad input (garbage, a truncated
frame, a peer that vanishes, an unreachable broker) closes that one connection and is reported in
:attr:`FaultProxy.errors` and the trace; it never stops the proxy or the run.

The proxy runs its own asyncio loop in a daemon thread, so blocking clients (pika) work unchanged.
"""

from __future__ import annotations

import array
import asyncio
import collections
import fcntl
import itertools
import socket
import struct
import termios
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Self
from urllib.parse import urlsplit, urlunsplit

from conformance.errors import Unsupported
from conformance.nemesis.faults import Action, Fault, Moment, Sender
from conformance.nemesis.mutations import ADMIN_CONNECTION_PREFIX, Mutation, Mutator, Probe, alters, connection_name_of
from conformance.nemesis.mutations import make as make_mutation
from conformance.nemesis.wire import Codec, Frame, MalformedFrame, codec_for_any, frame_names
from conformance.secrets import SecretUrl

READ_CHUNK = 256 * 1024
CONNECT_TIMEOUT_S = 5.0
#: How long "after forwarding" waits for the peer's TCP stack to acknowledge the frame's bytes.
FLUSH_TIMEOUT_S = 2.0
ARROW = {Sender.CLIENT: "C->S", Sender.SERVER: "S->C"}
#: Frames whose bytes are not kept for the trace (payload only; their size is kept).
_UNKEPT = frozenset({"content-body"})


@dataclass(slots=True)
class TraceEntry:
    t: float
    conn: int
    sender: str
    index: int
    name: str
    channel: int
    size: int
    frame: Frame | None = None
    note: str = ""

    def line(self, t0: float) -> str:
        stamp = f"{(self.t - t0) * 1000:10.3f}ms conn#{self.conn}"
        if self.note:
            return f"{stamp} {'!!':<4} {self.note}"
        arrow = ARROW[Sender(self.sender)]
        detail = self.frame.detail() if self.frame is not None else f"{self.size - 8} bytes"
        return f"{stamp} {arrow} ch{self.channel:<3} #{self.index:<5} {self.name}" + (f"  {detail}" if detail else "")


class TraceReader:
    """Queries over a trace's entries; the recording side (:class:`Trace`) or a copy fetched from an
    isolated proxy's process (:class:`conformance.nemesis.proxy_isolated.RemoteTrace`)."""

    started: float
    total: int

    def entries(self) -> list[TraceEntry]:
        raise NotImplementedError

    def frames(self, conn: int | None = None, sender: Sender | str | None = None) -> list[str]:
        """Frame names in order (for checks: "the fault hit the intended frame")."""
        s = Sender(sender).value if sender is not None else None
        return [
            e.name
            for e in self.entries()
            if not e.note and (conn is None or e.conn == conn) and (s is None or e.sender == s)
        ]

    def notes(self) -> list[str]:
        return [e.note for e in self.entries() if e.note]

    def render(self) -> str:
        return self._render(self.entries(), self.total)

    def _render(self, entries: list[TraceEntry], total: int) -> str:
        omitted = total - len(entries)
        lines = [f"... {omitted} earlier entries omitted"] if omitted else []
        lines += [e.line(self.started) for e in entries]
        return "\n".join(lines)


class Trace(TraceReader):
    """The frames a proxy saw, both ways, in order. Bounded: the newest ``limit`` entries are kept."""

    def __init__(self, limit: int = 20000) -> None:
        self.started = time.monotonic()
        self._entries: collections.deque[TraceEntry | tuple] = collections.deque(maxlen=limit)
        self.total = 0
        self._lock = threading.Lock()

    def add(self, entry: TraceEntry) -> None:
        with self._lock:
            self._entries.append(entry)
            self.total += 1

    def frame(self, conn: int, sender: str, index: int, frame: Frame) -> None:
        """The hot path: a plain tuple per frame (deque.append is atomic); entries() builds objects."""
        self._entries.append((time.monotonic(), conn, sender, index, frame))  # type: ignore[arg-type]
        self.total += 1

    def note(self, conn: int, text: str) -> None:
        self.add(TraceEntry(time.monotonic(), conn, "proxy", 0, "", 0, 0, note=text))

    def entries(self) -> list[TraceEntry]:
        with self._lock:
            raw = list(self._entries)
        out = []
        for e in raw:
            if isinstance(e, tuple):
                t, conn, sender, index, f = e
                out.append(TraceEntry(t, conn, sender, index, f.name, f.channel, len(f.raw), None if f.name in _UNKEPT else f))
            else:
                out.append(e)
        return out


def first_half(raw: bytes) -> bytes:
    """What a fault "inside" a frame forwards: half its bytes, at least one, never its last (the
    frame-end octet), so the peer holds an incomplete frame."""
    return raw[: max(1, min(len(raw) // 2, len(raw) - 1))]


def _set_rst(transport: asyncio.BaseTransport) -> None:
    sock = transport.get_extra_info("socket")
    if sock is not None:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass


def _unsent(transport: asyncio.WriteTransport) -> int:
    """Bytes not yet acknowledged by the peer: asyncio's buffer plus the kernel's send queue."""
    n = transport.get_write_buffer_size()
    sock = transport.get_extra_info("socket")
    if sock is None:
        return n
    buf = array.array("i", [0])
    try:
        fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, buf, True)
    except OSError:
        return n
    return n + buf[0]


@dataclass(eq=False)
class _Link:
    """One client connection relayed to the broker."""

    id: int
    client: asyncio.StreamWriter
    server: asyncio.StreamWriter | None = None
    closed: bool = False
    stalled: bool = False
    dropped: set[Sender] = field(default_factory=set)
    counts: dict[Sender, int] = field(default_factory=lambda: {Sender.CLIENT: 0, Sender.SERVER: 0})
    family: type[Codec] | None = None
    #: The codecs of the two directions (client's, server's): a codec class with ``pair()`` makes
    #: them share what one direction tells about the other (AMQP 1.0's coordinator links).
    codecs: tuple[Codec, Codec] | None = None
    #: The mutation operator's state on this connection (None: frames are forwarded unchanged).
    mutator: Mutator | None = None
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    #: Closed while an "after forwarding" fault waits for its frame to land and acts: the other
    #: direction must not forward the peer's reply in that window (that would make "after the
    #: broker got tx.commit, before the client saw commit-ok" a race).
    gate: asyncio.Event = field(default_factory=asyncio.Event)
    #: DELAY faults holding a direction until a frame of the other one passes (Fault.until).
    holds: list[tuple[Fault, asyncio.Event]] = field(default_factory=list)
    #: The client's first frames have told the connection's name (the mutation reads it once).
    named: bool = False

    def __post_init__(self) -> None:
        self.gate.set()

    def writers(self) -> list[asyncio.StreamWriter]:
        return [w for w in (self.client, self.server) if w is not None]

    def reset(self) -> None:
        """RST both sides."""
        self.closed = True
        for w in self.writers():
            _set_rst(w.transport)
            w.transport.abort()
        self.ready.set()
        self.gate.set()

    def finish(self) -> None:
        """FIN both sides after flushing what was already forwarded."""
        self.closed = True
        for w in self.writers():
            w.transport.close()
        self.ready.set()
        self.gate.set()

    async def send(self, writer: asyncio.StreamWriter, chunks: list[bytes], sender: Sender, trace: "Trace") -> bool:
        """Forward whole frames unless the link is gated shut or gone; False if they were not sent."""
        if not self.gate.is_set():
            await self.gate.wait()
        if self.closed or self.stalled or sender in self.dropped:
            trace.note(self.id, f"{len(chunks)} frame(s) from the {sender.value} not forwarded: connection {'closed' if self.closed else 'stalled' if self.stalled else 'dropping'}")
            return False
        writer.write(chunks[0] if len(chunks) == 1 else b"".join(chunks))
        return True


class _MutationIO:
    """What a mutation operator may do to the one connection it rewrites (runs on the proxy's loop)."""

    def __init__(self, link: _Link, trace: "Trace") -> None:
        self.link = link
        self.conn = link.id
        self._trace = trace

    @property
    def closed(self) -> bool:
        """The connection is gone (reset, closed by a peer or by the proxy)."""
        return self.link.closed

    def _write(self, writer: asyncio.StreamWriter | None, raws: list[bytes]) -> None:
        if raws and writer is not None and not self.link.closed:
            writer.write(b"".join(raws))

    def to_server(self, raws: list[bytes]) -> None:
        self._write(self.link.server, raws)

    def to_client(self, raws: list[bytes]) -> None:
        self._write(self.link.client, raws)

    def note(self, text: str) -> None:
        self._trace.note(self.conn, text)

    def later(self, delay_s: float, fn: Callable[[], None]) -> None:
        asyncio.get_running_loop().call_later(delay_s, fn)

    def close(self) -> None:
        if not self.link.closed:
            self._trace.note(self.conn, "connection closed by the mutation (FIN both ways)")
            self.link.finish()

    def pending(self, sender: Sender) -> bytes:
        codecs = self.link.codecs
        buf = getattr(codecs[0 if sender is Sender.CLIENT else 1], "_buf", b"") if codecs is not None else b""
        return bytes(buf)


class ProxyBase:
    """What a case sees of a fault proxy, wherever its relay runs (a thread here, or a process)."""

    upstream: tuple[str, int]
    port: int
    trace: TraceReader

    @classmethod
    def for_url(cls, url: str, **kw: Any) -> Self:
        parts = urlsplit(url)
        port = parts.port or {"amqp": 5672, "amqps": 5671}.get(parts.scheme, 5672)
        return cls((parts.hostname or "127.0.0.1", port), **kw)

    def url(self, target_url: str) -> SecretUrl:
        """``target_url`` with host and port replaced by the proxy's (credentials and vhost kept,
        so the result stays redacted when printed)."""
        parts = urlsplit(target_url)
        userinfo = parts.netloc.rpartition("@")[0]
        netloc = (userinfo + "@" if userinfo else "") + f"127.0.0.1:{self.port}"
        return SecretUrl(urlunsplit(parts._replace(netloc=netloc)))

    def start(self) -> Self:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    #: The protocol the proxied clients speak, when the case's adapter says: a fault on a frame that
    #: protocol has no frame of that name for could never fire, and :meth:`expressible` says so.
    protocol: str | None = None

    def expressible(self, fault: Fault) -> Fault:
        """``fault`` when every frame it (and the faults it follows) names exists in :attr:`protocol`;
        else :class:`Unsupported` (cannot-express): the scenario is written in another protocol's
        frames, so the case cannot be put to this one, which is not the broker's doing."""
        names = frame_names(self.protocol) if self.protocol else frozenset()
        f: Fault | None = fault
        while names and f is not None:
            if f.frame != "*" and f.frame not in names:
                raise Unsupported(f"the case's fault names the frame {f.frame!r}, which {self.protocol} does not have "
                                  f"(its frames: {', '.join(sorted(names))})")
            f = f.following
        return fault

    def arm(self, fault: Fault) -> Fault:
        """Watch every connection for ``fault``'s frame; ``fault.fired`` is set once it acted."""
        raise NotImplementedError

    def cut_all(self) -> None:
        """RST every live connection now (e.g. after a stall the case has observed)."""
        raise NotImplementedError

    @property
    def errors(self) -> list[str]:
        """Bad input and broken connections the proxy reported, oldest first."""
        raise NotImplementedError

    @property
    def connections(self) -> int:
        """Client connections made through the proxy so far."""
        raise NotImplementedError

    def mutation_stats(self) -> dict[str, Any] | None:
        """The mutation this proxy applies and how many frames it rewrote, or None."""
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


class FaultProxy(ProxyBase):
    """Relay ``127.0.0.1:<port>`` to ``upstream`` from a thread of this process.

    Cheapest to start and to inspect, but the relay shares the GIL with the case's client: use
    :class:`~conformance.nemesis.proxy_isolated.IsolatedFaultProxy` where throughput matters."""

    def __init__(
        self,
        upstream: tuple[str, int],
        *,
        trace_limit: int = 20000,
        on_event: Callable[[str], None] | None = None,
        on_fired: Callable[[Fault], None] | None = None,
        mutation: str | None = None,
        on_struck: Callable[[Fault], None] | None = None,
    ) -> None:
        self.upstream = upstream
        #: Rewrites frames on every connection whose protocol it speaks (conformance.nemesis.mutations).
        #: "probe" rewrites nothing and records which operators would have; "none" is a plain relay.
        self.mutation: Mutation | None = make_mutation(mutation) if mutation and alters(mutation) else None
        self.probing = mutation == "probe"
        self.probed: dict[str, set[str]] = {}
        self.trace = Trace(trace_limit)
        self._errors: list[str] = []
        self.port = 0
        self._on_event = on_event
        self._on_fired = on_fired
        self._on_struck = on_struck
        self._faults: list[Fault] = []
        self._links: dict[int, _Link] = {}
        self._ids = itertools.count(1)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.base_events.Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle (called from the case's thread) ---------------------------------------------

    def start(self) -> Self:
        started = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                self._server = loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", 0, limit=READ_CHUNK))
                self.port = self._server.sockets[0].getsockname()[1]
            except BaseException as exc:  # pragma: no cover - binding loopback fails only on a broken host
                failure.append(exc)
                started.set()
                return
            started.set()
            loop.run_forever()
            loop.close()

        self._thread = threading.Thread(target=run, name="fault-proxy", daemon=True)
        self._thread.start()
        started.wait(10)
        if failure:
            raise failure[0]
        return self

    def close(self) -> None:
        loop = self._loop
        if loop is None or loop.is_closed():
            return

        async def shutdown() -> None:
            if self._server is not None:
                self._server.close()
            for link in list(self._links.values()):
                if not link.closed:
                    link.reset()
            await asyncio.sleep(0)  # allowed: one loop turn so aborted transports release their sockets

        try:
            asyncio.run_coroutine_threadsafe(shutdown(), loop).result(5)
        except Exception:
            pass
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(5)

    # -- faults --------------------------------------------------------------------------------

    def arm(self, fault: Fault) -> Fault:
        self.expressible(fault)
        self._faults = [*[f for f in self._faults if not f.fired.is_set()], fault]
        return fault

    def cut_all(self) -> None:
        loop = self._loop
        if loop is None or loop.is_closed():
            return

        async def cut() -> None:
            for link in list(self._links.values()):
                if not link.closed:
                    self.trace.note(link.id, "cut by the case")
                    link.reset()

        asyncio.run_coroutine_threadsafe(cut(), loop).result(5)

    @property
    def errors(self) -> list[str]:
        return list(self._errors)

    @property
    def connections(self) -> int:
        return len(self._links)

    def mutation_stats(self) -> dict[str, Any] | None:
        m = self.mutation
        if self.probing:
            return {"spec": "probe", "touches": {name: sorted(conns) for name, conns in self.probed.items()}}
        if m is None:
            return None
        return {"spec": m.spec, "name": m.name, "protocol": m.protocol, "description": m.description, "rewritten": m.rewritten}

    # -- relay (runs on the proxy's loop) -------------------------------------------------------

    def _report(self, conn: int, text: str) -> None:
        self._errors.append(f"conn#{conn}: {text}")
        self.trace.note(conn, text)
        self._event(f"conn#{conn}: {text}")

    def _event(self, text: str) -> None:
        if self._on_event is not None:
            try:
                self._on_event(text)
            except Exception:
                pass

    async def _handle(self, creader: asyncio.StreamReader, cwriter: asyncio.StreamWriter) -> None:
        link = _Link(next(self._ids), cwriter)
        self._links[link.id] = link
        try:
            sreader, swriter = await asyncio.wait_for(asyncio.open_connection(*self.upstream, limit=READ_CHUNK), CONNECT_TIMEOUT_S)
        except (OSError, asyncio.TimeoutError) as exc:
            self._report(link.id, f"broker {self.upstream[0]}:{self.upstream[1]} unreachable ({exc!r}); client connection closed")
            link.finish()
            return
        link.server = swriter
        if link.closed:  # the proxy was shut down while connecting
            link.reset()
            return
        await asyncio.gather(
            self._pump(link, Sender.CLIENT, creader, swriter),
            self._pump(link, Sender.SERVER, sreader, cwriter),
        )

    async def _codec(self, link: _Link, sender: Sender, first: bytes) -> Codec:
        if sender is Sender.CLIENT:
            family = codec_for_any(first)  # plugin framers (conformance.nemesis.wire) beside AMQP's
            if family is None:
                raise MalformedFrame(f"not an AMQP protocol header nor a frame of an installed framer: {first[:8]!r}")
            link.family = family
            pair = getattr(family, "pair", None)
            link.codecs = pair() if pair is not None else (family(), family())
            if self.mutation is not None and self.mutation.protocol == family.protocol:
                link.mutator = self.mutation.mutator(_MutationIO(link, self.trace))
            elif self.probing:
                probe = Mutation("probe", family.protocol, "records which operators would rewrite a frame", Probe)
                link.mutator = Probe(probe, _MutationIO(link, self.trace), None, family.protocol, self.probed)
            link.ready.set()
        else:
            await link.ready.wait()
            if link.family is None or link.codecs is None:
                raise MalformedFrame("server spoke before the client sent a protocol header")
        return link.codecs[0 if sender is Sender.CLIENT else 1]

    async def _pump(self, link: _Link, sender: Sender, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        codec: Codec | None = None
        other = "broker" if sender is Sender.CLIENT else "client"
        try:
            while not link.closed:
                data = await reader.read(READ_CHUNK)
                if link.closed:
                    return
                if not data:
                    self._last_words(link, sender)
                    pending = codec.pending if codec is not None else 0
                    if pending:
                        self._report(link.id, f"{sender.value} closed the connection {pending} bytes into a frame (truncated frame discarded)")
                    else:
                        self.trace.note(link.id, f"{sender.value} closed the connection (FIN); closing the {other} side")
                    link.finish()
                    return
                if link.stalled or sender in link.dropped:
                    continue
                if codec is None:
                    if sender is Sender.CLIENT and len(data) < 8 and data == b"AMQP"[: len(data)]:
                        data += await reader.readexactly(8 - len(data))
                    codec = await self._codec(link, sender, data)
                out: list[bytes] = []
                ending: list[tuple[Fault, asyncio.Event, str]] = []
                trace, who, faults = self.trace, sender.value, self._faults
                mutator = link.mutator
                for frame in codec.feed(data):
                    index = link.counts[sender] = link.counts[sender] + 1
                    trace.frame(link.id, who, index, frame)
                    raws = self._mutate(link, mutator, sender, frame) if mutator is not None else None
                    fault = self._match(link, sender, frame) if faults else None
                    if fault is None:
                        if raws is None:
                            out.append(frame.raw)
                        else:
                            out += raws
                        if link.holds:
                            ending += [(f, ev, f"{who} frame #{index} {frame.name}") for f, ev in link.holds
                                       if f.sender is not sender and frame.name in f.until]
                        continue
                    if fault.moment is Moment.AFTER:
                        out += [frame.raw] if raws is None else raws
                    elif fault.moment is Moment.INSIDE:
                        out.append(first_half(frame.raw if raws is None else b"".join(raws)))
                    if out and not await link.send(writer, out, sender, self.trace):
                        return
                    out = []
                    fault.hit = f"conn#{link.id} {sender.value} frame #{index} {frame.name} on channel {frame.channel}"
                    if fault.moment is not Moment.BEFORE:
                        link.gate.clear()
                        try:
                            await self._flushed(writer)
                            await self._fire(link, sender, fault)
                        finally:
                            link.gate.set()
                    else:
                        if fault.action is Action.DELAY:
                            out += [frame.raw] if raws is None else raws
                        await self._fire(link, sender, fault)
                    if link.closed or link.stalled or sender in link.dropped:
                        out = []
                        break
                if out and not await link.send(writer, out, sender, self.trace):
                    self._release(link, ending, " (the connection closed)")
                    return
                await writer.drain()
                if ending:
                    await self._flushed(writer)  # the held peer's counterpart has it, not just the proxy
                    self._release(link, ending)
        except MalformedFrame as exc:
            self._report(link.id, f"malformed input from the {sender.value}: {exc}; connection closed")
            link.finish()
        except asyncio.IncompleteReadError:
            self._report(link.id, f"{sender.value} closed the connection inside the protocol header; connection closed")
            link.finish()
        except (ConnectionResetError, BrokenPipeError, ConnectionAbortedError) as exc:
            if not link.closed:
                self.trace.note(link.id, f"{sender.value} side reset ({type(exc).__name__}); resetting the {other} side")
                if self._last_words(link, sender):
                    link.finish()
                else:
                    link.reset()
        except Exception as exc:  # the proxy never takes the run down with it
            if not link.closed:
                self._report(link.id, f"proxy error on the {sender.value} side: {exc!r}; connection reset")
                link.reset()

    def _release(self, link: _Link, ending: list[tuple[Fault, asyncio.Event, str]], why: str = "") -> None:
        """End the holds whose ``until`` frame passed (Fault.until)."""
        for fault, release, what in ending:
            if not release.is_set():
                fault.hit = f"{fault.hit}; held until {what} passed{why}"
                self.trace.note(link.id, f"hold released: {what} passed{why}")
                release.set()

    def _mutate(self, link: _Link, mutator: Mutator, sender: Sender, frame: Frame) -> list[bytes] | None:
        """The frames to forward in ``frame``'s place; a failing operator leaves the frame unchanged.

        A connection that names itself as the suite's administration (queue setup and counts through
        a broker's management protocol, e.g. qpidd's QMF over AMQP 1.0) is not under test: once its
        name is read from its first frames, the mutation leaves it alone, so a mutation of the
        protocol breaks the broker's behaviour the cases judge, never the suite's own setup."""
        if sender is Sender.CLIENT and not link.named:
            name = connection_name_of(link.family, frame)
            if name is not None:
                link.named = True
                if name.startswith(ADMIN_CONNECTION_PREFIX):
                    link.mutator = None
                    self.trace.note(link.id, f"MUTATION {mutator.mutation.spec} left out: {name!r} is the suite's administration connection")
                    return None
        try:
            return mutator.rewrite(sender, frame)
        except Exception as exc:
            self.trace.note(link.id, f"MUTATION {mutator.mutation.spec} not applied to {frame.name}: {exc!r}; forwarded unchanged")
            return None

    def _last_words(self, link: _Link, sender: Sender) -> bool:
        """``sender`` went away: forward what the mutation adds before the other side closes (FIN, so
        the peer reads it). True if anything was sent."""
        if link.mutator is None or link.closed:
            return False
        try:
            raws = link.mutator.closing(sender)
        except Exception as exc:
            self.trace.note(link.id, f"MUTATION {link.mutator.mutation.spec} failed at close: {exc!r}")
            return False
        writer = link.server if sender is Sender.CLIENT else link.client
        if not raws or writer is None:
            return False
        writer.write(b"".join(raws))
        return True

    def _match(self, link: _Link, sender: Sender, frame: Frame) -> Fault | None:
        hit = None
        for fault in self._faults:
            if fault.matches(link.id, sender, frame.name, frame.channel) and hit is None:
                hit = fault
        return hit

    async def _flushed(self, writer: asyncio.StreamWriter) -> None:
        """Wait until the peer's TCP stack has acknowledged everything written so far."""
        await writer.drain()
        end = time.monotonic() + FLUSH_TIMEOUT_S
        while _unsent(writer.transport) and time.monotonic() < end:
            await asyncio.sleep(0.0005)  # allowed: polling the kernel's send queue, bounded

    async def _fire(self, link: _Link, sender: Sender, fault: Fault) -> None:
        text = f"FAULT {fault.describe()}: hit {fault.hit}"
        self.trace.note(link.id, text)
        self._event(text)
        release = asyncio.Event()
        if fault.action is Action.DELAY and fault.until:
            link.holds.append((fault, release))  # before anyone learns of the hold and sends the frame ending it
        fault.struck.set()
        if self._on_struck is not None:
            try:
                self._on_struck(fault)
            except Exception:  # the listener is gone; the fault still acts
                pass
        if fault.action is Action.CUT:
            link.reset()
        elif fault.action is Action.FIN:
            link.finish()
        elif fault.action is Action.STALL:
            link.stalled = True
        elif fault.action is Action.DROP:
            link.dropped.add(sender)
        elif fault.action is Action.DELAY and fault.until:
            try:
                await asyncio.wait_for(release.wait(), fault.delay_s)
            except asyncio.TimeoutError:
                fault.hit = f"{fault.hit}; held {fault.delay_s:g}s, its bound: no {' or '.join(fault.until)} passed"
                self.trace.note(link.id, f"hold released after {fault.delay_s:g}s: no {' or '.join(fault.until)} passed")
            finally:
                link.holds.remove((fault, release))
        elif fault.action is Action.DELAY:
            await asyncio.sleep(fault.delay_s)  # allowed: the delay is the fault being injected
        fault.fired.set()
        if self._on_fired is not None:
            try:
                self._on_fired(fault)
            except Exception:  # the listener is gone; the fault still acted
                pass
