"""Scenario building blocks several areas share (the generator role): hold deliveries, settle some,
watch what comes back, and prove the rest with barriers. Each returns plain observations."""

from __future__ import annotations

from typing import Any, Callable

from conformance.api import Delivery, Session
from conformance.kit.case import CaseContext, Obs, delivery_obs

#: A settle step: acks/nacks/rejects some of the held deliveries. It returns nothing: what the step
#: should have caused (what comes back, what is gone) is the verdict's to say, not the scenario's.
Settle = Callable[[Session, list[Delivery]], None]


def ids_at(held: list[Delivery], *positions: int) -> list[str]:
    return [held[i].message_id or "" for i in positions]


def one_held(ctx: CaseContext, queue: str | None = None) -> tuple[Session, Delivery]:
    """One message delivered and held unacknowledged on a fresh channel."""
    q = queue or ctx.queue()
    ctx.publish(q, 1)
    session = ctx.session("consumer")
    return session, ctx.take(session.consume(q, prefetch=10), 1)[0]


def settle_and_watch(ctx: CaseContext, n: int, settle: Settle, *, queue: str | None = None) -> Obs:
    """Hold ``n`` deliveries on one channel, let ``settle`` ack/nack/reject some, then observe:

    - ``back``: what the consumer received again before a sentinel published after the broker
      processed the settlement (a round trip on the channel is the barrier);
    - ``remaining``: after acking ``back`` and closing the channel, everything the queue still
      holds (a sentinel-proven drain), i.e. the held deliveries that were neither settled for good
      nor returned.
    """
    q = queue or ctx.queue()
    published = ctx.publish(q, n)
    session = ctx.session("consumer")
    consumer = session.consume(q, prefetch=100)
    held = ctx.take(consumer, n)
    settle(session, held)
    answer = ctx.channel_error(session.sync)
    back: list[Delivery] = []
    if not answer["closed"]:
        back = ctx.until_sentinel(consumer, q)
        for d in [*back, ctx.last_sentinel]:
            if d is not None:
                session.ack(d.tag)
        session.sync()
        session.close()
    ctx.await_consumers(q, 0)
    return {
        "published": published,
        "held": [delivery_obs(d) for d in held],
        "channel": answer,
        "back": [delivery_obs(d) for d in back],
        "remaining": [delivery_obs(d) for d in ctx.drain(q)],
    }


FIRST_DEATH = ("x-first-death-queue", "x-first-death-reason", "x-first-death-exchange")
LAST_DEATH = ("x-last-death-queue", "x-last-death-reason", "x-last-death-exchange")


def dead_obs(d: Delivery) -> dict[str, Any]:
    """A dead-lettered delivery as plain data: id, x-death (times as text), the death headers."""
    deaths = [{k: (str(v) if k == "time" else v) for k, v in dict(e).items()} for e in d.headers.get("x-death") or []]
    extra = {k: d.headers[k] for k in (*FIRST_DEATH, *LAST_DEATH) if k in d.headers}
    return {"id": d.message_id, "x-death": deaths, "headers": extra, "expiration": d.expiration}


def unavailable_key(cause: str, *, kill: bool) -> str:
    """The deviation key of a queue not consumable after a restart: a queue the broker reports
    missing (404) is lost, which no documented unavailability covers."""
    if "NOT_FOUND" in cause:
        return "queue-gone-after-restart"
    return "queue-unavailable-after-kill" if kill else "queue-unavailable-after-restart"
