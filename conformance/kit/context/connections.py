"""A case's connections to the broker: new ones, the confirming admin session, and cutting them all."""

from __future__ import annotations

from typing import cast

from conformance.api import Connection, Session
from conformance.kit.context.state import ContextState
from conformance.kit.history import Recorded
from conformance.nemesis.proxy import ProxyBase


class Connections(ContextState):
    """Every connection a case opens is recorded, so the history shows it and cleanup can close it."""

    # -- connections -------------------------------------------------------------------------

    def connect(self, actor: str | None = None, *, via: ProxyBase | None = None, op_timeout: float | None = None,
                url: str | None = None) -> Connection:
        """A new connection, straight to the broker or through a fault proxy (``via``); ``url`` picks
        another node of a cluster target (conformance.nemesis.cluster.Nodes)."""
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

    @property
    def admin(self) -> Session:
        """A separate session for setup, publishing and barriers, with publisher confirms on."""
        if self._admin is None or not self._admin.is_open:
            conn = self.connect("admin")
            self._admin = conn.session()
            self._admin.enable_confirms()
        return self._admin

    def _cut_all(self) -> None:
        """Reset every connection of the case (no handshake); ``admin`` reconnects on next use."""
        for c in self._connections:
            try:
                c.cut()
            except Exception:
                pass
        self._admin = None
