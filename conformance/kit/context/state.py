"""What every part of a case's context shares: its fields, and the vocabulary its helpers speak.

:class:`conformance.kit.case.CaseContext` is assembled from helpers, each in a module of its own
(connections, proxies, queues and messages, waits and barriers, broker faults, cleanup); they all
build on :class:`ContextState`, so each reads and sets the same fields the scenario's context has.
"""

from __future__ import annotations

from typing import Any

from conformance.api import Adapter, Connection, Delivery, Session
from conformance.catalogue.profiles import Profile
from conformance.catalogue.requirements import Requirement
from conformance.errors import AdapterError
from conformance.kit.history import History
from conformance.nemesis.proxy import ProxyBase
from conformance.targets import Target

Obs = dict[str, Any]

#: Generous bound on any single wait inside a case; the case deadline bounds the whole.
WAIT_S = 10.0
#: How long a scenario waits for deliveries it expects (messages already in the queue). Explicit and
#: short: a local broker delivers in milliseconds; the window only bounds how long "missing" takes.
DELIVERY_WINDOW_S = 5.0


def sentinel_body(mid: str) -> bytes:
    """The payload of a sentinel or filler message: ordinary, non-empty bytes. Edge cases of content
    framing (an empty body, a body larger than frame-max) are requirements of their own
    (PUBLISH-EMPTY-BODY, PUBLISH-BODY-LARGER-THAN-FRAME-MAX), never a barrier the run relies on."""
    return f"conformance sentinel {mid}".encode()


class ScenarioVoid(AdapterError):
    """The scenario could not set up the situation the requirement is about (e.g. a fault missed)."""


class ContextState:
    """The fields of a case's context: what a scenario drives the broker with and what it owns."""

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
        #: Which fault that was ("restart" or "kill").
        self.fault_kind: str | None = None
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
        #: during a self-test); None: the target's own (conformance.nemesis.cluster).
        self.node_urls: dict[str, str] | None = None
