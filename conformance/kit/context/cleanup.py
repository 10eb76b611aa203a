"""A case's teardown: what it owns is deleted and closed, or taken over by a later phase's context."""

from __future__ import annotations

from conformance.kit.context.connections import Connections
from conformance.kit.context.state import ContextState


class Cleanup(Connections):
    """Cleanup never masks the case's own outcome; ownership passes whole from one phase to the next."""

    def absorb(self, other: ContextState) -> None:
        """Take over what ``other`` (the same case's context from an earlier phase, see
        conformance.runner.shared_faults) owns: its history (earlier events first, same clock), queues,
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
        self.fault_at, self.fault_kind = other.fault_at, other.fault_kind
        other._queues, other._exchanges, other._connections, other.proxies = [], [], [], []
        other._closed = True

    # -- teardown ----------------------------------------------------------------------------

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
