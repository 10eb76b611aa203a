"""Verdicts of the publish area (conformance/cases/publish/) on synthetic observations, held to the
contract of tests/verdicts/examples.py: content framing edges (an empty body, a body larger than
frame-max) and publishes in flight when a frame fault hits (at least once, a torn message discarded).
"""

from __future__ import annotations

from typing import Any

from conformance.catalogue.profiles import select_profile
from tests.verdicts.examples import Example, bad, everywhere, msgs, under_rabbit_and_baseline, verdict_tests, with_


def framing_obs(mid: str, size: int, *, confirm: str = "basic.ack", delivered: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    sent = {"id": mid, "size": size, "sha": "s1"}
    return {"published": sent, "confirm": confirm, "delivered": [sent] if delivered is None else delivered}


def fanout_obs(*copies: list[dict[str, Any]] | None) -> dict[str, Any]:
    """The large body through a fanout exchange: what each bound queue delivered (None: the sent copy)."""
    obs = framing_obs("m-large", 394217)
    got = [[obs["published"]] if c is None else c for c in copies]
    return {**obs, "delivered": got[0], "copies": got}


FRAMING_GOOD = [
    *everywhere("TestEmptyBody", "confirmed-and-routed", framing_obs("m-empty", 0)),
    *everywhere("TestBodyLargerThanFrameMax", "reassembled", framing_obs("m-large", 394217)),
    *everywhere("TestBodyLargerThanFrameMaxFanout", "both-copies-whole", fanout_obs(None, None)),
]
FRAMING_VIOLATIONS = [
    Example("TestEmptyBody", "never-confirmed-nor-routed",
            framing_obs("m-empty", 0, confirm="basic.publish: no basic.ack (publisher confirm) within 5s", delivered=[]), shows="no basic.ack"),
    Example("TestEmptyBody", "confirmed-not-routed", framing_obs("m-empty", 0, delivered=[]), shows="delivered before the sentinel: []"),
    Example("TestBodyLargerThanFrameMax", "altered", framing_obs("m-large", 394217, delivered=[{"id": "m-large", "size": 394217, "sha": "s2"}]),
            shows="got [s2]"),
    Example("TestBodyLargerThanFrameMax", "nacked", framing_obs("m-large", 394217, confirm="publish not confirmed: basic.nack"), shows="basic.nack"),
    Example("TestBodyLargerThanFrameMaxFanout", "second-copy-corrupt", fanout_obs(None, [{"id": "m-large", "size": 394217, "sha": "s2"}]),
            shows="got [s2]"),
    Example("TestBodyLargerThanFrameMaxFanout", "second-copy-missing", fanout_obs(None, []), shows="delivered before the sentinel: []"),
]


def ids(*mids: str, intact: bool = True) -> list[dict[str, Any]]:
    return [{"id": m, "intact": intact} for m in mids]


# m1..m6 published one confirm at a time, the connection reset at m4 (its basic.publish, its body or the
# broker's basic.ack withheld): what the queue kept, then what it holds after every unconfirmed message is resent.
INFLIGHT = {
    "variant": "confirm-withheld",
    "ids": msgs(6),
    "confirmed": ["m1", "m2", "m3"],
    "unconfirmed": ["m4", "m5", "m6"],
    "hit": "conn#1 server frame #12 basic.ack on channel 1",
    "kept": ids("m1", "m2", "m3", "m4"),
    "after_resend": ids("m4", "m5", "m6"),
}
TORN = {**INFLIGHT, "variant": "body-withheld", "kept": ids("m1", "m2", "m3"), "after_resend": ids("m4", "m5", "m6")}
INFLIGHT_OBS: dict[str, list[dict[str, Any]]] = {
    "TestInflightAtLeastOnce": [INFLIGHT, with_(INFLIGHT, variant="publish-withheld", kept=ids("m1", "m2", "m3"))],
    "TestTornMessageDiscarded": [TORN, with_(TORN, variant="between-body-frames"), with_(TORN, variant="inside-body-frame")],
}
INFLIGHT_GOOD: list[Example] = under_rabbit_and_baseline(INFLIGHT_OBS)
INFLIGHT_VIOLATIONS: list[Example] = [
    Example("TestInflightAtLeastOnce", "confirmed-m2-lost", with_(INFLIGHT, kept=ids("m1", "m3", "m4"), after_resend=ids("m4", "m5", "m6"))),
    Example("TestInflightAtLeastOnce", "m5-missing-after-resend", with_(INFLIGHT, after_resend=ids("m4", "m6"))),
    Example("TestInflightAtLeastOnce", "confirmed-m1-duplicated", with_(INFLIGHT, after_resend=ids("m1", "m4", "m5", "m6"))),
    Example("TestInflightAtLeastOnce", "corrupt-body", with_(INFLIGHT, kept=[*ids("m1", "m2", "m3"), *ids("m4", intact=False)])),
    Example("TestTornMessageDiscarded", "torn-m4-enqueued", with_(TORN, kept=ids("m1", "m2", "m3", "m4"))),
    Example("TestTornMessageDiscarded", "torn-m4-enqueued-partial", with_(TORN, kept=[*ids("m1", "m2", "m3"), *ids("m4", intact=False)])),
    Example("TestTornMessageDiscarded", "m2-corrupt", with_(TORN, kept=[*ids("m1"), *ids("m2", intact=False), *ids("m3")])),
    Example("TestTornMessageDiscarded", "between-body-frames-m4-stored-partial",
            with_(TORN, variant="between-body-frames", kept=[*ids("m1", "m2", "m3"), *ids("m4", intact=False)]),
            shows="m4 was enqueued with a corrupt body"),
    Example("TestTornMessageDiscarded", "inside-body-frame-m4-stored",
            with_(TORN, variant="inside-body-frame", kept=ids("m1", "m2", "m3", "m4")), shows="m4 was enqueued"),
]



# Publisher confirms, refusals and returns (conformance/cases/publish/test_confirms.py): events as the
# client received them; a multiple=true confirm covers the sequence numbers up to it still unconfirmed.
def ack(tag: int, multiple: bool = False) -> dict[str, Any]:
    return {"kind": "ack", "tag": tag, "multiple": multiple}


def nack(tag: int, multiple: bool = False) -> dict[str, Any]:
    return {"kind": "nack", "tag": tag, "multiple": multiple}


def ret(mid: str, code: int = 312) -> dict[str, Any]:
    return {"kind": "return", "code": code, "id": mid}


SYNC, COMMIT = {"kind": "sync-ok"}, {"kind": "commit-ok"}
BURST_OBS = {"before": ["m0"], "published": msgs(10), "events": [ack(1), ack(4, True), ack(10, True)], "ready": 11}
OFFER = [f"m{i}" for i in range(1, 21)] + ["over1", "over2", "over3", "retry"]
# RabbitMQ's classic queue: two acked, the rest nacked (multiple), the retry acked.
REFUSED_OBS = {"published": OFFER, "over": ["over1", "over2", "over3"],
               "events": [ack(1), ack(2, True), nack(20, True), nack(21), nack(22), nack(23), ack(24)],
               "held": ["m1", "m2"], "retry_held": ["retry"]}
UNROUTABLE_OBS = {"published": ["u-mandatory", "u-plain"], "mandatory": [ret("u-mandatory"), ack(1)], "plain": [ack(2)],
                  "events": [ret("u-mandatory"), ack(1), ack(2)]}
TX_RETURN_OBS = {"routed": [SYNC, COMMIT, SYNC], "unroutable": [SYNC, ret("t-unroutable"), COMMIT, SYNC], "held": ["t2", "t1"]}
A_IDS, B_IDS = ["a1", "a2", "a3", "a4"], ["b1", "b2", "b3", "b4"]
# RabbitMQ's classic queue: each commit fails with 406 (the first two of the first transaction kept).
TX_REFUSED_OBS = {"rounds": [{"ids": A_IDS, "events": [], "closed": "channel closed with 406 PRECONDITION_FAILED - partial tx completion"},
                             {"ids": B_IDS, "events": [], "closed": "channel closed with 406 PRECONDITION_FAILED - partial tx completion"}],
                  "held": ["a1", "a2"]}
COMMITTED = [SYNC, COMMIT, SYNC]
# LavinMQ: commit-ok, the refused ones returned on commit.
TX_RETURNED_OBS = {"rounds": [{"ids": A_IDS, "events": [SYNC, ret("a3"), ret("a4"), COMMIT, SYNC], "closed": None},
                              {"ids": B_IDS, "events": [SYNC, *[ret(m) for m in B_IDS], COMMIT, SYNC], "closed": None}],
                   "held": ["a1", "a2"]}

CONFIRMS_GOOD: list[Example] = [
    *under_rabbit_and_baseline({
        "TestEachPublishConfirmedOnce": [BURST_OBS, with_(BURST_OBS, events=[ack(2), ack(1), ack(3), ack(10, True)])],
        "TestRefusedPublishNacked": [
            REFUSED_OBS,
            # a quorum queue takes the whole first burst before it tells the channel to refuse
            with_(REFUSED_OBS, events=[ack(20, True), nack(23, True), ack(24)], held=OFFER[:20]),
            # LavinMQ 2.9: nacks ahead of the ack of lower numbers, a later ack(multiple) passing over
            # nacked numbers (already confirmed, so not covered again)
            with_(REFUSED_OBS, events=[*[nack(t) for t in range(3, 24)], ack(2, True), ack(24, True)]),
        ],
        "TestUnroutableConfirmed": [UNROUTABLE_OBS],
        "TestTxUnroutableReturnedOnCommit": [TX_RETURN_OBS],
        "TestTxRefusedNotSilent": [
            TX_REFUSED_OBS, TX_RETURNED_OBS,
            # a quorum queue taking the whole first transaction, then failing the second commit
            with_(TX_REFUSED_OBS, rounds=[{"ids": A_IDS, "events": COMMITTED, "closed": None}, TX_REFUSED_OBS["rounds"][1]], held=A_IDS),
        ],
    }),
]
CONFIRMS_VIOLATIONS: list[Example] = [
    bad("TestEachPublishConfirmedOnce", "5-never-confirmed",
        with_(BURST_OBS, events=[ack(4, True), *[ack(t) for t in range(6, 11)]]), shows="no confirm for sequence number(s) 5"),
    bad("TestEachPublishConfirmedOnce", "3-confirmed-twice", with_(BURST_OBS, events=[ack(4, True), ack(10, True), ack(3, True)]),
        shows="confirmed twice: 3"),
    bad("TestEachPublishConfirmedOnce", "5-acked-and-nacked", with_(BURST_OBS, events=[ack(10, True), nack(5)]),
        shows="both acked and nacked: 5"),
    bad("TestEachPublishConfirmedOnce", "unknown-tag", with_(BURST_OBS, events=[ack(10, True), ack(11)]), shows="never published"),
    bad("TestEachPublishConfirmedOnce", "2-nacked", with_(BURST_OBS, events=[ack(1), nack(2), ack(10, True)]), shows="nacked [2]"),
    bad("TestEachPublishConfirmedOnce", "confirmed-lost", with_(BURST_OBS, ready=10), shows="holds 10"),
    # the publish before confirm.select counted: every confirm one ahead of the client's numbers
    bad("TestEachPublishConfirmedOnce", "counted-before-select", with_(BURST_OBS, events=[ack(2), ack(5, True), ack(11, True)]),
        shows="never published: [ack(11, multiple)]"),
    bad("TestRefusedPublishNacked", "refused-under-limit", with_(REFUSED_OBS, events=[ack(1), nack(20, True), nack(23, True), ack(24)], held=["m1"]),
        shows="nacked while the queue was under its limit"),
    bad("TestRefusedPublishNacked", "over-acked", with_(REFUSED_OBS, events=[ack(2, True), nack(20, True), ack(23, True), ack(24)],
                                                        held=["m1", "m2", "over1", "over2", "over3"]), shows="acked [over1, over2, over3]"),
    bad("TestRefusedPublishNacked", "nacked-enqueued", with_(REFUSED_OBS, held=["m1", "m2", "m3"]), shows="nacked yet held [m3]"),
    bad("TestRefusedPublishNacked", "acked-lost", with_(REFUSED_OBS, held=["m1"]), shows="held [m1]"),
    bad("TestRefusedPublishNacked", "retry-refused", with_(REFUSED_OBS, events=[*REFUSED_OBS["events"][:-1], nack(24)], retry_held=[]),
        shows="retry nack"),
    bad("TestRefusedPublishNacked", "nack-then-ack-of-3", with_(REFUSED_OBS, events=[*REFUSED_OBS["events"], ack(3)]),
        shows="both acked and nacked: 3"),
    bad("TestUnroutableConfirmed", "ack-before-return", with_(UNROUTABLE_OBS, mandatory=[ack(1), ret("u-mandatory")]),
        shows="[ack(1), return(u-mandatory, 312)]"),
    bad("TestUnroutableConfirmed", "not-returned", with_(UNROUTABLE_OBS, mandatory=[ack(1)], events=[ack(1), ack(2)]), shows="[ack(1)]"),
    bad("TestUnroutableConfirmed", "plain-nacked", with_(UNROUTABLE_OBS, plain=[nack(2)], events=[ret("u-mandatory"), ack(1), nack(2)]),
        shows="[nack(2)]"),
    bad("TestUnroutableConfirmed", "mandatory-never-confirmed", with_(UNROUTABLE_OBS, mandatory=[ret("u-mandatory")], events=[ret("u-mandatory"), ack(2)]),
        shows="no confirm for sequence number(s) 1"),
    bad("TestTxUnroutableReturnedOnCommit", "returned-before-commit", with_(TX_RETURN_OBS, unroutable=[ret("t-unroutable"), SYNC, COMMIT, SYNC]),
        shows="returned before the commit"),
    bad("TestTxUnroutableReturnedOnCommit", "never-returned", with_(TX_RETURN_OBS, unroutable=[SYNC, COMMIT, SYNC]), shows="[sync-ok, commit-ok, sync-ok]"),
    bad("TestTxUnroutableReturnedOnCommit", "routed-lost", with_(TX_RETURN_OBS, held=["t1"]), shows="held [t1]"),
    bad("TestTxRefusedNotSilent", "dropped-under-commit-ok",
        with_(TX_REFUSED_OBS, rounds=[{"ids": A_IDS, "events": COMMITTED, "closed": None}, {"ids": B_IDS, "events": COMMITTED, "closed": None}],
              held=A_IDS), shows="neither queued nor returned: [b1, b2, b3, b4]"),
    bad("TestTxRefusedNotSilent", "one-refused-unreturned",
        with_(TX_RETURNED_OBS, rounds=[{"ids": A_IDS, "events": [SYNC, ret("a4"), COMMIT, SYNC], "closed": None}, TX_RETURNED_OBS["rounds"][1]]),
        shows="neither queued nor returned: [a3]"),
    bad("TestTxRefusedNotSilent", "one-dropped-from-a-kept-transaction",
        with_(TX_REFUSED_OBS, rounds=[{"ids": A_IDS, "events": COMMITTED, "closed": None}, TX_REFUSED_OBS["rounds"][1]], held=["a1", "a3", "a4"]),
        qt="quorum", shows="neither queued nor returned: [a2]"),
    bad("TestTxRefusedNotSilent", "connection-541-at-commit",
        with_(TX_REFUSED_OBS, rounds=[{**r, "closed": "connection closed with 541 INTERNAL_ERROR - Unexpected error, please report", "crashed": True}
                                      for r in TX_REFUSED_OBS["rounds"]]), shows="541 INTERNAL_ERROR"),
    bad("TestEachPublishConfirmedOnce", "channel-541-mid-burst",
        with_(BURST_OBS, events=[ack(4, True), {"kind": "closed", "code": 541, "text": "INTERNAL_ERROR", "hard": False}]),
        shows="channel closed with 541 INTERNAL_ERROR after [ack(4, multiple)]"),
    bad("TestRefusedPublishNacked", "connection-closed-at-refusal",
        with_(REFUSED_OBS, events=[ack(1), ack(2, True), {"kind": "closed", "code": 541, "text": "INTERNAL_ERROR", "hard": True}], held=["m1", "m2"]),
        shows="connection closed with 541"),
    bad("TestTxRefusedNotSilent", "no-answer-to-commit", with_(TX_RETURNED_OBS, rounds=[{"ids": A_IDS, "events": [SYNC], "closed": None}]),
        shows="no tx.commit-ok"),
    bad("TestTxUnroutableReturnedOnCommit", "no-commit-ok", with_(TX_RETURN_OBS, unroutable=[SYNC, ret("t-unroutable")]), shows="then [sync-ok"),
]

# The same cases over AMQP 1.0 (the proton adapter): each settled disposition one confirm, never multiple,
# naming its transfer's message and outcome; judged with the spec-only AMQP 1.0 profile.
SPEC10 = select_profile("Other", "1.0", "amqp-1.0")


def acc(tag: int, mid: str | None = None) -> dict[str, Any]:
    return {"kind": "ack", "tag": tag, "multiple": False, "id": mid or f"m{tag}", "outcome": "accepted settled"}


def ref(tag: int, mid: str, outcome: str = "rejected settled") -> dict[str, Any]:
    return {"kind": "nack", "tag": tag, "multiple": False, "id": mid, "outcome": outcome}


def ex10(case: str, name: str, obs: dict[str, Any], shows: str | None = None) -> Example:
    return Example(case, f"{name}-amqp10", obs, queue_type="classic", profile=SPEC10, shows=shows)


BURST10 = {"before": ["m0"], "published": msgs(10), "events": [acc(t) for t in range(1, 11)], "ready": 11}
REFUSED10 = {"published": OFFER, "over": ["over1", "over2", "over3"],
             "events": [acc(1), acc(2), *[ref(t, OFFER[t - 1]) for t in range(3, 24)], acc(24, "retry")],
             "held": ["m1", "m2"], "retry_held": ["retry"]}
TX10 = {"rounds": [{"ids": ["a1", "a2", "a3"], "events": [acc(1, "a1"), acc(2, "a2"), ref(3, "a3"), SYNC, COMMIT, SYNC], "closed": None},
                   {"ids": B_IDS, "events": [ref(4, "b1"), ref(5, "b2"), ref(6, "b3"), ref(7, "b4"), SYNC, COMMIT, SYNC], "closed": None}],
        "held": ["a1", "a2"]}
UNSETTLED = {"kind": "unsettled-outcome", "tag": 5, "text": "accepted unsettled"}
AMQP10_GOOD = [
    ex10("TestEachPublishConfirmedOnce", "each-accepted-once", BURST10),
    ex10("TestRefusedPublishNacked", "refused-rejected", REFUSED10),
    ex10("TestRefusedPublishNacked", "refused-released", with_(REFUSED10, events=[acc(1), acc(2), *[ref(t, OFFER[t - 1], "released settled") for t in range(3, 24)], acc(24, "retry")])),
    ex10("TestTxRefusedNotSilent", "refused-in-the-transaction", TX10),
    ex10("TestTxRefusedNotSilent", "discharge-rejected",
         with_(TX10, rounds=[{"ids": A_IDS, "events": [], "closed": "channel closed with 0 discharge (commit) rejected: amqp:transaction:rollback"}],
               held=[])),
]
AMQP10_VIOLATIONS = [
    # a transfer settled twice (the mutation disposition-doubled), or with a second, different outcome
    ex10("TestEachPublishConfirmedOnce", "settled-twice", with_(BURST10, events=[*BURST10["events"], acc(3)]), shows="confirmed twice: 3"),
    ex10("TestEachPublishConfirmedOnce", "outcome-changed", with_(BURST10, events=[*BURST10["events"], ref(7, "m7", "released settled")]),
         shows="both acked and nacked: 7"),
    ex10("TestEachPublishConfirmedOnce", "left-unsettled", with_(BURST10, events=[e for e in BURST10["events"] if e["tag"] != 5] + [UNSETTLED]),
         shows="no confirm for sequence number(s) 5"),
    ex10("TestEachPublishConfirmedOnce", "released-though-taken",
         with_(BURST10, events=[ref(1, "m1", "released settled"), *BURST10["events"][1:]], ready=10), shows="nacked [1]"),
    ex10("TestEachPublishConfirmedOnce", "accepted-but-lost", with_(BURST10, ready=9), shows="the queue holds 9"),
    # qpidd 1.39.0 (QPID-8577): the link ended at the first refused transfer
    ex10("TestRefusedPublishNacked", "link-detached-at-refusal",
         with_(REFUSED10, events=[acc(1), acc(2), {"kind": "closed", "code": 406, "text": "broker detached the link to q: amqp:precondition-failed",
                                                  "hard": False}, acc(24, "retry")]),
         shows="channel closed with 406 broker detached the link"),
    ex10("TestRefusedPublishNacked", "over-limit-accepted", with_(REFUSED10, events=[acc(1), acc(2), *[ref(t, OFFER[t - 1]) for t in range(3, 21)],
                                                                                    acc(21, "over1"), acc(22, "over2"), acc(23, "over3"), acc(24, "retry")]),
         shows="acked [over1, over2, over3]"),
    ex10("TestTxRefusedNotSilent", "accepted-and-dropped-under-the-discharge",
         with_(TX10, rounds=[{"ids": ["a1", "a2", "a3"], "events": [acc(1, "a1"), acc(2, "a2"), acc(3, "a3"), SYNC, COMMIT, SYNC], "closed": None}]),
         shows="neither queued nor returned: [a3]"),
    # qpidd 1.39.0: the discharge answered by closing the connection with amqp:internal-error
    ex10("TestTxRefusedNotSilent", "connection-internal-error-at-discharge",
         with_(TX10, rounds=[{"ids": ["a1", "a2", "a3"], "events": [], "crashed": True,
                              "closed": "connection closed with 541 connection closed by broker: amqp:internal-error: internal-error: Transaction prepare failed."}]),
         shows="Transaction prepare failed"),
]

PUBLISH_GOOD: list[Example] = [*FRAMING_GOOD, *INFLIGHT_GOOD, *CONFIRMS_GOOD, *AMQP10_GOOD]
PUBLISH_VIOLATIONS: list[Example] = [*FRAMING_VIOLATIONS, *INFLIGHT_VIOLATIONS, *CONFIRMS_VIOLATIONS, *AMQP10_VIOLATIONS]


test_compliant_observation_passes, test_violation_fails = verdict_tests(PUBLISH_GOOD, PUBLISH_VIOLATIONS)
