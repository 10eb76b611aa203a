"""Transaction misuse: ending a transaction never begun (0-9-1 commit/rollback without tx.select,
AMQP 1.0 a discharge of a txn-id the coordinator never declared); mixing tx with publisher confirms
(0-9-1)."""

from __future__ import annotations

from typing import Any, Mapping

from conformance.catalogue.profiles import Profile
from conformance.errors import Unsupported
from conformance.kit.case import Case, CaseContext, Obs
from conformance.kit.checkers import accepted, channel_closed_with
from conformance.kit.reference import judge
from conformance.kit.verdicts import Verdict, holds

#: AMQP 1.0 transactions 4.3, why a rollback of a txn-id never declared has no wrong answer.
ROLLBACK_ALWAYS_COMPLETES = ("AMQP 1.0 transactions 4.3: 'the coordinator MUST always be able to complete a discharge where the "
                             "fail flag is set to true', so a rollback of a txn-id it never declared may be completed as well as "
                             "refused: the protocol states no refusal to check")


class TestCommitRequiresSelect(Case):
    requirement = "TX-COMMIT-REQUIRES-SELECT"
    queue_types = (None,)
    variants = ("commit", "rollback")

    def scenario(self, ctx: CaseContext) -> Obs:
        session = ctx.session("client")
        discharge = getattr(session, "discharge_undeclared", None)
        if discharge is None:  # 0-9-1: tx.commit / tx.rollback on a channel that never sent tx.select
            op = session.commit if ctx.variant == "commit" else session.rollback
            return {"variant": ctx.variant, "answer": ctx.channel_error(lambda: (op(), session.sync()))}
        # AMQP 1.0: a control link to the coordinator that declares nothing, then a discharge
        if ctx.variant == "rollback":
            raise Unsupported(f"variant rollback: {ROLLBACK_ALWAYS_COMPLETES}")
        return {"variant": ctx.variant, "discharge": discharge(fail=False)}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        if "discharge" in obs:
            a = obs["discharge"]
            ok = a.startswith(("rejected (amqp:transaction:", "control link ended: amqp:transaction:"))
            return holds(ok, expected="a discharge (fail=false) of a txn-id the coordinator never declared, on a control link that declared "
                                      "nothing, rejected with a transaction-error (amqp:transaction:unknown-id)",
                         observed=a, key=None if ok else "discharge-" + a.split(" ")[0].rstrip(":"))
        return channel_closed_with(obs["answer"], 406, what=f"tx.{obs['variant']} on a non-transacted channel")


class TestConfirmsExclusive(Case):
    requirement = "TX-CONFIRMS-EXCLUSIVE"
    queue_types = (None,)
    variants = ("confirm-then-tx", "tx-then-confirm")

    def scenario(self, ctx: CaseContext) -> Obs:
        session = ctx.session("client")
        if ctx.variant == "confirm-then-tx":
            session.enable_confirms()
            answer = ctx.channel_error(lambda: (session.select_tx(), session.sync()))
        else:
            session.select_tx()
            answer = ctx.channel_error(lambda: (session.enable_confirms(), session.sync()))
        return {"variant": ctx.variant, "answer": answer}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        what = {"confirm-then-tx": "tx.select on a confirm-mode channel", "tx-then-confirm": "confirm.select on a transactional channel"}[obs["variant"]]

        def check(values: Mapping[str, Any]) -> Verdict:
            if values["tx.confirms-exclusive"] == "refused-406":
                return channel_closed_with(obs["answer"], 406, what=what)
            return accepted(obs["answer"], what=what)

        return judge(self.requirement, profile, queue_type, ["tx.confirms-exclusive"], check)
