"""Protocol mutations: named operators that make a real broker wrong in one known way, on the wire.

A conformance case proves nothing until it has been seen to fail against a broker that violates
its requirement. No such broker is at hand, so the fault proxy makes one: a mutation rewrites the
frames between the real broker and the client (clears the redelivered flag, drops the client's
acks, lets a transaction's publishes through at once...) and the catalogue is run through it
(``conformance selftest``). Each operator keeps the stream valid for the client library (frame
lengths, delivery tags, replies it waits for), so the case observes a misbehaving broker rather
than a crashed client. A frame an operator cannot rewrite is forwarded unchanged, and the trace
says so.

Operators are code (this package); which requirements each one must break is data
(``expectations.yaml``). A spec is ``name`` or ``name:parameter`` (``argument-stripped:x-max-length``).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Callable, Protocol

import yaml

from conformance import yamlio
from conformance.errors import UsageError
from conformance.nemesis.faults import Sender
from conformance.nemesis.wire import Frame

EXPECTATIONS_FILE = Path(__file__).with_name("expectations.yaml")
#: --mutation values that change nothing on the wire: a plain relay, and the self-test's probe that
#: only records which operators would have rewritten a frame.
RELAYS = ("none", "probe")


def alters(spec: str | None) -> bool:
    """Whether a --mutation value makes the broker faulty (its records are never results about it)."""
    return bool(spec) and spec not in RELAYS


class LinkIO(Protocol):
    """What an operator may do to the one connection it rewrites (implemented by the proxy)."""

    conn: int

    def to_server(self, raws: list[bytes]) -> None:
        """Write whole frames to the broker now, between the client's frames."""

    def to_client(self, raws: list[bytes]) -> None:
        """Write whole frames to the client now, between the broker's frames."""

    def note(self, text: str) -> None:
        """A line in the wire trace (every rewrite, and every frame left unchanged, says why)."""

    def later(self, delay_s: float, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the relay's loop after ``delay_s`` (an operator that holds frames back)."""

    def close(self) -> None:
        """Close both sides now (FIN, no protocol handshake): a broker that drops the connection."""

    def pending(self, sender: Sender) -> bytes:
        """The bytes of a frame ``sender`` began and never finished (held back: only whole frames
        pass), for an operator's :meth:`Mutator.closing` that hands the broker what it got."""

    @property
    def closed(self) -> bool:
        """The connection is gone: reset, or closed by either peer (an operator that keeps what one
        connection left for a later one reads it of connections it no longer hears from)."""


class Mutator:
    """One operator's state on one connection. Subclasses override :meth:`rewrite`."""

    def __init__(self, mutation: "Mutation", io: LinkIO, param: str | None) -> None:
        self.mutation = mutation
        self.io = io
        self.param = param

    def rewrite(self, sender: Sender, frame: Frame) -> list[bytes] | None:
        """Frames to forward in ``frame``'s place: None forwards it unchanged, [] swallows it."""
        return None

    def closing(self, sender: Sender) -> list[bytes]:
        """``sender`` went away: frames to send to the other peer before its side is closed too."""
        return []

    def applied(self, what: str) -> None:
        self.mutation.count()
        self.io.note(f"MUTATION {self.mutation.spec}: {what}")

    def skipped(self, what: str) -> None:
        self.io.note(f"MUTATION {self.mutation.spec} not applied: {what}")


@dataclasses.dataclass
class Mutation:
    """A named operator with its parameter; counts the frames it rewrote across all connections."""

    name: str
    protocol: str
    description: str
    factory: Callable[["Mutation", LinkIO, str | None], Mutator]
    param: str | None = None
    default_param: str | None = None
    rewritten: int = 0
    #: "selftest": one of the self-test's operators (expectations.yaml says what it breaks); "soak":
    #: made for a soak's checkers to find (``conformance soak --mutation``), never in the self-test.
    scope: str = "selftest"
    #: What the operator's connections share (one Mutation serves every connection of a proxy): a
    #: rate counted over all of them, what one connection leaves for the next after a failover.
    state: dict[str, Any] = dataclasses.field(default_factory=dict, repr=False, compare=False)

    @property
    def spec(self) -> str:
        return f"{self.name}:{self.param}" if self.param and self.param != self.default_param else self.name

    def count(self) -> None:
        self.rewritten += 1

    def mutator(self, io: LinkIO) -> Mutator:
        return self.factory(self, io, self.param if self.param is not None else self.default_param)


_REGISTRY: dict[str, Mutation] = {}


def operator(name: str, protocol: str, description: str, *, default_param: str | None = None,
             scope: str = "selftest") -> Callable[[type[Mutator]], type[Mutator]]:
    """Register a Mutator class under ``name`` (class decorator)."""

    def register(cls: type[Mutator]) -> type[Mutator]:
        if name in _REGISTRY:
            raise ValueError(f"mutation {name!r} registered twice")
        _REGISTRY[name] = Mutation(name, protocol, description, cls, default_param=default_param, scope=scope)
        return cls

    return register


class _Unheard:
    """The IO of an operator in a probe: it sees the stream but can change nothing."""

    def __init__(self, conn: int, source: LinkIO | None = None) -> None:
        self.conn = conn
        self._source = source

    def pending(self, sender: Sender) -> bytes:
        return self._source.pending(sender) if self._source is not None and hasattr(self._source, "pending") else b""

    def to_server(self, raws: list[bytes]) -> None:
        pass

    def to_client(self, raws: list[bytes]) -> None:
        pass

    def note(self, text: str) -> None:
        pass

    def later(self, delay_s: float, fn: Callable[[], None]) -> None:
        pass


class Probe(Mutator):
    """Runs every operator of a protocol beside an unchanged stream and records, per connection name,
    which operators would have rewritten a frame. Until an operator's first rewrite the stream it
    saw is exactly what it would see as the only mutation, so "would rewrite" is exact; a self-test
    then runs each mutation only on the cases it can touch."""

    def __init__(self, mutation: "Mutation", io: LinkIO, param: str | None, protocol: str, found: dict[str, set[str]]) -> None:
        super().__init__(mutation, io, param)
        self.found = found
        self.name: str | None = None
        _load()
        self.naming = _NAMING[protocol]
        self.watch = [(m, m.mutator(_Unheard(io.conn, io))) for m in (dataclasses.replace(b, rewritten=0, state={}) for b in available(protocol))]

    def rewrite(self, sender: Sender, frame: Frame) -> list[bytes] | None:
        if self.name is None and sender is Sender.CLIENT:
            self.name = self.naming(frame)
        self._observe(lambda op: op.rewrite(sender, frame))
        return None

    def closing(self, sender: Sender) -> list[bytes]:
        self._observe(lambda op: op.closing(sender))
        return []

    def _observe(self, step: Callable[[Mutator], object]) -> None:
        remaining = []
        for m, op in self.watch:
            try:
                step(op)
            except Exception:
                pass
            if m.rewritten:
                self.found.setdefault(m.name, set()).add(self.name or "")
            else:
                remaining.append((m, op))
        self.watch = remaining


#: protocol -> how a connection names itself in its first frames (None until it did)
_NAMING: dict[str, Callable[[Frame], str | None]] = {}


#: A connection whose name starts so is the suite's administration (queue setup and counters), not
#: under test: mutations leave it alone (conformance.nemesis.proxy).
ADMIN_CONNECTION_PREFIX = "conformance admin"


def connection_name_of(family: Any, frame: Frame) -> str | None:
    """The name a connection of ``family`` (a codec class) gives itself in ``frame``; None before it did."""
    _load()
    fn = _NAMING.get(str(getattr(family, "protocol", "")))
    return fn(frame) if fn is not None else ""


def naming(protocol: str) -> Callable[[Callable[[Frame], str | None]], Callable[[Frame], str | None]]:
    def register(fn: Callable[[Frame], str | None]) -> Callable[[Frame], str | None]:
        _NAMING[protocol] = fn
        return fn

    return register


def _load() -> dict[str, Mutation]:
    from conformance.plugins import load_group

    load_group(MUTATION_GROUP)  # each protocol's mutation module registers its operators on import
    return _REGISTRY


#: Entry-point group of plugin mutation modules; a module's ``EXPECTATIONS_FILE`` joins expectations.yaml.
MUTATION_GROUP = "conformance.mutations"


def _plugin_expectation_files() -> list[Path]:
    from conformance.plugins import load_group

    return [Path(str(m.EXPECTATIONS_FILE)) for m in load_group(MUTATION_GROUP).values() if getattr(m, "EXPECTATIONS_FILE", None)]


def available(protocol: str | None = None, scope: str = "selftest") -> list[Mutation]:
    """The registered operators of ``protocol`` (every protocol when None) made for ``scope``."""
    return [m for m in _load().values() if (protocol is None or m.protocol == protocol) and m.scope == scope]


def make(spec: str) -> Mutation:
    """A fresh :class:`Mutation` from ``name`` or ``name:param``; UsageError names the known ones."""
    name, _, param = spec.partition(":")
    known = _load()
    if name not in known:
        raise UsageError(f"unknown mutation {name!r}; known: {', '.join(sorted(known))}")
    base = known[name]
    return dataclasses.replace(base, param=param or None, rewritten=0, state={})


@dataclasses.dataclass(frozen=True)
class Expectation:
    """Which requirements a mutation must break (``breaks``) and may break as well (``may_break``).

    A *hostile* mode (``hostile: true``) emulates a broker that stalls the suite rather
    than violating one rule (a target that stops answering, deliveries withheld). It is not part of
    the self-test's kill matrix (no ``breaks``, so the self-test leaves it out of scope); instead a
    run through it must end quickly, fail the requirements under ``must_fail`` and name each text
    under ``must_name`` in some record (tests/runner/test_liveness.py)."""

    mutation: str
    breaks: tuple[str, ...]
    may_break: tuple[str, ...]
    why: str
    hostile: bool = False
    must_fail: tuple[str, ...] = ()
    must_name: tuple[str, ...] = ()


def expectations(path: Path = EXPECTATIONS_FILE) -> dict[str, Expectation]:
    """The declared expectations, checked against the registry and the catalogue (with the bundled
    file, the files installed plugins ship too)."""
    if path == EXPECTATIONS_FILE:
        merged: dict[str, Expectation] = {}
        for p in [path, *_plugin_expectation_files()]:
            merged.update(_expectations_of(p))
        return merged
    return _expectations_of(path)


def _expectations_of(path: Path) -> dict[str, Expectation]:
    from conformance.catalogue.packs import active as active_packs
    from conformance.catalogue.requirements import requirement

    try:
        raw: Any = yamlio.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise UsageError(f"{path}: cannot read mutation expectations: {exc}") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("mutations"), dict):
        raise UsageError(f"{path}: expected a 'mutations:' mapping")
    out: dict[str, Expectation] = {}
    for spec, entry in raw["mutations"].items():
        make(spec)  # the operator exists
        if isinstance(entry, dict) and entry.get("hostile"):
            fails, names = tuple(entry.get("must_fail") or ()), tuple(entry.get("must_name") or ())
            if not entry.get("why") or not (fails or names) or entry.get("breaks"):
                raise UsageError(f"{path}: hostile mode {spec!r} needs 'why' and 'must_fail' or 'must_name' (and no 'breaks')")
            for rid in fails:
                requirement(rid)
            out[spec] = Expectation(spec, (), (), str(entry["why"]).strip(), True, fails, names)
            continue
        if not isinstance(entry, dict) or not entry.get("breaks") or not entry.get("why"):
            raise UsageError(f"{path}: mutation {spec!r} needs 'breaks' (requirement ids) and 'why'")
        breaks, may = tuple(entry["breaks"]), tuple(entry.get("may_break") or ())
        pack = entry.get("pack")  # breaks requirements of a pack (conformance.catalogue.packs): checked when it is loaded
        if pack is None or pack in {p.name for p in active_packs()}:
            for rid in (*breaks, *may):
                requirement(rid)  # raises on an unknown id
        out[spec] = Expectation(spec, breaks, may, str(entry["why"]).strip())
    return out
