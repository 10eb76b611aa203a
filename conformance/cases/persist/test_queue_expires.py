"""x-expires (queue TTL, a vendor extension of queue.declare): when an unused queue goes away."""

from __future__ import annotations

import time

from conformance.catalogue.profiles import Profile
from conformance.errors import ChannelClosed, OperationTimeout, PublishNotConfirmed
from conformance.kit.case import Case, CaseContext, Obs
from conformance.kit.verdicts import Verdict, first_failure, holds


class TestQueueExpiresAfterLastConsumer(Case):
    """The consumer's own connection declares the queue (as a client declaring its reply queue
    does). The case waits for the TTL it set: the consumer stays subscribed for longer than it (the
    queue must outlive it, being in use), then the queue must outlive the cancel by it too. Its
    ready messages are counted while it is in use; from the cancel on, a publish every 50 ms (the
    first right away) probes it until it is unroutable, within an explicit deadline."""

    requirement = "PERSIST-QUEUE-EXPIRES-AFTER-LAST-CONSUMER"
    # Classic queues only: a RabbitMQ 3.10.8 quorum queue with x-expires 600 ms was still there 2.6 s
    # after its consumer left (its expiry is not checked at once), so the cell cannot decide within
    # a deadline this short.
    queue_types = ("classic",)
    EXPIRES_MS = 600
    GRACE_S = 2.0
    PROBE_EVERY_S = 0.05

    def scenario(self, ctx: CaseContext) -> Obs:
        ttl = self.EXPIRES_MS / 1000
        session = ctx.session("consumer")
        q = ctx.queue({"x-expires": self.EXPIRES_MS}, on=session)
        consumer = session.consume(q, prefetch=1)
        published = ctx.publish(q, 3)
        held = ctx.take(consumer, 1)[0]
        subscribed = time.monotonic()
        # allowed: the case waits for the TTL it set, with its consumer subscribed all along
        ctx.wait_for(lambda: time.monotonic() - subscribed > ttl * 1.5, f"{q} in use for longer than its x-expires {self.EXPIRES_MS} ms")
        cancelled = time.monotonic()
        consumer.cancel()
        # Settled after the cancel, so that nothing more is delivered and the rest stays ready (a
        # quorum queue counts a cancelled consumer until its deliveries are settled).
        session.ack(held.tag)
        session.sync()
        # Right after the cancel the queue must still be there with its ready messages: a passive
        # queue.declare asks (a client redeclaring its queue, as clients do). A redeclaration may
        # renew an unused queue's lease (RabbitMQ's does), which only moves the expiry later: it is
        # judged from the cancel, no earlier than x-expires after it.
        after_cancel: Obs = {"closed": False, "code": None, "text": "", "hard": False}
        ready = None
        try:
            ready = ctx.stats(q).ready
        except ChannelClosed as exc:
            after_cancel = {"closed": True, "code": exc.code, "text": exc.text, "hard": exc.hard}
        last_use = time.monotonic()
        gone_after: list[float] = []
        if ready is not None:
            # From here on only lease-neutral probes: a mandatory, confirmed publish, unroutable
            # once the queue is gone.
            last_probe = [0.0]

            def gone() -> bool:
                now = time.monotonic()
                if now - last_probe[0] < self.PROBE_EVERY_S:
                    return False
                last_probe[0] = now
                try:
                    ctx.admin.publish(q, b"probe", message_id="expiry-probe")
                except PublishNotConfirmed:
                    gone_after.append(time.monotonic() - cancelled)
                    return True
                return False

            try:
                ctx.wait_for(gone, f"{q} to expire {self.EXPIRES_MS} ms after its last use", timeout=ttl + self.GRACE_S)
            except OperationTimeout as exc:  # the queue never expired: an observation
                ctx.history.add("suite", "expiry", error=str(exc))
        ctx.history.add("suite", "expiry", f"passive declare answered {1000 * (last_use - cancelled):.0f} ms after basic.cancel")
        return {
            "published": published,
            "expires_ms": self.EXPIRES_MS,
            "grace_s": self.GRACE_S,
            "after_cancel": {"exists": ready is not None, "ready": ready, "answer": after_cancel},
            "gone_after_s": round(gone_after[0], 3) if gone_after else None,
        }

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        ttl = obs["expires_ms"] / 1000
        after = obs["after_cancel"]
        gone = obs["gone_after_s"]
        answer = after["answer"]
        return first_failure(
            holds(
                after["exists"] and after["ready"] == len(obs["published"]) - 1,
                expected=f"the queue holds {len(obs['published']) - 1} ready messages and still exists right after basic.cancel",
                observed=(f"the queue holds {after['ready']} ready" if after["exists"]
                          else f"gone right after basic.cancel: {' '.join(str(x) for x in (answer.get('code'), answer.get('text')) if x)}"),
                key=None if after["exists"] else "queue-deleted-at-cancel",
            ),
            holds(
                gone is None or gone >= ttl,
                expected=f"the queue deleted no earlier than x-expires ({obs['expires_ms']} ms) after its last consumer left",
                observed=f"deleted {gone * 1000:.0f} ms after basic.cancel" if gone is not None else "not deleted",
                key="queue-expired-early" if gone is not None and gone < ttl else None,
            ),
            holds(
                gone is not None,
                expected=f"the queue deleted once unused for x-expires ({obs['expires_ms']} ms; waited {ttl + obs['grace_s']:g}s)",
                observed=f"deleted {gone * 1000:.0f} ms after basic.cancel" if gone is not None else f"still there {ttl + obs['grace_s']:g}s after basic.cancel",
                key=None if gone is not None else "queue-never-expired",
            ),
        )
