"""tests.support.kill_loss accepts RabbitMQ's loss of a queue at kill -9 and nothing else."""

from __future__ import annotations

from tests.support.kill_loss import lost_to_kill, unexplained

GONE = ("the queue could not be consumed after the kill -9 (OperationTimeout: ...; the broker's last answer: "
        "404 NOT_FOUND - no queue 'conformance.x' in vhost '/')")


def rec(**kw: object) -> dict:
    base = {"case_id": "persist/test_restart.py::TestConfirmedSurvives::test[classic-kill]", "requirement": "PERSIST-CONFIRMED-SURVIVES",
            "variant": "kill", "queue_type": "classic", "verdict": "fail", "observed": GONE}
    return {**base, **kw}


def test_the_queue_lost_at_kill_is_accepted_and_named() -> None:
    assert lost_to_kill(rec()) and lost_to_kill(rec(requirement="TX-COMMIT-DURABLE", variant=None))
    assert unexplained([rec(), rec(verdict="pass", observed="as expected")]) == []


def test_anything_else_is_not() -> None:
    others = [rec(variant="restart"), rec(queue_type="quorum"), rec(verdict="error"), rec(requirement="PERSIST-TRANSIENT-FATE", variant=None),
              rec(observed="confirmed persistent messages after kill -9 and start: missing [persistent-2]")]
    assert not any(map(lost_to_kill, others))
    assert len(unexplained(others)) == len(others)
