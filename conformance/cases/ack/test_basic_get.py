"""AMQP 0-9-1 basic.get: get-empty on an empty queue, get-ok with the message otherwise."""

from __future__ import annotations

from conformance.api import Delivery
from conformance.catalogue.profiles import Profile
from conformance.kit.case import Case, CaseContext, Obs, delivery_obs
from conformance.kit.verdicts import Verdict, first_failure, holds


class TestGetEmpty(Case):
    requirement = "ACK-GET-EMPTY"
    queue_types = (None,)

    def scenario(self, ctx: CaseContext) -> Obs:
        q = ctx.queue()
        session = ctx.session("getter")
        box: dict[str, Delivery | None] = {}
        empty = ctx.channel_error(lambda: box.update(first=session.get(q)))
        first = box.get("first")
        published = ctx.publish(q, 1)
        got = session.get(q) if not empty["closed"] else None
        if got is not None:
            session.ack(got.tag)
            session.sync()
        return {
            "empty_answer": empty,
            "first": delivery_obs(first) if first is not None else None,
            "published": published,
            "after_publish": delivery_obs(got) if got is not None else None,
        }

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        answer, first, after = obs["empty_answer"], obs["first"], obs["after_publish"]
        return first_failure(
            holds(not answer["closed"], expected="basic.get on an empty queue: answered (no exception)",
                  observed=f"basic.get on an empty queue: {'connection' if answer.get('hard') else 'channel'} closed with {answer.get('code')} {answer.get('text', '')}".rstrip()),
            holds(first is None, expected="basic.get on an empty queue: basic.get-empty",
                  observed=f"basic.get on an empty queue: basic.get-ok {first}"),
            holds(after is not None and after["id"] == obs["published"][0],
                  expected=f"basic.get after publishing {obs['published'][0]}: basic.get-ok with {obs['published'][0]}",
                  observed=f"basic.get after publishing {obs['published'][0]}: " + (f"basic.get-ok with {after['id']}" if after else "basic.get-empty")),
        )
