"""Operators for connection cuts inside a frame sequence: a broker that drops a connection at a
moment a healthy one keeps it open."""

from __future__ import annotations

from typing import Any

from adapters.amqp091.mutations import FRAME_OVERHEAD, P, decode
from conformance.nemesis.faults import Sender
from conformance.nemesis.mutations import Mutator, operator
from conformance.nemesis.wire import Frame


@operator("cancel-mid-body-drops-connection", P,
          "closes the connection (FIN, no cancel-ok or close-ok) when the client sends basic.cancel or channel.close on a "
          "channel whose last basic.deliver has not yet passed the proxy in full (LavinMQ 1.2.3-2.0.1 unmapped the "
          "message's segment under its deliver loop when the queue's last consumer left)")
class CancelMidBodyDropsConnection(Mutator):
    """Tracks, per channel, how much of the broker's latest delivery has passed; a consumer leaving
    while it is incomplete ends the connection as the affected broker's failed socket write did."""

    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        self.pending: dict[int, list[int | None]] = {}  # channel -> [body size, bytes passed]

    def rewrite(self, sender: Sender, frame: Frame) -> list[bytes] | None:
        if sender is Sender.SERVER:
            self._track(frame)
            return None
        if frame.name not in ("basic.cancel", "channel.close"):
            return None
        state = self.pending.get(frame.channel)
        if state is None:
            return None
        size, passed = state
        self.applied(f"{frame.name} on channel {frame.channel} with a delivery {passed} of {size if size is not None else '?'} "
                     "body bytes through: connection closed")
        self.io.close()
        return []

    def _track(self, frame: Frame) -> None:
        if frame.name == "basic.deliver":
            self.pending[frame.channel] = [None, 0]
            return
        state = self.pending.get(frame.channel)
        if state is None:
            return
        if frame.name == "content-header":
            state[0] = decode(frame).body_size
        elif frame.name == "content-body":
            state[1] = (state[1] or 0) + len(frame.raw) - FRAME_OVERHEAD
        else:
            return
        if state[0] is not None and (state[1] or 0) >= state[0]:
            del self.pending[frame.channel]
