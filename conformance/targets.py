"""Targets: the brokers a run talks to.

A target is either launched by a plugin (a private local node, a container) or given as an external
URL. The core names no broker: launchers register under the ``conformance.targets`` entry-point
group and are picked by name; anything that looks like a URL becomes an :class:`ExternalTarget`.
"""

from __future__ import annotations

import abc
import inspect
import socket
import time
from dataclasses import dataclass, field
from typing import Callable
from urllib.parse import urlsplit

from conformance.errors import TargetError
from conformance.plugins import load_group
from conformance.secrets import SecretUrl, redact

__all__ = ["Target", "Replica", "ExternalTarget", "redact", "make_target", "attach_target", "probe_tcp", "wait_until",
           "TARGET_CONDITIONS", "target_conditions"]

TARGET_GROUP = "conformance.targets"


@dataclass(frozen=True)
class Replica:
    """One replica of a replicated queue as the broker reports it (Raft-style queues: RabbitMQ's
    quorum queues and streams, LavinMQ's and Artemis's replication report similar fields)."""

    node: str
    #: leader, follower, candidate, ... as the broker names it (lower case).
    role: str
    #: Entries in this replica's log, and its election term; None when the broker does not say.
    log_index: int | None = None
    term: int | None = None


@dataclass
class Target(abc.ABC):
    """A broker endpoint. Launched targets also implement the lifecycle faults."""

    name: str
    #: Holds the password of the target: never in a repr (tracebacks print the target's repr).
    url: str = field(default="", repr=False)
    #: Free-form facts for the run metadata (node name, data dir, ...). Never secrets.
    facts: dict[str, str] = field(default_factory=dict)
    #: The protocol the target is known to speak ("amqp-1.0"), when its URL's scheme does not say:
    #: the adapter is then picked by it unless the user names one. None: the scheme decides.
    protocol: str | None = None

    @property
    def display_url(self) -> str:
        return redact(self.url)

    @property
    def can_restart(self) -> bool:
        return False

    def start(self) -> None:
        """Make the target reachable; return only when it accepts connections."""

    def stop(self) -> None:
        """Release whatever :meth:`start` acquired."""

    def restart(self) -> None:
        raise TargetError(f"target {self.name} cannot be restarted by the suite")

    def kill(self) -> None:
        raise TargetError(f"target {self.name} cannot be killed by the suite")

    def handle(self) -> dict[str, str] | None:
        """How another process (an xdist worker) can control this target, or None if it cannot."""
        return None

    def check_alive(self) -> str | None:
        """None when reachable, else a one-line cause. Used to tell broker death from a failing case."""
        return probe_tcp(self.url)

    def queue_replicas(self, queue: str) -> list[Replica] | None:
        """What the broker's own tooling says about ``queue``'s replicas (a replicated queue on a
        target the suite launched and can administer), or None when it cannot say: no such
        capability, not a replicated queue, or the tool did not answer."""
        return None

    def queue_known(self, queue: str) -> bool | None:
        """Whether the broker's own metadata still holds ``queue``: running, or durable and not yet
        recovered (True), or neither (False: the broker will not bring it back); None when the
        target cannot ask its broker. A case that gets 404 for a queue after a restart asks this
        before it stops waiting (conformance.kit.context.broker_faults): a 404 alone was once seen from a
        broker whose queue answered afterwards."""
        return None

    def __enter__(self) -> Target:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


#: The facts a target reports of itself that a profile entry may be conditioned on (``when_target``
#: of a deviation or known bug, conformance.catalogue.profiles): the fact, and what it means.
TARGET_CONDITIONS = {
    "no-store": "the suite launched the node without a store: it keeps no durable state across a restart or kill "
                "(the target's no_store, e.g. a qpidd without its store module)",
}


def target_conditions(target: Target | None) -> frozenset[str]:
    """The facts of :data:`TARGET_CONDITIONS` that ``target`` reports (none for a URL the suite only
    connects to: it knows nothing of that broker's build)."""
    if target is None:
        return frozenset()
    facts = set()
    if getattr(target, "no_store", None):
        facts.add("no-store")
    return frozenset(facts)


class ExternalTarget(Target):
    """A broker somebody else runs; the suite only connects to it."""

    def start(self) -> None:
        cause = self.check_alive()
        if cause:
            raise TargetError(f"target {self.display_url} is unreachable: {cause}")


def probe_tcp(url: str, timeout: float = 2.0) -> str | None:
    parts = urlsplit(url)
    host = parts.hostname or "localhost"
    port = parts.port or default_port(parts.scheme)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return None
    except OSError as exc:
        return f"{host}:{port}: {exc.strerror or exc}"


def default_port(scheme: str) -> int:
    return {"amqp": 5672, "amqps": 5671}.get(scheme, 5672)


#: Where listening ports are picked from: above the well-known services, below the kernel's
#: ephemeral range (read from /proc where it can be), and above it.
LISTEN_PORTS_FROM = 10000


def ephemeral_range() -> tuple[int, int]:
    """The kernel's range for the local ports of outgoing connections (Linux default 32768-60999)."""
    try:
        from pathlib import Path

        lo, hi = (int(x) for x in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
        return lo, hi
    except (OSError, ValueError):
        return 32768, 60999


def free_port() -> int:
    """A loopback port free now, for a launched process to listen on (launchers, the Spark cluster).

    Picked outside the kernel's ephemeral range: a port the kernel handed out for ``bind(0)`` is
    also one it hands to outgoing connections, and between this check and the launched process's
    own bind (an Erlang node boots for seconds) any client connection on the machine could take it
    as its local port. CI saw exactly that: a cluster node's distribution port "already used,
    not_erlang" while other tests opened thousands of connections. Outside that range only another
    listener can collide, and the random pick makes that rare; bind(0) is the fallback."""
    import random

    lo, hi = ephemeral_range()
    ranges = [(a, b) for a, b in ((LISTEN_PORTS_FROM, lo - 1), (hi + 1, 65535)) if a <= b]
    rng = random.SystemRandom()
    for _ in range(64 if ranges else 0):
        a, b = rng.choices(ranges, weights=[b - a + 1 for a, b in ranges])[0]
        port = rng.randint(a, b)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return int(s.getsockname()[1])
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until(predicate: Callable[[], bool], deadline_s: float, interval_s: float = 0.05) -> bool:
    """Poll ``predicate`` until it holds or the deadline passes (for process/port readiness only)."""
    end = time.monotonic() + deadline_s
    while True:
        if predicate():
            return True
        if time.monotonic() >= end:
            return False
        time.sleep(interval_s)  # allowed: polling a condition with a deadline


def looks_like_url(spec: str) -> bool:
    return "://" in spec


def available_launchers() -> dict[str, Callable[..., Target]]:
    return load_group(TARGET_GROUP)


def attach_target(handle: dict[str, str]) -> Target:
    """The controlling side of a target another process launched (from :meth:`Target.handle`)."""
    launchers = available_launchers()
    name = handle.get("launcher", "")
    if name not in launchers:
        raise TargetError(f"cannot attach to target: launcher {name!r} is not installed")
    return launchers[name](attach=handle["node_dir"])


def _accepted(launcher: Callable[..., Target], options: dict[str, str]) -> dict[str, str]:
    """The options a launcher takes (all of them if it takes **kwargs): a third party's need not know run_dir."""
    params = inspect.signature(launcher).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return options
    return {k: v for k, v in options.items() if k in params}


def make_target(spec: str, **options: str) -> Target:
    """Turn a ``--target`` value into a :class:`Target` (not yet started)."""
    if looks_like_url(spec):
        scheme = urlsplit(spec).scheme
        if not scheme:
            raise TargetError(f"target URL {redact(spec)!r} has no scheme")
        return ExternalTarget(name=redact(spec), url=SecretUrl(spec))
    launchers = available_launchers()
    if spec in launchers:
        return launchers[spec](**_accepted(launchers[spec], options))
    # NAME:ARG - a launcher that takes an argument (process:targets/lavinmq.yaml, lavinmq:2.9.1).
    name, _, arg = spec.partition(":")
    if arg and name in launchers and "arg" in inspect.signature(launchers[name]).parameters:
        return launchers[name](arg=arg, **_accepted(launchers[name], options))
    known = ", ".join(sorted(launchers)) or "none installed"
    raise TargetError(f"unknown target {spec!r}: give a URL (amqp://...), one of: {known}, or NAME:ARG for a launcher taking an argument")
