"""Ending the wait after kill -9 on the broker's own report of a replicated queue.

Pure logic on recorded reports: the JSON ``rabbitmq-queues quorum_status`` printed on RabbitMQ
3.10.8 here (a queue that recovered, and the rabbitmq-server#10070 queue that never does), the
reading of it, and the wait's decisions against a scripted target. The real-broker path runs in
the catalogue (TX-COMMIT-DURABLE quorum: ~7 s instead of waiting out its 15 s window).
"""

from __future__ import annotations

import pytest

from adapters.rabbitmq.launcher import parse_quorum_status
from conformance.errors import QueueUnavailable
from conformance.kit.context import broker_faults
from conformance.kit.context.broker_faults import BrokerFaults
from conformance.kit.history import History
from conformance.nemesis.replicas import reading
from conformance.targets import Replica

#: Recorded on RabbitMQ 3.10.8 (Debian 12), 2026-11-24, after kill -9 and start of a private node.
RECOVERED = ('[\n{"Node Name":"conformance-0c7e27@localhost","Raft State":"leader","Log Index":9,"Commit Index":9,'
             '"Snapshot Index":"undefined","Term":2,"Machine Version":2}\n]\n')
LOST = ('[\n{"Node Name":"conformance-119da8@localhost","Raft State":"follower","Log Index":0,"Commit Index":0,'
        '"Snapshot Index":"undefined","Term":0,"Machine Version":2}\n]\n')


def test_recorded_reports_read_as_leader_and_lost() -> None:
    assert reading(parse_quorum_status(RECOVERED)) == "leader"
    assert reading(parse_quorum_status(LOST)) == "lost"
    assert parse_quorum_status(LOST) == [Replica("conformance-119da8@localhost", "follower", 0, 0)]


@pytest.mark.parametrize("text", ["", "Error: queue 'q' is not a quorum queue", "[]", '[{"Node": "x"}]', "{}"])
def test_anything_but_a_replica_list_is_no_report(text: str) -> None:
    assert parse_quorum_status(text) is None


@pytest.mark.parametrize("replicas", [
    [Replica("a", "candidate", 0, 0)],                                      # an election under way
    [Replica("a", "follower", 3, 1)],                                       # it holds entries
    [Replica("a", "follower", 0, 0), Replica("b", "follower", 5, 2)],       # another replica holds them
    [Replica("a", "recovering", 0, 0)],                                     # a role this reading does not know
    [Replica("a", "follower", None, None)],                                 # the broker did not say
    [],
])
def test_only_every_replica_empty_at_term_zero_reads_lost(replicas: list[Replica]) -> None:
    assert reading(replicas) == "pending"


class Scripted:
    """A target whose broker reports the given replica lists in turn (the last one repeats)."""

    def __init__(self, *reports: list[Replica] | None) -> None:
        self.reports, self.calls = list(reports), 0

    def queue_replicas(self, queue: str) -> list[Replica] | None:
        self.calls += 1
        return self.reports[min(self.calls, len(self.reports)) - 1]


class Faults(BrokerFaults):
    def __init__(self, target: Scripted) -> None:  # only what the replica wait reads
        self.target, self.history = target, History()


@pytest.fixture(autouse=True)
def short_gap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(broker_faults, "CONFIRM_GAP_S", 0.05)


def wait(target: Scripted, window: float = 1.0) -> Faults:
    import time

    ctx = Faults(target)
    ctx._await_replicas("q", time.monotonic() + window)
    return ctx


def test_a_leader_ends_the_wait_at_once() -> None:
    target = Scripted([Replica("a", "candidate", 0, 1)], [Replica("a", "leader", 1, 1)])
    ctx = wait(target)
    assert target.calls == 2 and [e.detail for e in ctx.history.events if e.actor == "node"] == \
        ["q: a: candidate, log index 0, term 1", "q: a: leader, log index 1, term 1"]


def test_lost_ends_the_wait_only_when_two_polls_apart_agree() -> None:
    target = Scripted([Replica("a", "follower", 0, 0)])
    with pytest.raises(QueueUnavailable, match=r"no leader and no log in any replica of q.*a: follower, log index 0, term 0"):
        wait(target)
    assert target.calls >= 2


def test_a_lost_reading_followed_by_progress_starts_over() -> None:
    target = Scripted([Replica("a", "follower", 0, 0)], [Replica("a", "candidate", 0, 1)], [Replica("a", "leader", 1, 1)])
    wait(target)
    assert target.calls == 3


def test_pending_waits_out_the_window_and_leaves_the_answer_to_the_drain() -> None:
    import time

    start = time.monotonic()
    wait(Scripted([Replica("a", "candidate", 0, 1)]), window=0.3)
    assert time.monotonic() - start >= 0.3


def test_no_report_leaves_the_answer_to_the_drain_at_once() -> None:
    target = Scripted(None)
    wait(target)
    assert target.calls == 1
