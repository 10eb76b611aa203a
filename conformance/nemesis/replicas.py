"""Reading a replicated queue's state from the broker's own report, after a broker fault.

Why: after kill -9, a replicated queue (RabbitMQ's quorum queues, any Raft-style queue) may never
serve its messages again (rabbitmq-server#10070 on 3.10.8: the only replica comes back a follower
with an empty log at term 0, and no election ever starts). Waiting out a fixed window only to
report "no answer in 15 s" is slow and says less than the broker itself does. So a launched target
that can ask its broker (:meth:`conformance.targets.Target.queue_replicas`) lets a case stop
waiting as soon as the answer is known, and the verdict quotes the broker's report.

The reading is deliberately narrow: "lost" only when every replica is a plain follower with no log
entry at term 0, seen on two polls at least a second apart (a replica starting up is not mistaken
for one that lost everything). A leader ends the wait the other way. Anything else (a candidate, a
role this module does not know, a replica with log entries) is "pending": the wait goes on to the
case's window, as it does on a target without the capability.
"""

from __future__ import annotations

from typing import Sequence

from conformance.targets import Replica

#: Polls at least this far apart must both read "lost" before the wait ends on it.
CONFIRM_GAP_S = 1.0


def describe(replicas: Sequence[Replica]) -> str:
    return "; ".join(f"{r.node}: {r.role}, log index {r.log_index}, term {r.term}" for r in replicas) or "no replica"


def reading(replicas: Sequence[Replica]) -> str:
    """``leader``, ``lost`` or ``pending`` (see the module docstring)."""
    if any(r.role == "leader" for r in replicas):
        return "leader"
    if replicas and all(r.role == "follower" and r.log_index == 0 and r.term == 0 for r in replicas):
        return "lost"
    return "pending"
