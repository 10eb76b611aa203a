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
