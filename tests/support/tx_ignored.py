"""pytest plugin for the failing-case report test: the target behaves as if it ignored tx.select.

tx.select is never sent (the session pretends it got select-ok), so the broker routes every
publish at once, exactly what a broker that accepted tx.select and then ignored it would do. The
transaction requirements must then fail, with the wire trace showing publishes and no tx.select.
"""

from __future__ import annotations

from adapters.amqp091.pika_adapter import PikaSession


def _select_tx_ignored(self: PikaSession) -> None:
    return None


PikaSession.select_tx = _select_tx_ignored  # type: ignore[method-assign]


_real_commit = PikaSession.commit


def _rollback_ignored(self: PikaSession) -> None:
    """A broker that ignored tx.select answers tx.rollback too, and rolls nothing back. Sent for
    real, tx.rollback (and the tx.commit after it in the rollback variant) would be a 406 on a
    channel that never selected: an error record, not the fail the test is about."""
    self._tx_ignored_rolled_back = True  # type: ignore[attr-defined]


def _commit_after_ignored_rollback(self: PikaSession) -> None:
    """tx.commit goes on the wire (the fin variant's fault fires on it) unless it follows an
    ignored tx.rollback on this session."""
    if getattr(self, "_tx_ignored_rolled_back", False):
        return None
    return _real_commit(self)


PikaSession.rollback = _rollback_ignored  # type: ignore[method-assign]
PikaSession.commit = _commit_after_ignored_rollback  # type: ignore[method-assign]
