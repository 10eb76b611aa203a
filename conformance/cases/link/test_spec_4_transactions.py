"""AMQP 1.0 transactions (part 4), h2spec style: each case names the rule it checks. AMQP 1.0 only.

4.4.1 posting: a message posted unsettled in a live transaction gets, before any discharge, a
disposition whose state is a transactional-state naming that transaction and carrying the outcome
that will hold once it commits. (4.3 discharge: a discharge of a transaction never declared is
TX-COMMIT-REQUIRES-SELECT's AMQP 1.0 form, conformance/cases/tx/test_tx_errors.py.) A broker whose
coordinator refuses the control link at attach reports unsupported (refused), as elsewhere.
"""

from __future__ import annotations

from conformance.catalogue.profiles import Profile
from conformance.kit.case import WAIT_S, Case, CaseContext, Obs, delivery_obs
from conformance.kit.checkers import returned_exactly
from conformance.kit.verdicts import Verdict, first_failure, holds

#: The outcomes a transactional-state may carry as terminal (messaging 3.4).
TERMINAL = ("accepted", "rejected", "released", "modified")


def wire_states(ctx: CaseContext, proxy: object) -> list[str]:
    """The transfers and dispositions recorded, with their delivery states (evidence of who sent what)."""
    decode = getattr(ctx.adapter, "performative", None)
    if decode is None:
        return []
    out = []
    for e in proxy.trace.entries():  # type: ignore[attr-defined]
        if e.note or e.frame is None or e.name not in ("transfer", "disposition"):
            continue
        f = decode(e.frame.raw)
        if f is not None:
            ident = f"delivery-id={f['delivery-id']}" if f["name"] == "transfer" else f"first={f['first']} settled={str(f['settled']).lower()}"
            out.append(f"{e.sender} {f['name']} handle={f.get('handle')} {ident} state={f['state']}")
    return out


class TestPostingPresumptiveOutcome(Case):
    requirement = "TX-POSTING-OUTCOME-BEFORE-DISCHARGE"

    def scenario(self, ctx: CaseContext) -> Obs:
        q = ctx.queue()
        proxy = ctx.proxy()
        session = ctx.session("controller", via=proxy)  # the recording shows the transfers' and dispositions' states
        session.select_tx()
        answer = session.transactional_transfer(q, b"m1", message_id="m1", timeout=WAIT_S)
        session.commit()
        return {"published": ["m1"], "answer": answer, "wire": wire_states(ctx, proxy), "after": [delivery_obs(d) for d in ctx.drain(q)]}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        a = obs["answer"]
        ok = a.startswith("transactional-state ") and a.split(" ")[1] in TERMINAL and a.endswith("(this transaction)")
        return first_failure(
            holds(ok, expected="before the discharge, a disposition with a transactional-state naming the transaction and a terminal outcome",
                  observed=a, key=None if ok else "presumptive-" + ("plain-outcome" if a.split(" ")[0] in TERMINAL else a.split(" ")[0])),
            returned_exactly(obs["after"], obs["published"], what="in the queue after the commit"),
        )
