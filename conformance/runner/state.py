"""The state of one conformance run: the target, adapter and profile every case of it shares.

The fields of its records that come from it are set in conformance.runner.records (run_fields)."""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from typing import Any

from conformance.api import Adapter
from conformance.catalogue.profiles import Profile
from conformance.nemesis.proxy_isolated import IsolatedFaultProxy
from conformance.runner import preflight
from conformance.runner.results import ResultsWriter
from conformance.secrets import SecretUrl, redact
from conformance.targets import Target


@dataclass
class RunState:
    target: Target | None
    #: A :class:`SecretUrl`: its repr never shows the password (tracebacks print this dataclass).
    url: SecretUrl
    adapter: Adapter
    profile: Profile
    server: dict[str, Any]
    run_id: str
    writer: ResultsWriter | None
    keep_history: bool
    dead_cause: str | None = None
    #: The proxy applying ``--mutation`` (controller only) and whether the target is someone else's.
    mutation_proxy: IsolatedFaultProxy | None = None
    attached: bool = False
    #: A run through a mutation is a self-test of the suite, never a result about the broker.
    mutation: str | None = None
    #: Why the run ended early (an internal error, an interrupt); None while it goes on or finished.
    abort_cause: str | None = None
    #: The suite's assumptions checked before the catalogue (conformance.runner.preflight).
    preflight: list[preflight.Check] = field(default_factory=list)
    #: Every node's URL on a cluster target (through a mutation proxy each when mutating).
    node_urls: dict[str, str] | None = None
    node_proxies: list[IsolatedFaultProxy] = field(default_factory=list)
    #: The launched target's name ("proton-example"), in workers too, which may hold no handle to
    #: it (a target the suite cannot restart has none): records name the target, never its URL.
    target_name: str | None = None
    #: What the adapter offers against the probed server (conformance.catalogue.capabilities
    #: server_capabilities): its protocol's capabilities plus what depends on the server; None for
    #: an adapter that declares none.
    capabilities: frozenset[str] | None = None
    #: Configured cell types ("classic+delivery-limit") the run does not pose, each with why
    #: (conformance.runner.posed): the adapter knows before anything is sent that it cannot declare them.
    not_posed: dict[str, str] = field(default_factory=dict)

    @property
    def target_label(self) -> str:
        """How records name the target: its name when the run launched it, else the redacted URL."""
        return self.target.name if self.target is not None else self.target_name or redact(self.url)

    @property
    def lock_path(self) -> str:
        return os.path.join(tempfile.gettempdir(), f"conformance-{self.run_id}.lock")

    @property
    def health_path(self) -> str:
        """The record every process of the run shares of its target's hangs and restarts (conformance.runner.hangs)."""
        return os.path.join(tempfile.gettempdir(), f"conformance-{self.run_id}.health")
