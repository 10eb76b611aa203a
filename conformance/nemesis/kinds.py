"""The kinds of fault the suite can inflict: what each names itself, what a target must offer to take
it, how it is fired and how it is healed.

A case names the kinds its scenario inflicts (:meth:`conformance.kit.case.Case.fault_kinds`). Each
kind that needs something of the target names an ability: a capability of the one vocabulary
(``conformance/catalogue/data/capabilities.yaml``) that the target offers, as the adapter offers the
protocol's. The runner asks, before a case runs, whether the target offers every ability its kinds
need (:func:`fault_applicability`, beside the protocol's
:func:`conformance.catalogue.capabilities.applicability`); one it lacks makes the case
``unsupported (no-fault)`` in the kind's own words (:attr:`FaultKind.cannot`), without running it.

Three scopes:

- connection: the fault proxy (conformance.nemesis.proxy) acts on one proxied connection at a frame
  the case names (:class:`conformance.nemesis.faults.Fault`); any target takes it, and there is
  nothing to heal on the broker (the connection is gone or held; the case connects again).
- broker: the whole node the suite launched restarts or dies (:func:`strike`); the kind heals it
  before the case observes (kill -9 is followed by a start on the node's own data).
- node: one node of a cluster the suite launched dies while the others serve
  (conformance.nemesis.cluster.Nodes), or is cut off from the others while it and they stay up
  and reachable by clients (a partition); the case or soak heals it before it ends, whatever happened.

A new kind is one :class:`FaultKind` here, its ability in capabilities.yaml, the operations it needs
of a target as a Protocol a launcher implements (as :class:`ClusterOps`), and the cases that name it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol, cast, runtime_checkable

from conformance.nemesis.faults import Action

CONNECTION, BROKER, NODE = "connection", "broker", "node"


def _nothing(*_: Any) -> None:
    return None


def _any_target(target: Any) -> bool:
    return True


@dataclass(frozen=True, eq=False)
class FaultKind:
    """One kind of fault; compared by identity (each kind is one object of :data:`KINDS`)."""

    name: str
    scope: str
    #: What the fault does, in one line.
    does: str
    #: The capability the target must offer (capabilities.yaml), or None: every target takes it.
    ability: str | None = None
    #: Whether ``target`` (a conformance.targets.Target, or None for a URL the suite only connects
    #: to) offers :attr:`ability`.
    offered_by: Callable[[Any], bool] = field(default=_any_target, repr=False)
    #: Why a target without the ability cannot take it; ``{target}`` is the target's name. A
    #: function of the target when the reason depends on it.
    cannot: str | Callable[[Any], str] = ""
    #: The nemesis's act: (target) for a broker kind, (cluster operations, node) for a node kind; a
    #: connection kind is fired by the fault proxy on its frame instead.
    fire: Callable[..., None] = field(default=_nothing, repr=False)
    #: What brings the broker or node back after :attr:`fire`, same arguments; nothing when the
    #: fault heals itself (a restart ends with the node up) or leaves nothing on the broker to heal.
    #: It may return a line of what the target reported (a partition's evidence) for the history.
    heal: Callable[..., None] = field(default=_nothing, repr=False)
    #: The history's words for the act ("" when the act is told by its end) and for the node being back.
    fired_event: str = ""
    back_event: str = "start"
    #: What a target that takes the fault says about it ("" when nothing): a function of the target,
    #: told in the history of every case the fault serves and in its verdict's reason.
    note: Callable[[Any], str] = field(default=lambda target: "", repr=False)
    #: How long the fault lasts between :attr:`fire` and :attr:`heal` (a pause must outlast the
    #: clients' patience to be a fault at all); 0 when the act itself is the fault.
    hold_s: float = 0.0

    def cannot_take(self, target: Any) -> str:
        """The reason a target without the ability gives: the kind's words with the target's name."""
        if callable(self.cannot):
            return self.cannot(target)
        return self.cannot.format(target=getattr(target, "name", None) or "this target")

    def __str__(self) -> str:
        return self.name


@runtime_checkable
class ClusterOps(Protocol):
    """What a launched cluster target offers the node kinds (conformance.nemesis.cluster.Nodes uses them)."""

    def node_names(self) -> list[str]: ...
    def node_urls(self) -> dict[str, str]: ...
    def kill_node(self, name: str) -> None: ...
    def start_node(self, name: str) -> None: ...
    def stop_node(self, name: str) -> None: ...
    def restart_node(self, name: str) -> None: ...
    def node_running(self, name: str) -> bool: ...
    def queue_replicas(self, queue: str) -> dict[str, Any]: ...
    def set_policy(self, name: str, pattern: str, definition: dict[str, Any], apply_to: str = "queues") -> None: ...
    def clear_policy(self, name: str) -> None: ...


@runtime_checkable
class PartitionOps(Protocol):
    """What a launched cluster target offers the partition kind, on top of :class:`ClusterOps`."""

    def partition_unusable(self) -> str | None: ...
    def partition(self, a: list[str], b: list[str]) -> None: ...
    def heal_partition(self) -> str: ...
    def await_whole(self, timeout: float = ..., queue: str | None = ...) -> str: ...


#: A node may die while a majority serves: three nodes at least.
CLUSTER_NODES = 3


def _cluster(target: Any) -> bool:
    return isinstance(target, ClusterOps) and len(cast(ClusterOps, target).node_names()) >= CLUSTER_NODES


def _launched(target: Any) -> bool:
    return target is not None and bool(target.can_restart)


def _cannot_restart(target: Any) -> str:
    name = getattr(target, "name", None) or "this target"
    return f"{name} cannot be restarted or killed by the suite; broker faults need a launched target"


#: The words of a no-store note in a verdict's reason (the self-test's judge reads them: a pass on
#: such a target after its own restart cannot be made to fail by a mutation of the wire).
NO_STORE_NOTE = "has no store"


def _store_note(target: Any) -> str:
    """What a launched target without a store says about a restart or kill it takes: the broker comes
    back on its own data, which holds none of its durable state (the definition's ``no_store``). Not a
    reason to refuse the fault: what the broker then does is judged, the note tells the reader why
    durable state vanished (a profile may document it, conditioned on the same fact)."""
    why = getattr(target, "no_store", None) if target is not None else None
    if not why:
        return ""
    return f"{getattr(target, 'name', None) or 'the target'} {NO_STORE_NOTE} ({why}): its durable state does not survive a restart or kill"


#: How long a pause lasts: longer than a client's 1-2 s operation timeouts, shorter than the
#: heartbeats that would end the connection (RabbitMQ and LavinMQ default to 60 s).
PAUSE_S = 3.0


def _pausable(target: Any) -> bool:
    return target is not None and bool(getattr(target, "can_pause", False))


RESTART = FaultKind(
    "restart", BROKER, "a graceful restart of the node the suite launched; every connection is gone afterwards",
    ability="fault.restart", offered_by=_launched, cannot=_cannot_restart, note=_store_note,
    fire=lambda target: target.restart(), back_event="restart")
KILL = FaultKind(
    "kill", BROKER, "kill -9 of the node the suite launched, then a start on its own data",
    ability="fault.restart", offered_by=_launched, cannot=_cannot_restart, note=_store_note,
    fire=lambda target: target.kill(), heal=lambda target: target.start(), fired_event="kill -9")
PAUSE = FaultKind(
    "pause", BROKER, "SIGSTOP of the node the suite launched (its sockets stay open, nothing is answered), then SIGCONT",
    ability="fault.pause", offered_by=_pausable,
    cannot="{target} cannot be paused by the suite; a pause needs a process the suite launched",
    fire=lambda target: target.pause(), heal=lambda target: target.resume(), fired_event="SIGSTOP", back_event="SIGCONT",
    hold_s=PAUSE_S)
NODE_KILL = FaultKind(
    "node-kill", NODE, "kill -9 of one node of a cluster the suite launched, while the others serve",
    ability="fault.node-kill", offered_by=_cluster,
    cannot="{target} is not a cluster of 3 or more nodes the suite launched; failover cases need one (e.g. --target rabbitmq-cluster)",
    fire=lambda ops, node: ops.kill_node(node), heal=lambda ops, node: ops.start_node(node), fired_event="kill -9")

#: How long a partition lasts: longer than the cluster's failure detection (the rabbitmq-cluster
#: target lowers Erlang's net_ticktime to 10 s: a silent peer is down after 7.5-12.5 s), so the
#: nodes notice it and act (the minority pauses) before the heal.
PARTITION_S = 20.0
#: Bound on the cluster being whole again after a heal (the minority resumes, rejoins, and its
#: replicas catch up; 10-20 s seen here on a busy 2-core machine).
WHOLE_S = 120.0


def _partitionable(target: Any) -> bool:
    return _cluster(target) and isinstance(target, PartitionOps) and cast(PartitionOps, target).partition_unusable() is None


def _cannot_partition(target: Any) -> str:
    name = getattr(target, "name", None) or "this target"
    if not _cluster(target) or not isinstance(target, PartitionOps):
        return (f"{name} is not a cluster of 3 or more nodes the suite launched on addresses of their own; "
                "a partition needs one (e.g. --target rabbitmq-cluster)")
    return f"{name} cannot be partitioned here: {cast(PartitionOps, target).partition_unusable()}"


def _isolate(ops: Any, node: str) -> None:
    ops.partition([node], [n for n in ops.node_names() if n != node])


def _rejoin(ops: Any, node: str) -> str:
    """Every link back, then the cluster whole again; what the target reported of both."""
    seen = ops.heal_partition()
    whole = ops.await_whole(WHOLE_S)
    return "; ".join(x for x in (seen, whole) if x)


PARTITION = FaultKind(
    "partition", NODE, "one node of a cluster the suite launched cut off from the others (a minority of one), every node "
    "up and reachable by clients; healed by letting every link through again",
    ability="fault.partition", offered_by=_partitionable, cannot=_cannot_partition,
    fire=_isolate, heal=_rejoin, fired_event="isolated", back_event="whole", hold_s=PARTITION_S)

#: What the fault proxy does to a connection, one kind per action of conformance.nemesis.faults.
_CONNECTION_DOES = {
    Action.CUT: "reset both sockets (RST) at a frame: a crashed host or a pulled cable",
    Action.FIN: "close both sockets in order (FIN) at a frame, without the protocol's close handshake",
    Action.STALL: "keep both sockets open and discard everything from a frame on (a blackhole)",
    Action.DELAY: "hold a frame, and what follows it in that direction, for a while",
    Action.DROP: "discard a frame and what follows it in that direction; the other direction flows",
}
CONNECTION_KINDS = {a.value: FaultKind(a.value, CONNECTION, does) for a, does in _CONNECTION_DOES.items()}

#: Every kind by name.
KINDS: dict[str, FaultKind] = {k.name: k for k in (*CONNECTION_KINDS.values(), RESTART, KILL, PAUSE, NODE_KILL, PARTITION)}


def kind(value: FaultKind | str) -> FaultKind:
    """The kind ``value`` names (a kind, or its name as a case written before kinds had a home
    returns it); ValueError naming the known kinds otherwise."""
    if isinstance(value, FaultKind):
        return value
    try:
        return KINDS[value]
    except KeyError:
        raise ValueError(f"unknown fault kind {value!r} (known: {', '.join(KINDS)})") from None


def broker_kind(value: FaultKind | str) -> FaultKind:
    """:func:`kind`, refused unless it faults the whole broker (what a phased case may share)."""
    k = kind(value)
    if k.scope != BROKER:
        raise ValueError(f"fault kind {k.name!r} is not a broker fault (one of {', '.join(n for n, x in KINDS.items() if x.scope == BROKER)})")
    return k


def fault_applicability(faults: Iterable[FaultKind], target: Any) -> str | None:
    """Why ``target`` cannot take one of ``faults`` (the kind's own words: a case that inflicts it
    is ``unsupported (no-fault)``), or None when it offers every ability they need. ``target``:
    the run's target, None for a URL the suite only connects to. Asked before every case: only the
    kinds the case names are asked of the target (most name none)."""
    for k in faults:
        if k.ability is not None and not k.offered_by(target):
            return k.cannot_take(target)
    return None


def fault_notes(faults: Iterable[FaultKind], target: Any) -> str:
    """What ``target`` says about the faults it takes (:attr:`FaultKind.note`), each once, or "":
    e.g. that a node without a store comes back without its durable state. The runner gives it to
    the verdict of every case that inflicts one of ``faults``, so a record shows why state vanished."""
    said: list[str] = []
    for k in faults:
        note = k.note(target) if k.offered_by(target) else ""
        if note and note not in said:
            said.append(note)
    return "; ".join(said)


def strike(k: FaultKind, target: Any, say: Callable[[str, str], None], shared: str = "", node: str | None = None) -> float:
    """Fire kind ``k`` at ``target`` (a node kind at its ``node``) and heal it, telling the history
    through ``say(op, detail)`` (``shared``: how many cases the fault serves, appended to each
    detail). Returns when the heal ended (a broker kind: the node accepts connections again), with
    the time that took."""
    name = node or target.name
    args = (target,) if node is None else (target, node)
    suffix = f" {shared}" if shared else ""
    start = time.monotonic()
    note = k.note(target)
    if note:
        say("note", f"{note}{suffix}")
    k.fire(*args)
    if k.fired_event:
        say(k.fired_event, f"{name}{suffix}")
    if k.hold_s:
        time.sleep(k.hold_s)  # the fault's own duration, not a wait for anything to settle
    said = k.heal(*args)
    took = time.monotonic() - start
    # a node kind's heal may return what the target reported (a partition's evidence)
    back = f"{name} after {took:.1f}s" + (f" ({said})" if isinstance(said, str) and said else "") if node else \
        f"{name} accepting connections after {took:.1f}s"
    say(k.back_event, back + suffix)
    return took
