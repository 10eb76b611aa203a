"""AMQP 0-9-1 queue.declare exclusive: a private queue is locked against other connections."""

from __future__ import annotations

from conformance.api import QueueSpec
from conformance.catalogue.profiles import Profile
from conformance.kit.case import Case, CaseContext, Obs
from conformance.kit.checkers import accepted, channel_closed_with
from conformance.kit.verdicts import Verdict, first_failure

RESOURCE_LOCKED = 405


class TestExclusiveQueueLocked(Case):
    requirement = "PERSIST-EXCLUSIVE-QUEUE-LOCKED"
    queue_types = (None,)

    def scenario(self, ctx: CaseContext) -> Obs:
        """The owner's connection stays open throughout; the queue goes with it at teardown."""
        owner = ctx.session("owner")
        q = ctx.queue_name("exclusive", plain=True)
        declared = ctx.channel_error(lambda: owner.declare_queue(QueueSpec(name=q, durable=False, exclusive=True)))
        if declared["closed"]:
            return {"declared": declared, "passive": None, "consume": None, "owner_use": None}
        passive = ctx.session("other-declare")
        consumer = ctx.session("other-consume")
        return {
            "declared": declared,
            "passive": ctx.channel_error(lambda: passive.queue_stats(q)),
            "consume": ctx.channel_error(lambda: (consumer.consume(q, prefetch=1), consumer.sync())),
            "owner_use": ctx.channel_error(lambda: (owner.consume(q, prefetch=1), owner.sync())),
        }

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        if obs["declared"]["closed"]:
            return accepted(obs["declared"], what="queue.declare exclusive=true")
        return first_failure(
            channel_closed_with(obs["passive"], RESOURCE_LOCKED, what="passive queue.declare of another connection's exclusive queue"),
            channel_closed_with(obs["consume"], RESOURCE_LOCKED, what="basic.consume of another connection's exclusive queue"),
            accepted(obs["owner_use"], what="basic.consume of the exclusive queue by its own connection"),
        )
