"""What an AMQP 1.0 sender is told about its transfers: a refusal when the queue does not take them
(a queue over its length limit with overflow reject-publish, an address with no node behind it).
One settlement per transfer a queue takes is PUBLISH-CONFIRM-EACH-ONCE's (publish/test_confirms.py).

Each transfer is sent unsettled and waited for: the broker's disposition names the outcome
(messaging 3.4), so the sender knows per message whether the queue has it.
"""

from __future__ import annotations

from conformance.catalogue.profiles import Profile
from conformance.kit.case import WAIT_S, Case, CaseContext, Obs
from conformance.kit.verdicts import Verdict, first_failure, fmt, holds

#: The broker owes each transfer its outcome at once.
PROMPT_S = 2.0
LIMIT = 2
REFUSING = {"x-max-length": LIMIT, "x-overflow": "reject-publish"}
SENT = 5
NOT_TAKEN = ("rejected", "released", "modified")


class TestSenderRefused(Case):
    requirement = "LINK-SENDER-REFUSED"

    def scenario(self, ctx: CaseContext) -> Obs:
        q = ctx.queue(REFUSING)
        conn = ctx.connect("sender")
        session = conn.session()
        ids = [f"m{i}" for i in range(1, SENT + 1)]
        outcomes: dict[str, str] = {}
        for m in ids:
            outcomes[m] = session.transfer(q, m.encode(), message_id=m, timeout=PROMPT_S)
            if outcomes[m].split(" ")[0] not in ("accepted", *NOT_TAKEN):
                conn.cut()  # the session is gone or silent: nothing more to learn from it, nor to close
                break
        # A fresh session: a broker may end the session of a link it refuses.
        absent = ctx.session("sender-to-nowhere").transfer(ctx.queue_name("absent"), b"a1", message_id="a1", timeout=PROMPT_S)
        # What the queue holds, read without publishing to it (a sentinel would be refused too).
        ready = ctx.stats(q).ready
        reader = ctx.session("reader")
        taker = reader.receiver(q, credit=ready)
        taker.received(ready, WAIT_S)
        held = [d.message_id for d in taker.buffer]
        taker.detach(PROMPT_S)
        return {"sent": list(outcomes), "limit": LIMIT, "outcomes": outcomes, "absent": absent, "ready": ready, "held": held}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        out = obs["outcomes"]
        accepted = [m for m in obs["sent"] if out[m] == "accepted"]
        refused = [m for m in obs["sent"] if out[m].split(" ")[0] in NOT_TAKEN]
        other = {m: out[m] for m in obs["sent"] if m not in accepted and m not in refused}
        lost = [m for m in accepted if m not in obs["held"]]
        unannounced = [m for m in obs["held"] if m not in accepted]
        absent = obs["absent"]
        return first_failure(
            holds(not other, expected="every transfer settled with an outcome: accepted, or rejected / released / modified",
                  observed="; ".join(f"{m}: {o}" for m, o in other.items()), key="no-outcome" if other else None),
            holds(bool(refused), expected=f"the transfers beyond the queue's limit of {obs['limit']} refused (rejected, released or modified)",
                  observed=f"all {len(accepted)} accepted", key=None if refused else "over-limit-accepted"),
            holds(not lost, expected="every accepted message is in the queue", observed=f"accepted but not in the queue: {fmt(lost)}",
                  key="accepted-but-dropped" if lost else None),
            holds(not unannounced, expected="the queue holds only accepted messages",
                  observed=f"in the queue although refused: {fmt(unannounced)}", key="refused-but-kept" if unannounced else None),
            holds(absent != "accepted", expected="a transfer to an address with no node is refused (attach refused, or a non-accepted outcome)",
                  observed=f"to an address with no node: {absent}", key=None if absent != "accepted" else "nowhere-accepted"),
        )
