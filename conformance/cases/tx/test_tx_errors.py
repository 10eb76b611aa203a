"""AMQP 0-9-1 class tx, misuse: commit/rollback without tx.select; mixing tx with publisher confirms."""

from __future__ import annotations

from typing import Any, Mapping

from conformance.catalogue.profiles import Profile
from conformance.kit.case import Case, CaseContext, Obs
from conformance.kit.checkers import accepted, channel_closed_with
from conformance.kit.reference import judge
from conformance.kit.verdicts import Verdict


class TestCommitRequiresSelect(Case):
    requirement = "TX-COMMIT-REQUIRES-SELECT"
    queue_types = (None,)
    variants = ("commit", "rollback")

    def scenario(self, ctx: CaseContext) -> Obs:
        session = ctx.session("client")
        op = session.commit if ctx.variant == "commit" else session.rollback
        return {"variant": ctx.variant, "answer": ctx.channel_error(lambda: (op(), session.sync()))}

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
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
