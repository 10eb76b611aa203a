"""A case's queues, exchanges and messages: uniquely named, deleted after the case."""

from __future__ import annotations

import uuid
from typing import Any

from conformance.api import AckMode, QueueSpec, QueueStats, Session
from conformance.catalogue.configurations import split
from conformance.errors import ChannelClosed, TargetCannot
from conformance.kit.context.connections import Connections
from conformance.unsupported import REFUSED


class Queues(Connections):
    """What a scenario declares and publishes, recorded so cleanup deletes it."""

    # -- queues and messages -----------------------------------------------------------------

    def queue_name(self, role: str = "q", *, plain: bool = False) -> str:
        """A unique queue name for this case (to reference a queue before declaring it)."""
        kind = "classic" if plain else self.queue_type or "default"
        return f"conformance.{self.requirement.id.lower()}.{kind}.{role}.{uuid.uuid4().hex[:8]}"

    def queue(self, arguments: dict[str, Any] | None = None, *, durable: bool | None = None, plain: bool = False,
              role: str = "q", name: str | None = None, on: Session | None = None) -> str:
        """Declare a uniquely named queue of the case's queue type (``plain``: a classic queue, e.g.
        a dead-letter target), deleted after the case. ``arguments`` add to the type's own. ``on``:
        the session that declares it (default the admin's), the owner of an exclusive queue."""
        base, config = (None, None) if plain else split(self.queue_type)
        qt = None if plain else self.profile.queue_types.get(base or "")
        kind = "classic" if plain else base or "default"
        name = name or self.queue_name(role, plain=plain)
        spec = QueueSpec(
            name=name,
            queue_type=kind,
            durable=durable if durable is not None else (qt.durable if qt else True),
            arguments={**(qt.arguments if qt else {}), **(config.arguments if config else {}), **(arguments or {})},
            **(config.declare if config else {}),
        )
        self._queues.append(name)
        try:
            (on or self.admin).declare_queue(spec)
        except ChannelClosed as exc:
            if config is None or exc.code in (320, 541):  # not a refusal of the configuration: the broker broke
                raise
            # the broker declined this queue configuration in its protocol's own way: an optional
            # feature refused, its words recorded (never a fail, never silence)
            raise TargetCannot(f"{self.queue_type} queue refused: {exc.code} {exc.text}", kind=REFUSED,
                              refusal=f"{exc.code} {exc.text}") from None
        return name

    def exchange(self, kind: str = "direct") -> str:
        """Declare a uniquely named exchange, deleted after the case."""
        name = f"conformance.{self.requirement.id.lower()}.x.{uuid.uuid4().hex[:8]}"
        self.admin.declare_exchange(name, kind)
        self._exchanges.append(name)
        return name

    def publish(self, queue: str, n: int, *, prefix: str = "m", persistent: bool = False, session: Session | None = None) -> list[str]:
        """Publish ``n`` messages with ids prefix1..prefixN; return the ids. By default over the
        confirming admin session; pass ``session`` to publish on the one under test (e.g. inside its
        transaction)."""
        ids = [f"{prefix}{i}" for i in range(1, n + 1)]
        publisher = session if session is not None else self.admin
        for mid in ids:
            publisher.publish(queue, mid.encode(), message_id=mid, persistent=persistent)
        return ids

    def stats(self, queue: str) -> QueueStats:
        """Broker-side counts, not logged (barriers poll it; :meth:`wait_for` logs the outcome)."""
        admin = self.admin
        raw = getattr(admin, "_target", admin)
        return raw.queue_stats(queue)

    def tether(self, session: Session) -> str:
        """A classic queue ``session`` consumes from: its consumer count falling to 0 is the barrier
        proving the broker has torn that session down (and applied whatever that implies)."""
        name = f"conformance.tether.{uuid.uuid4().hex[:8]}"
        self.admin.declare_queue(QueueSpec(name=name, queue_type="classic", durable=False, auto_delete=False))
        self._queues.append(name)
        session.consume(name, ack_mode=AckMode.MANUAL)
        return name
