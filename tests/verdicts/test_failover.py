"""Verdicts of the failover area on synthetic observations.

Same contract as tests/verdicts/examples.py states (tests/verdicts/test_coverage.py counts the examples here): a
compliant observation passes, each distinct violation fails with expected and observed. The
observations have the shape the cases record on a three-node cluster: which node was killed
(``victim``/``home``) and through which node the outcome was seen (``observer``).
"""

from __future__ import annotations

from conformance.catalogue.profiles import select_profile
from conformance.kit.verdicts import Outcome
from tests.verdicts.examples import BASELINE, Example, verdict_tests, with_

N1, N2, N3 = "c-1@localhost", "c-2@localhost", "c-3@localhost"
M = [f"m{i}" for i in range(1, 41)]

CONFIRMED = {"victim": N1, "role": "leader", "observer": N2, "failover_to": N3, "replicas_before": {"leader": N1},
             "published": M, "confirmed": M, "in_doubt": ["m21"], "drained": [*M[:21], "m21", *M[21:]]}
REDELIVERED = {"victim": N2, "role": "follower", "observer": N1, "replicas_before": {"leader": N1}, "published": M[:5],
               "held": [{"id": m, "tag": i, "redelivered": False, "delivery_count": None} for i, m in enumerate(M[:5], 1)],
               "after": [{"id": m, "tag": i, "redelivered": True, "delivery_count": None} for i, m in enumerate(M[:5], 1)]}
TX = [f"tx-{i}" for i in range(1, 6)]
IN_FLIGHT = {"victim": N1, "observer": N2, "replicas_before": {"leader": N1}, "fault": "conn#1 server frame 9 tx.commit-ok on channel 1",
             "tx": TX, "control": ["control-1"], "client_answer": "no answer: ConnectionLost", "drained": ["control-1", *TX]}
B = [[f"b{b}-m{i}" for i in (1, 2, 3)] for b in (1, 2, 3)]
ROLLED = {"victim": N3, "observer": N1, "replicas_before": {"leader": N1}, "batches": B, "rolled_back": [B[1]],
          "commits": ["batch 1 attempt 1: committed", "batch 2 attempt 1: rolled back", "batch 2 attempt 2: committed"],
          "nodes_used": [N3, N1], "drained": [m for b in B for m in b]}
DEDUP = {"victim": N3, "observer": N1, "replicas_before": {"leader": N1}, "produced": M, "confirmed": M, "in_doubt": ["m21"],
         "seen": M, "raw": [{"id": m, "redelivered": False, "node": N3} for m in M] + [{"id": "m9", "redelivered": True, "node": N1}],
         "consumer_nodes": [N3, N1], "producer_nodes": [N3, N1], "leftover": ["m21"]}
REFUSED = {"closed": True, "code": 404, "text": "NOT_FOUND - home node 'c-1@localhost' of durable queue 'q' in vhost '/' is down or inaccessible"}
SERVED = {"closed": False, "code": None, "text": ""}
UNMIRRORED = {"variant": "unmirrored", "home": N1, "observer": N2, "replicas_before": {"home": N1}, "published": M[:5],
              "during": [], "refused": REFUSED, "after_restart": M[:5]}
MIRRORED = {**UNMIRRORED, "variant": "mirrored", "refused": SERVED, "during": M[:5], "after_restart": []}

QP10 = select_profile("qpid-cpp", "1.39.0", "amqp-1.0")
P6 = [f"b{b}-m{i}" for b in (1, 2) for i in (1, 2, 3)]


def d10(mid: str, tag: int, count: int = 0) -> dict[str, object]:
    return {"id": mid, "tag": tag, "redelivered": count > 0, "delivery_count": count, "first_acquirer": count == 0, "presettled": False}


#: One broker, the failover clients reconnecting (qpidd 1.39.0 over AMQP 1.0, as seen).
RECONNECT = {"producer_commit": "rolled back: Transaction failed and has been rolled back (connection lost inside the transaction): b2-m1, b2-m2, b2-m3",
             "consumer_commit": "rolled back: Transaction failed and has been rolled back (connection lost inside the transaction): b1-m1, b1-m2, b1-m3",
             "ready_after_failed_commit": 3, "produced": P6, "failed_tx": [d10(m, i) for i, m in enumerate(P6[:3], 1)],
             "committed": [d10(m, i, 1) for i, m in enumerate(P6, 1)], "left": [], "producer_events": [], "consumer_events": []}


FAILOVER_GOOD: list[Example] = [
    Example("TestConfirmedSurviveNodeLoss", "in-doubt-m21-twice", CONFIRMED, "quorum"),
    Example("TestConfirmedSurviveNodeLoss", "in-doubt-m21-once", with_(CONFIRMED, drained=M), "quorum"),
    Example("TestUnackedRedeliveredElsewhere", "all-back-flagged", REDELIVERED, "quorum"),
    Example("TestCommitInFlightLeaderDies", "all", IN_FLIGHT, "quorum"),
    Example("TestCommitInFlightLeaderDies", "none", with_(IN_FLIGHT, drained=["control-1"]), "quorum"),
    Example("TestTransactionRolledBackAfterFailover", "rolled-back-and-resent", ROLLED, "quorum"),
    Example("TestResendAndDedupAcrossNodes", "each-once-after-filter", DEDUP, "quorum"),
    Example("TestClassicQueueHomeNodeLoss", "unmirrored-unavailable", UNMIRRORED),
    Example("TestClassicQueueHomeNodeLoss", "mirrored-promoted", MIRRORED),
    Example("TestTransactedClientsReconnect", "qpidd-amqp10", RECONNECT, "classic", QP10),
]

FAILOVER_VIOLATIONS: list[Example] = [
    Example("TestConfirmedSurviveNodeLoss", "confirmed-m2-lost", with_(CONFIRMED, drained=[m for m in M if m != "m2"]), "quorum"),
    Example("TestConfirmedSurviveNodeLoss", "confirmed-m3-duplicated", with_(CONFIRMED, drained=[*M, "m3"]), "quorum"),
    Example("TestConfirmedSurviveNodeLoss", "never-published", with_(CONFIRMED, drained=[*M, "m99"]), "quorum"),
    Example("TestUnackedRedeliveredElsewhere", "redelivered-false",
            with_(REDELIVERED, after=[{**d, "redelivered": False} for d in REDELIVERED["after"]]), "quorum"),
    Example("TestUnackedRedeliveredElsewhere", "m3-lost", with_(REDELIVERED, after=[d for d in REDELIVERED["after"] if d["id"] != "m3"]), "quorum"),
    Example("TestCommitInFlightLeaderDies", "partial", with_(IN_FLIGHT, drained=["control-1", *TX[:4]]), "quorum"),
    Example("TestCommitInFlightLeaderDies", "twice", with_(IN_FLIGHT, drained=["control-1", *TX, "tx-2"]), "quorum"),
    Example("TestCommitInFlightLeaderDies", "answered-but-none", with_(IN_FLIGHT, client_answer="commit-ok", drained=["control-1"]), "quorum"),
    Example("TestCommitInFlightLeaderDies", "control-lost", with_(IN_FLIGHT, drained=TX), "quorum"),
    Example("TestTransactionRolledBackAfterFailover", "commit-not-rolled-back", with_(ROLLED, rolled_back=[]), "quorum"),
    Example("TestTransactionRolledBackAfterFailover", "uncommitted-sends-delivered",
            with_(ROLLED, drained=[*ROLLED["drained"], "b2-m1", "b2-m2"]), "quorum"),
    Example("TestTransactionRolledBackAfterFailover", "b3-lost", with_(ROLLED, drained=[m for m in ROLLED["drained"] if m != "b3-m1"]), "quorum"),
    Example("TestTransactionRolledBackAfterFailover", "never-failed-over", with_(ROLLED, nodes_used=[N3]), "quorum"),
    Example("TestResendAndDedupAcrossNodes", "m21-lost", with_(DEDUP, seen=[m for m in M if m != "m21"]), "quorum"),
    Example("TestResendAndDedupAcrossNodes", "seen-twice", with_(DEDUP, seen=[*M, "m9"]), "quorum"),
    Example("TestResendAndDedupAcrossNodes", "foreign", with_(DEDUP, leftover=["x1"]), "quorum"),
    Example("TestClassicQueueHomeNodeLoss", "unmirrored-lost-after-restart", with_(UNMIRRORED, after_restart=M[:4])),
    Example("TestClassicQueueHomeNodeLoss", "mirrored-refused", with_(MIRRORED, refused=REFUSED, during=[], after_restart=M[:5])),
    Example("TestClassicQueueHomeNodeLoss", "mirrored-m2-lost", with_(MIRRORED, during=[m for m in M[:5] if m != "m2"])),
    Example("TestTransactedClientsReconnect", "failed-sends-visible", with_(RECONNECT, ready_after_failed_commit=5), "classic", QP10, shows="5 ready"),
    Example("TestTransactedClientsReconnect", "uncommitted-sends-kept", with_(RECONNECT, committed=[*RECONNECT["committed"], d10("b2-m1", 7, 1)]),
            "classic", QP10, shows="twice [b2-m1]"),
    Example("TestTransactedClientsReconnect", "tx-acks-applied", with_(RECONNECT, committed=RECONNECT["committed"][2:]), "classic", QP10,
            shows="lost [b1-m1, b1-m2]"),
    Example("TestTransactedClientsReconnect", "back-unmarked", with_(RECONNECT, committed=[d10(m, i) for i, m in enumerate(P6, 1)]), "classic", QP10,
            shows="first-acquirer=true, though another link acquired"),
    Example("TestTransactedClientsReconnect", "back-uncounted", with_(RECONNECT, committed=[{**d10(m, i), "first_acquirer": False} for i, m in enumerate(P6, 1)]),
            "classic", QP10, shows="delivery-count 0, though the profile documents"),
    Example("TestTransactedClientsReconnect", "left-behind", with_(RECONNECT, left=[d10("b1-m1", 1, 2)]), "classic", QP10, shows="left [b1-m1]"),
]


test_compliant_observation_passes, test_violation_fails = verdict_tests(FAILOVER_GOOD, FAILOVER_VIOLATIONS)


def test_expected_names_the_killed_and_the_observing_node() -> None:
    for ex in FAILOVER_VIOLATIONS:
        v = ex.judge()
        text = f"{v.expected} {v.observed}"
        killed = ex.obs.get("victim") or ex.obs.get("home")
        if killed and v.expected.startswith(("every", "the transaction", "a promoted", "the queue is refused", "commit of")):
            assert killed in text and ex.obs["observer"] in text, (ex.id, text)


def test_classic_node_loss_is_judged_by_the_reference_without_the_profile_entry() -> None:
    assert Example("TestClassicQueueHomeNodeLoss", "baseline", UNMIRRORED, profile=BASELINE).judge().outcome is Outcome.PASS
    # a broker that replicates every queue serves it at once: the reference allows that too
    served = with_(UNMIRRORED, refused=SERVED, during=M[:5], after_restart=[])
    assert Example("TestClassicQueueHomeNodeLoss", "served", served).judge().outcome is Outcome.PASS
    lost = with_(UNMIRRORED, refused=SERVED, during=M[:4], after_restart=[])
    assert Example("TestClassicQueueHomeNodeLoss", "lost", lost, profile=BASELINE).judge().outcome is Outcome.FAIL


def test_classic_node_loss_verdict_is_a_vendor_verdict_only() -> None:
    v = Example("TestClassicQueueHomeNodeLoss", "lost", with_(UNMIRRORED, after_restart=[])).judge()
    assert v.outcome is Outcome.FAIL and v.spec == "n/a"
