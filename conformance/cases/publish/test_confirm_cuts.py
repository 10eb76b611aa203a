"""A confirming publisher cut at one publish, and never resending: what the queue then holds.

The reconnect-and-resend half is PUBLISH-INFLIGHT-AT-LEAST-ONCE (test_inflight.py); here the
unconfirmed message is left alone, so its fate is the broker's alone to show: at most once, never
guessed. The cut points are those of test_inflight.POSITIONS.
"""

from __future__ import annotations

from collections import Counter

from conformance.cases.publish.test_inflight import AT, POSITIONS, body_of, publish_until_cut
from conformance.catalogue.profiles import Profile
from conformance.kit.case import Case, CaseContext, Obs
from conformance.kit.verdicts import Verdict, first_failure, fmt, holds
from conformance.nemesis.points import fault_at


class TestConfirmCutAtMostOnce(Case):
    requirement = "PUBLISH-CONFIRM-CUT-AT-MOST-ONCE"
    variants = ("publish-withheld", "body-delivered", "confirm-withheld")

    def scenario(self, ctx: CaseContext) -> Obs:
        point, moment = POSITIONS[ctx.variant or ""]
        fault = fault_at(ctx.adapter.protocol, point, nth=AT, moment=moment)
        q = ctx.queue()
        ids, confirmed, hit = publish_until_cut(ctx, q, fault, body_of)
        kept = ctx.drain(q)
        return {"variant": ctx.variant, "ids": ids, "confirmed": confirmed, "in_flight": ids[len(confirmed)] if len(confirmed) < len(ids) else None,
                "hit": hit, "kept": [{"id": d.message_id, "intact": d.body == body_of(d.message_id or "")} for d in kept]}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        kept = [d["id"] for d in obs["kept"]]
        counts = Counter(kept)
        flight = obs["in_flight"]
        never_sent = [m for m in obs["ids"] if m not in obs["confirmed"] and m != flight]
        withheld = obs["variant"] == "publish-withheld"
        lost = [m for m in obs["confirmed"] if counts[m] == 0]
        twice = sorted(m for m, n in counts.items() if n > 1)
        extra = [m for m in counts if m in never_sent or (withheld and m == flight) or m not in obs["ids"]]
        torn = [d["id"] for d in obs["kept"] if not d["intact"]]
        fate = "not in the queue" if counts[flight] == 0 else "in the queue once" if counts[flight] == 1 else f"{counts[flight]} times"
        return first_failure(
            holds(not lost, expected=f"every confirmed message {fmt(obs['confirmed'])} in the queue",
                  observed=f"confirmed but missing: {fmt(lost)}" if lost else f"all there; the one in flight ({flight}) {fate}",
                  key="confirmed-lost" if lost else None),
            holds(not twice, expected=f"each message at most once (the one in flight, {flight}, unknown to the publisher)",
                  observed=f"twice: {fmt(twice)}" if twice else "none twice", key="duplicated" if twice else None),
            holds(not extra, expected=f"nothing the broker never received ({fmt(never_sent + ([flight] if withheld else []))})",
                  observed=f"in the queue: {fmt(extra)}" if extra else "none of them", key="never-published-enqueued" if extra else None),
            holds(not torn, expected="every body intact", observed=f"corrupt: {fmt(torn)}" if torn else "all intact", key="body-corrupt" if torn else None),
        )
