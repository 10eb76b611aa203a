"""AMQP 0-9-1 class tx, commits at the same moment: several connections, each with its own
transaction of publishes to one queue, send tx.commit together (a barrier releases them at once).
Every commit must be answered with commit-ok, and the queue then holds every message once."""

from __future__ import annotations

import threading
from typing import Any

from conformance.catalogue.profiles import Profile
from conformance.errors import ChannelClosed, ConnectionLost
from conformance.kit.case import Case, CaseContext, Obs, delivery_obs
from conformance.kit.checkers import returned_exactly
from conformance.kit.context.state import WAIT_S
from conformance.kit.verdicts import Verdict, first_failure, fmt, holds

#: Committers and publishes per transaction: enough overlap to race, cheap to drain.
COMMITTERS = 4
MESSAGES = 2


class TestConcurrentCommits(Case):
    requirement = "TX-COMMIT-CONCURRENT"

    def scenario(self, ctx: CaseContext) -> Obs:
        q = ctx.queue()
        sessions, ids = [], []
        for k in range(1, COMMITTERS + 1):
            s = ctx.session(f"committer{k}")
            s.select_tx()
            ids.append(ctx.publish(q, MESSAGES, prefix=f"c{k}-m", persistent=True, session=s))
            s.sync()  # the publishes reached the broker: only the commits remain, and they race
            sessions.append(s)
        told: list[str] = ["no answer"] * COMMITTERS
        start = threading.Barrier(COMMITTERS)

        def commit(k: int) -> None:
            try:
                start.wait(WAIT_S)
                sessions[k].commit()
                told[k] = "commit-ok"
            except (ChannelClosed, ConnectionLost) as exc:
                told[k] = f"{type(exc).__name__}: {exc}"
            except threading.BrokenBarrierError:
                told[k] = "never sent (the others did not start)"

        threads = [threading.Thread(target=commit, args=(k,), name=f"committer{k + 1}") for k in range(COMMITTERS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(WAIT_S * 2)
        for s in sessions:
            s.close()
        obs: dict[str, Any] = {"ids": ids, "told": told}
        obs["drained"] = [delivery_obs(d) for d in ctx.drain(q)]
        return obs

    def verdict(self, obs: Obs, profile: Profile, queue_type: str | None) -> Verdict:
        failed = [f"committer {k + 1}: {t}" for k, t in enumerate(obs["told"]) if t != "commit-ok"]
        committed = [m for k, batch in enumerate(obs["ids"]) if obs["told"][k] == "commit-ok" for m in batch]
        return first_failure(
            holds(not failed, expected=f"every one of {len(obs['told'])} concurrent tx.commit answered with tx.commit-ok",
                  observed="; ".join(failed) if failed else "all answered commit-ok", key="commit-failed" if failed else None),
            returned_exactly(obs["drained"], committed, what=f"in the queue after {len(obs['told'])} concurrent commits of {fmt([len(b) for b in obs['ids']])} publishes"),
        )
