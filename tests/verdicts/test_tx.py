"""Verdicts of the transaction area (conformance/cases/tx/) on synthetic observations.

Same contract as tests/verdicts/examples.py states (tests/verdicts/test_coverage.py counts the examples here):
a compliant observation passes, each distinct violation fails with expected and observed.
"""

from __future__ import annotations

from typing import Any

from conformance.kit.verdicts import Outcome, apply_profile
from tests.verdicts.examples import (
    BASELINE,
    CASES,
    OPEN,
    RABBIT,
    Example,
    again,
    channel_406,
    connection_closed,
    first,
    msgs,
    soft,
    under_rabbit_and_baseline,
    verdict_tests,
    with_,
)

T = ["t1", "t2", "t3"]


def rnd(n: int, told: str, got: list[str], hit: str = "conn#1 client frame #17 tx.commit on channel 1") -> dict[str, Any]:
    return {"round": n, "ids": [f"r{n}-m1", f"r{n}-m2", f"r{n}-m3"], "told": told, "hit": hit, "got": got}


def all_of(n: int) -> list[str]:
    return [f"r{n}-m1", f"r{n}-m2", f"r{n}-m3"]


def in_flight(variant: str, rounds: list[dict[str, Any]]) -> dict[str, Any]:
    return {"variant": variant, "rounds": rounds}


CONCURRENT = [[f"c{k}-m1", f"c{k}-m2"] for k in (1, 2, 3, 4)]
PRODUCED = [f"b{b}-m{i}" for b in (1, 2, 3) for i in (1, 2, 3)]
FAILOVER = {
    "produced": PRODUCED,
    "producer_rolled_back": ["b2-m1", "b2-m2", "b2-m3"],
    # b2 was committed by the broker although the producer was told it rolled back: resent, twice in the stream.
    "processed": [{"id": m, "redelivered": False} for m in PRODUCED[:6] + ["b2-m1", "b2-m2", "b2-m3"] + PRODUCED[6:]],
    "consumer_rolled_back": ["b1-m1"],
    "finished": True,
    "leftover": [],
    "faults": ["..."],
    "reconnects": {"producer": 2, "consumer": 2},
}

GOOD_OBS: dict[str, list[dict[str, Any]]] = {
    "TestUncommittedInvisible": [{"tx_ids": T, "before_commit": [], "after_commit": first(*T)}],
    "TestUncommittedDiscarded": [
        {"variant": "cut", "tx_ids": T, "committed_later": [], "drained": []},
        {"variant": "fin", "tx_ids": T, "committed_later": [], "drained": []},
        {"variant": "rollback", "tx_ids": T, "committed_later": ["after-rollback-1"], "drained": first("after-rollback-1")},
    ],
    "TestCommittedVisible": [{"tx_ids": T, "drained": first(*T)}],
    "TestCommitInFlight": [
        in_flight("commit-withheld", [rnd(1, "connection lost", []), rnd(2, "connection lost", [])]),
        in_flight("commit-delivered", [rnd(1, "connection lost", all_of(1)), rnd(2, "connection lost", [])]),
        in_flight("commit-ok-withheld", [rnd(1, "connection lost", all_of(1)), rnd(2, "connection lost", all_of(2))]),
        in_flight("body-delivered", [rnd(1, "connection lost", [])]),
    ],
    "TestUncommittedAcksDropped": [{"published": msgs(3), "acked_in_tx": ["m1", "m2"], "returned": again(*msgs(3))}],
    "TestCommittedAcksFinal": [{"published": msgs(3), "acked": ["m1", "m2"], "unacked": ["m3"], "returned": again("m3")}],
    "TestRollbackDoesNotRedeliver": [{"published": msgs(3), "after_rollback": [], "returned": again(*msgs(3))}],
    "TestCommitRequiresSelect": [
        {"variant": "commit", "answer": channel_406("PRECONDITION_FAILED - channel is not transactional")},
        {"variant": "rollback", "answer": channel_406("PRECONDITION_FAILED - channel is not transactional")},
        # AMQP 1.0: the discharge of a txn-id never declared, rejected or its control link detached with the error (qpidd 1.39.0)
        {"variant": "commit", "discharge": "rejected (amqp:transaction:unknown-id)"},
        {"variant": "commit", "discharge": "control link ended: amqp:transaction:unknown-id: Cannot discharge transaction never-declared-1, no current transaction"},
    ],
    "TestAckAllCommit": [
        {"variant": "outstanding", "held": msgs(3), "commit": OPEN, "second": OPEN, "later": ["after-commit-1"], "remaining": again("after-commit-1")},
        {"variant": "none", "held": [], "commit": OPEN, "second": OPEN, "later": ["after-commit-1"], "remaining": first("after-commit-1")},
    ],
    "TestAckPendingAcrossRecover": [{"published": ["m1", "m2"], "acked_in_tx": "m1", "rollback": OPEN, "remaining": again("m1", "m2")}],
    "TestConcurrentCommits": [{"ids": CONCURRENT, "told": ["commit-ok"] * 4, "drained": first(*[m for b in CONCURRENT for m in b])}],
    "TestCommittedSurvivesKill": [{"tx_ids": T, "drained": first(*T), "unavailable": None}],
    "TestFailoverNoLoss": [FAILOVER],
}

TX_GOOD: list[Example] = under_rabbit_and_baseline(GOOD_OBS) + [
    # The profile documents tx/confirm exclusivity; the spec-only profile cannot judge it.
    Example("TestConfirmsExclusive", f"rabbitmq-{v}", {"variant": v, "answer": channel_406(f"PRECONDITION_FAILED - cannot switch from {v.split('-')[0]} to tx mode")}, queue_type=None)
    for v in ("confirm-then-tx", "tx-then-confirm")
]

G = {k: v[0] for k, v in GOOD_OBS.items()}

TX_VIOLATIONS: list[Example] = [
    Example("TestUncommittedInvisible", "t1-delivered-before-commit", with_(G["TestUncommittedInvisible"], before_commit=first("t1"))),
    Example("TestUncommittedInvisible", "t3-missing-after-commit", with_(G["TestUncommittedInvisible"], after_commit=first("t1", "t2"))),
    Example("TestUncommittedInvisible", "reordered-after-commit", with_(G["TestUncommittedInvisible"], after_commit=first("t2", "t1", "t3"))),
    Example("TestUncommittedDiscarded", "cut-delivers-all", {"variant": "cut", "tx_ids": T, "committed_later": [], "drained": first(*T)}),
    Example("TestUncommittedDiscarded", "fin-delivers-part", {"variant": "fin", "tx_ids": T, "committed_later": [], "drained": first("t2")}),
    Example("TestUncommittedDiscarded", "rollback-keeps-t1", with_(GOOD_OBS["TestUncommittedDiscarded"][2], drained=first("t1", "after-rollback-1"))),
    Example("TestUncommittedDiscarded", "rollback-loses-later-commit", with_(GOOD_OBS["TestUncommittedDiscarded"][2], drained=[])),
    Example("TestCommittedVisible", "all-lost-after-commit-ok", with_(G["TestCommittedVisible"], drained=[])),
    Example("TestCommittedVisible", "t2-lost-after-commit-ok", with_(G["TestCommittedVisible"], drained=first("t1", "t3"))),
    Example("TestCommittedVisible", "t1-twice", with_(G["TestCommittedVisible"], drained=first("t1", "t1", "t2", "t3"))),
    Example("TestCommitInFlight", "partial-round", in_flight("commit-delivered", [rnd(1, "connection lost", all_of(1)), rnd(2, "connection lost", ["r2-m1"])])),
    Example("TestCommitInFlight", "commit-ok-withheld-but-none", in_flight("commit-ok-withheld", [rnd(1, "connection lost", [])])),
    Example("TestCommitInFlight", "commit-withheld-but-all", in_flight("commit-withheld", [rnd(1, "connection lost", all_of(1))])),
    Example("TestCommitInFlight", "body-delivered-but-all", in_flight("body-delivered", [rnd(1, "connection lost", all_of(1))])),
    Example("TestCommitInFlight", "told-ok-but-none", in_flight("commit-delivered", [rnd(1, "commit-ok", [])])),
    Example("TestCommitInFlight", "duplicate-in-round", in_flight("commit-delivered", [rnd(1, "connection lost", [*all_of(1), "r1-m2"])])),
    Example("TestCommitInFlight", "foreign-message", in_flight("commit-withheld", [rnd(1, "connection lost", ["r0-m1"])])),
    Example("TestCommitInFlight", "no-rounds", in_flight("commit-delivered", [])),
    Example("TestUncommittedAcksDropped", "uncommitted-acks-applied", with_(G["TestUncommittedAcksDropped"], returned=again("m3"))),
    Example("TestUncommittedAcksDropped", "returned-unflagged", with_(G["TestUncommittedAcksDropped"], returned=first(*msgs(3)))),
    Example("TestUncommittedAcksDropped", "m1-lost", with_(G["TestUncommittedAcksDropped"], returned=again("m2", "m3"))),
    Example("TestCommittedAcksFinal", "committed-acks-undone", with_(G["TestCommittedAcksFinal"], returned=again(*msgs(3)))),
    Example("TestCommittedAcksFinal", "unacked-lost", with_(G["TestCommittedAcksFinal"], returned=[])),
    Example("TestCommittedAcksFinal", "returned-unflagged", with_(G["TestCommittedAcksFinal"], returned=first("m3"))),
    Example("TestRollbackDoesNotRedeliver", "rollback-redelivers", with_(G["TestRollbackDoesNotRedeliver"], after_rollback=again(*msgs(3)))),
    Example("TestRollbackDoesNotRedeliver", "rolled-back-acks-applied", with_(G["TestRollbackDoesNotRedeliver"], returned=[])),
    Example("TestRollbackDoesNotRedeliver", "returned-unflagged", with_(G["TestRollbackDoesNotRedeliver"], returned=first(*msgs(3)))),
    Example("TestCommitRequiresSelect", "commit-accepted", with_(G["TestCommitRequiresSelect"], answer=OPEN)),
    Example("TestCommitRequiresSelect", "connection-closed-instead", with_(G["TestCommitRequiresSelect"], answer=connection_closed(503, "COMMAND_INVALID"))),
    Example("TestCommitRequiresSelect", "channel-503", with_(G["TestCommitRequiresSelect"], answer=soft(503, "COMMAND_INVALID"))),
    Example("TestCommitRequiresSelect", "amqp10-discharge-accepted", {"variant": "commit", "discharge": "accepted"}, shows="accepted"),
    Example("TestCommitRequiresSelect", "amqp10-detached-without-transaction-error", {"variant": "commit", "discharge": "control link ended: closed"},
            shows="control link ended: closed"),
    Example("TestCommitRequiresSelect", "amqp10-unanswered", {"variant": "commit", "discharge": "no answer: timed out after 30.0s"}, shows="no answer"),
    Example("TestConfirmsExclusive", "tx-on-confirm-channel-accepted", {"variant": "confirm-then-tx", "answer": OPEN}, queue_type=None),
    Example("TestConfirmsExclusive", "confirm-on-tx-channel-accepted", {"variant": "tx-then-confirm", "answer": OPEN}, queue_type=None),
    Example("TestAckAllCommit", "none-connection-541", with_(GOOD_OBS["TestAckAllCommit"][1], commit=connection_closed(541, "INTERNAL_ERROR - Unexpected error, please report")),
            shows="connection closed with 541"),
    Example("TestAckAllCommit", "outstanding-channel-406", with_(G["TestAckAllCommit"], commit=soft(406, "PRECONDITION_FAILED - unknown delivery tag 0")),
            shows="channel closed with 406"),
    Example("TestAckAllCommit", "acks-not-applied", with_(G["TestAckAllCommit"], remaining=again("m1", "m2", "m3", "after-commit-1")), shows="unexpected [m1, m2, m3]"),
    Example("TestAckAllCommit", "m2-not-acked", with_(G["TestAckAllCommit"], remaining=again("m2", "after-commit-1")), shows="unexpected [m2]"),
    Example("TestAckAllCommit", "second-commit-refused", with_(G["TestAckAllCommit"], second=connection_closed(541, "INTERNAL_ERROR")), shows="541"),
    Example("TestAckAllCommit", "second-commit-lost", with_(GOOD_OBS["TestAckAllCommit"][1], remaining=[]), shows="missing [after-commit-1]"),
    Example("TestAckPendingAcrossRecover", "m1-stranded", with_(G["TestAckPendingAcrossRecover"], remaining=again("m2")), shows="missing [m1]"),
    Example("TestAckPendingAcrossRecover", "m1-twice", with_(G["TestAckPendingAcrossRecover"], remaining=again("m1", "m2", "m1")), shows="duplicated [m1]"),
    Example("TestAckPendingAcrossRecover", "rollback-refused", with_(G["TestAckPendingAcrossRecover"], rollback=soft(406, "PRECONDITION_FAILED - unknown delivery tag 1")),
            shows="channel closed with 406"),
    Example("TestConcurrentCommits", "one-commit-541", with_(G["TestConcurrentCommits"], told=["commit-ok", "ChannelClosed: 541 INTERNAL_ERROR - Cannot commit transaction with state 'DISCHARGING'", "commit-ok", "commit-ok"],
            drained=first("c1-m1", "c1-m2", "c3-m1", "c3-m2", "c4-m1", "c4-m2")), shows="committer 2"),
    Example("TestConcurrentCommits", "c3-lost", with_(G["TestConcurrentCommits"], drained=first("c1-m1", "c1-m2", "c2-m1", "c2-m2", "c4-m1", "c4-m2")), shows="missing [c3-m1, c3-m2]"),
    Example("TestConcurrentCommits", "c1-twice", with_(G["TestConcurrentCommits"], drained=first(*[m for b in CONCURRENT for m in b], "c1-m1")), shows="duplicated [c1-m1]"),
    Example("TestConcurrentCommits", "never-answered", with_(G["TestConcurrentCommits"], told=["commit-ok", "no answer", "commit-ok", "commit-ok"]), shows="no answer"),
    Example("TestCommittedSurvivesKill", "lost-on-kill", with_(G["TestCommittedSurvivesKill"], drained=[])),
    Example("TestCommittedSurvivesKill", "t3-lost-on-kill", with_(G["TestCommittedSurvivesKill"], drained=first("t1", "t2"))),
    Example("TestCommittedSurvivesKill", "queue-unavailable", with_(G["TestCommittedSurvivesKill"], drained=[], unavailable="ConnectionLost: no answer")),
    Example("TestFailoverNoLoss", "b3-m2-lost", with_(FAILOVER, processed=[p for p in FAILOVER["processed"] if p["id"] != "b3-m2"])),
    Example("TestFailoverNoLoss", "unexplained-duplicate", with_(FAILOVER, processed=[*FAILOVER["processed"], {"id": "b3-m1", "redelivered": True}])),
    Example("TestFailoverNoLoss", "never-finished", with_(FAILOVER, finished=False)),
    Example("TestFailoverNoLoss", "foreign-id", with_(FAILOVER, leftover=["x-1"])),
]


test_compliant_observation_passes, test_violation_fails = verdict_tests(TX_GOOD, TX_VIOLATIONS)


def test_confirms_exclusivity_is_judged_by_the_reference_without_profile_entry() -> None:
    v = CASES["TestConfirmsExclusive"]().verdict({"variant": "confirm-then-tx", "answer": OPEN}, BASELINE, None)
    assert v.outcome is Outcome.FAIL, "the extension's owner documents a 406: a channel in both modes is not the reference"


def test_quorum_unavailable_after_kill_is_the_known_bug_only_on_quorum() -> None:
    case = CASES["TestCommittedSurvivesKill"]()
    obs = with_(G["TestCommittedSurvivesKill"], drained=[], unavailable="ConnectionLost: no answer")
    quorum = apply_profile(case.verdict(obs, RABBIT, "quorum"), case.requirement, "quorum", RABBIT)
    assert quorum.outcome is Outcome.FAIL and "10070" in quorum.known_bug, "an open upstream bug stays a fail"
    classic = apply_profile(case.verdict(obs, RABBIT, "classic"), case.requirement, "classic", RABBIT)
    assert classic.outcome is Outcome.FAIL and not classic.known_bug
    lost = apply_profile(case.verdict(with_(obs, unavailable=None), RABBIT, "quorum"), case.requirement, "quorum", RABBIT)
    assert lost.outcome is Outcome.FAIL, "messages lost outright are not the documented unavailability"
