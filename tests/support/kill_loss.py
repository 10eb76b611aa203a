"""RabbitMQ 3.10.8's own loss on kill -9, which tests against a real node must accept and name.

Measured on this machine (2026-11-25, a private node; declare a durable classic queue, publish
three persistent messages with confirms, kill -9 at once, start): in 3 of 60 and 1 of 8 rounds the
queue was gone after the start, and ``rabbitmqctl list_queues`` did not list it (its record never
reached the node's disk: RabbitMQ had confirmed messages in a queue it then forgot). With 2.5 s
between the confirms and the kill: 0 of 30. The suite's verdict, a fail naming the 404, is right; a test that demanded a pass
would fail about one run in ten. What it may never be is anything else: another verdict, another
requirement, a restart (which never loses it), or a quorum queue. It is recognised by the
suite's own words for an unconsumable queue and the protocol's 404, not by the broker's reply text.
"""

from __future__ import annotations

from typing import Any

from tests.support.known_bugs import known_bug_fail

#: Cases whose queue is declared just before a shared kill -9.
KILL_CASES = {("PERSIST-CONFIRMED-SURVIVES", "kill"), ("TX-COMMIT-DURABLE", None), ("PERSIST-REQUEUED-REDELIVERED", "kill"),
              ("PERSIST-PURGED-STAYS-GONE", "kill"), ("PERSIST-DECLARED-QUEUE-SURVIVES-KILL", None),
              ("PERSIST-DELETED-QUEUE-STAYS-GONE", "kill"), ("PERSIST-PRIORITY-ORDER-SURVIVES", "kill")}


def lost_to_kill(record: dict[str, Any]) -> bool:
    """The record is RabbitMQ 3.10.8 forgetting a durable classic queue at kill -9, said as such."""
    return (record["verdict"] == "fail" and (record.get("queue_type") or "").partition("+")[0] == "classic"
            and (record["requirement"], record.get("variant")) in KILL_CASES
            and "could not be consumed" in (record.get("observed") or "") and "404" in (record.get("observed") or ""))


def acked_back_after_kill(record: dict[str, Any]) -> bool:
    """The record is RabbitMQ's documented redelivery after a node failure ("messages can be
    redelivered", Reliability Guide): acknowledged messages back after kill -9, as the profile's
    deviation says, and only after a kill."""
    return (record["verdict"] == "deviation" and record["requirement"] == "PERSIST-ACKED-STAYS-GONE"
            and record.get("variant") == "kill")


def unexplained(records: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """Records that neither pass nor are that loss (nor the documented redelivery of acknowledged
    messages after a kill, nor a fail the profile names as a known bug open upstream) nor a clean
    refusal of the queue the case declares (classic queues refuse x-delivery-limit with 406):
    (case, verdict, observed) for the assertion."""
    return [(r["case_id"], r["verdict"], r.get("observed")) for r in records
            if r["verdict"] != "pass" and not lost_to_kill(r) and not acked_back_after_kill(r) and not known_bug_fail(r)
            and r.get("unsupported_kind") != "refused"]
