"""A commit in flight when the connection breaks: indeterminate to the client, atomic at the broker.

Each variant resets the connection at one protocol moment around the commit, many rounds over, and
drains the queue after each: a partial transaction in any round is a failure. The moments are fault
points (conformance/nemesis/fault_points.yaml), so each protocol cuts at its own frame: 0-9-1 at
tx.commit and tx.commit-ok, AMQP 1.0 at the discharge on the coordinator link and the disposition
accepting it. The proxy's trace proves every cut hit the intended frame.
"""

from __future__ import annotations

from typing import Any

from conformance.catalogue.profiles import Profile
from conformance.errors import ConnectionLost
from conformance.kit.case import Case, CaseContext, Obs
from conformance.kit.verdicts import Verdict, fmt, holds
from conformance.nemesis.faults import Moment
from conformance.nemesis.points import fault_at

MESSAGES = 3
#: variant -> (fault point, nth, moment, what the broker must end with: "all", "none" or "either")
POSITIONS: dict[str, tuple[str, int, Moment, str]] = {
    # the last publish's content reached the broker; the commit never left the proxy
    "body-delivered": ("tx-publish-content", MESSAGES, Moment.AFTER, "none"),
    # the commit held back at the proxy
    "commit-withheld": ("commit", 1, Moment.BEFORE, "none"),
    # the commit acknowledged by the broker's TCP stack, then RST before any reply is relayed
    "commit-delivered": ("commit", 1, Moment.AFTER, "either"),
    # the broker answered that the commit is done; the client never sees it
    "commit-ok-withheld": ("commit-answer", 1, Moment.BEFORE, "all"),
}


class TestCommitInFlight(Case):
    requirement = "TX-COMMIT-IN-FLIGHT-ATOMIC"
    variants = tuple(POSITIONS)
    rounds = 8

    def scenario(self, ctx: CaseContext) -> Obs:
        point, nth, moment, _ = POSITIONS[ctx.variant or ""]
        q = ctx.queue()
        proxy = ctx.proxy()
        fault_at(proxy.protocol, point)  # a moment the protocol cannot express ends the case before any round
        tether: str | None = None
        results: list[dict[str, Any]] = []
        for r in range(1, self.rounds + 1):
            producer = ctx.session(f"producer{r}", via=proxy)
            if tether is None:
                tether = ctx.tether(producer)
            else:
                producer.consume(tether)
            producer.select_tx()
            fault = proxy.arm(fault_at(proxy.protocol, point, nth=nth, moment=moment, connection=proxy.connections))
            ids = ctx.publish(q, MESSAGES, prefix=f"r{r}-m", persistent=True, session=producer)
            try:
                producer.commit()
                told = "commit-ok"
            except ConnectionLost:
                told = "connection lost"
            hit = ctx.expect_fired(fault)
            ctx.await_consumers(tether, 0)
            got = [d.message_id for d in ctx.drain(q)]
            results.append({"round": r, "ids": ids, "told": told, "hit": hit, "got": got})
        return {"variant": ctx.variant, "rounds": results}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        must = POSITIONS[obs["variant"]][3]
        problems: list[str] = []
        outcomes: dict[str, int] = {"all": 0, "none": 0}
        for r in obs["rounds"]:
            ids, got = r["ids"], r["got"]
            kept = [m for m in ids if m in got]
            foreign = [m for m in got if m not in ids]
            dupes = sorted({m for m in got if got.count(m) > 1})
            outcome = "all" if len(kept) == len(ids) else "none" if not kept else "partial"
            where = f"round {r['round']} (cut at {r['hit']})"
            if outcome == "partial":
                problems.append(f"{where}: partial transaction, {fmt(kept)} of {fmt(ids)}")
            elif must != "either" and outcome != must:
                problems.append(f"{where}: {outcome} of the transaction kept, the position implies {must}")
            if r["told"] == "commit-ok" and outcome != "all":
                problems.append(f"{where}: client saw commit-ok but the queue holds {fmt(kept)}")
            if dupes or foreign:
                problems.append(f"{where}: duplicated {fmt(dupes)} foreign {fmt(foreign)}")
            if outcome in outcomes:
                outcomes[outcome] += 1
        n = len(obs["rounds"])
        return holds(
            not problems and n > 0,
            expected=f"in each of {n} rounds the queue holds all or none of the transaction ({must if must != 'either' else 'all or none'} at {obs['variant']})",
            observed="; ".join(problems[:5]) if problems else f"all in {outcomes['all']} rounds, none in {outcomes['none']}",
            key="partial-transaction" if any("partial" in p for p in problems) else None,
        )
