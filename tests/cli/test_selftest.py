"""The suite's self-test on the local RabbitMQ node: every case that can be proven fails under some
mutation, every mutation in scope is caught by a case of a requirement it is declared to break, and
nothing fails on the clean run but the profile's known bugs (open upstream: known failures, never
false alarms).

Cases that restart the broker are left out here (about a minute per run through a mutation); the
full self-test (``conformance selftest``) includes them.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from conformance.nemesis.mutations import expectations, make
from conformance.runner.selftest.judge import kill_matrix
from conformance.runner.selftest.plan import Run
from conformance.runner.selftest.render import html
from tests.conftest import conformance_cmd


def _selftest(rabbit, tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], dict]:
    out = tmp_path / "selftest"
    # The URL (with the node's password) goes through the environment, never the command line.
    proc = subprocess.run(conformance_cmd("selftest", "--target", "env:SELFTEST_TARGET", "--out", str(out), "--skip-restarts", *args),
                          capture_output=True, text=True, timeout=1200, env={**os.environ, "SELFTEST_TARGET": rabbit.url})
    assert (out / "killmatrix.json").exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc, json.loads((out / "killmatrix.json").read_text())


def _explain(m: dict) -> str:
    return "\n".join(m["problems"] + [f"unproven: {c}" for c in m["unproven"]])


@pytest.mark.timeout(1200)
def test_selftest_amqp091_kills_every_provable_case(rabbit, tmp_path: Path) -> None:
    proc, m = _selftest(rabbit, tmp_path, "--parallel", "4")
    assert m["false_alarms"] == [] and m["clean_errors"] == [], _explain(m)
    assert m["unproven_must"] == [], _explain(m)
    assert m["blind_spots"] == [] and m["misattributed"] == [] and m["missed"] == [], _explain(m)
    assert m["ok"] and proc.returncode == 0, _explain(m)
    assert m["counts"]["kills"] > m["counts"]["provable"]
    assert (tmp_path / "selftest" / "runs" / "clean" / "killmatrix.json").exists()
    assert "Self-test kill matrix" in (tmp_path / "selftest" / "killmatrix.md").read_text()
    assert 'class="k"' in (tmp_path / "selftest" / "killmatrix.html").read_text()


def test_selftest_refuses_a_mutation_of_the_other_protocol(rabbit, tmp_path: Path) -> None:
    proc = subprocess.run(conformance_cmd("selftest", "--target", "env:SELFTEST_TARGET", "--out", str(tmp_path), "-m", "first-acquirer-flipped"),
                          capture_output=True, text=True, timeout=120, env={**os.environ, "SELFTEST_TARGET": rabbit.url})
    assert proc.returncode == 2 and "rewrite amqp-1.0, the target is spoken to over amqp-0-9-1" in proc.stderr


# -- the judging, on synthetic runs ---------------------------------------------------------------

def _rec(case: str, req: str, verdict: str, level: str = "MUST") -> dict:
    return {"case_id": case, "requirement": req, "level": level, "area": "ack", "verdict": verdict, "observed": "o", "expected": "e"}


def _judge(clean: list[dict], runs: dict[str, list[dict]]) -> dict:
    mutations = {spec: make(spec) for spec in runs}
    done = []
    for spec, recs in runs.items():
        r = Run(spec, spec, "exclude", records=recs)
        r.meta = {"mutation": {"rewritten": 3 if recs else 0}}
        done.append(r)
    return kill_matrix([Run("clean", "probe", "exclude", records=clean)], done, mutations, expectations(), {}, 1.0)


def test_kill_matrix_judges_kills_blind_spots_unproven_and_false_alarms() -> None:
    clean = [_rec("a", "ACK-FIRST-NOT-REDELIVERED", "pass"), _rec("b", "ACK-REDELIVER-ON-CONNECTION-LOSS", "pass"),
             _rec("c", "ACK-ACKED-NEVER-REDELIVERED", "pass"), _rec("d", "ACK-UNKNOWN-TAG-406", "fail")]
    m = _judge(clean, {
        "redelivered-set": [_rec("a", "ACK-FIRST-NOT-REDELIVERED", "fail")],                      # caught as declared
        "redelivered-cleared": [_rec("b", "ACK-REDELIVER-ON-CONNECTION-LOSS", "pass")],           # blind spot
        "acks-dropped": [_rec("b", "ACK-REDELIVER-ON-CONNECTION-LOSS", "fail")],                   # caught by the wrong case
    })
    assert [k["case"] for k in m["kills"]] == ["a", "b"]
    assert m["blind_spots"] == ["redelivered-cleared"]
    assert m["misattributed"] == [{"mutation": "acks-dropped", "expected": list(expectations()["acks-dropped"].breaks),
                                   "caught_by": ["ACK-REDELIVER-ON-CONNECTION-LOSS"]}]
    assert m["unproven"] == ["c"] and m["unproven_must"] == ["c"]
    assert m["false_alarms"] == ["d"]
    assert {mu["name"]: mu["missed"] for mu in m["mutations"]}["redelivered-cleared"] == ["ACK-REDELIVER-ON-CONNECTION-LOSS"]
    assert not m["ok"] and len(m["problems"]) >= 4


def test_a_declared_kill_is_not_owed_where_the_requirement_is_a_documented_deviation() -> None:
    """A broker whose cells of a requirement are documented deviations never reaches the state a
    mutation declared to break it changes: not missed (the cell is unproven_deviation), while the
    same mutation missing a passing cell of it still is."""
    clean = [_rec("b", "ACK-REDELIVER-ON-CONNECTION-LOSS", "deviation")]
    m = _judge(clean, {"redelivered-cleared": [_rec("b", "ACK-REDELIVER-ON-CONNECTION-LOSS", "deviation")]})
    assert {mu["name"]: mu["missed"] for mu in m["mutations"]}["redelivered-cleared"] == []
    assert m["unproven_deviation"] == ["b"] and m["blind_spots"] == [] and m["misattributed"] == []
    m = _judge([_rec("b", "ACK-REDELIVER-ON-CONNECTION-LOSS", "pass")], {"redelivered-cleared": [_rec("b", "ACK-REDELIVER-ON-CONNECTION-LOSS", "pass")]})
    assert {mu["name"]: mu["missed"] for mu in m["mutations"]}["redelivered-cleared"] == ["ACK-REDELIVER-ON-CONNECTION-LOSS"]


def test_a_clean_fail_of_a_known_bug_is_a_known_failure_not_a_false_alarm() -> None:
    """A clean-run fail the profile names as a bug open upstream is the broker's: reported as a known
    failure, never a false alarm nor a problem, and not provable; any other clean fail is a false alarm."""
    from conformance.runner.selftest.render import markdown

    bug = "https://github.com/rabbitmq/rabbitmq-server/issues/10070 (open)"
    clean = [_rec("a", "ACK-FIRST-NOT-REDELIVERED", "pass"), {**_rec("k", "ACK-UNKNOWN-TAG-406", "fail"), "known_bug": bug}]
    m = _judge(clean, {"redelivered-set": [_rec("a", "ACK-FIRST-NOT-REDELIVERED", "fail"), {**_rec("k", "ACK-UNKNOWN-TAG-406", "fail"), "known_bug": bug}]})
    assert m["false_alarms"] == [] and m["known_failures"] == [{"case": "k", "requirement": "ACK-UNKNOWN-TAG-406", "known_bug": bug}]
    assert m["counts"]["known_failures"] == 1 and m["counts"]["provable"] == 1 and [k["case"] for k in m["kills"]] == ["a"]
    assert "k" not in m["unproven"] and m["ok"], m["problems"]
    assert "1 known failures" in markdown(m) and f"`k`: {bug}" in markdown(m)
    assert "Known failures" in html(m) and "rabbitmq-server/issues/10070" in html(m)
    other = _judge([*clean, _rec("d", "ACK-DOUBLE-ACK-406", "fail")], {"redelivered-set": [_rec("a", "ACK-FIRST-NOT-REDELIVERED", "fail")]})
    assert other["false_alarms"] == ["d"] and not other["ok"]


def test_a_mutation_reproducing_a_known_bug_is_not_held_to_break_its_requirement() -> None:
    """RabbitMQ 3.10.8 drops a full quorum queue's transaction under tx.commit-ok (rabbitmq-server#8966,
    open): the quorum cell is a known failure and the only cell of the requirement the mutation's run
    reached, so tx-publish-dropped can kill only the requirements it may break there: neither missed
    nor misattributed. The same mutation on a broker without the known failure is held to its word."""
    bug = "https://github.com/rabbitmq/rabbitmq-server/issues/8966 (open)"
    refused = "PUBLISH-TX-REFUSED-NOT-SILENT"
    clean = [{**_rec("r[quorum]", refused, "fail", "SHOULD"), "known_bug": bug}, _rec("t[classic]", "TX-COMMIT-IN-FLIGHT-ATOMIC", "pass")]
    runs = {"tx-publish-dropped": [{**_rec("r[quorum]", refused, "fail", "SHOULD"), "known_bug": bug},
                                   _rec("t[classic]", "TX-COMMIT-IN-FLIGHT-ATOMIC", "fail")]}
    m = _judge(clean, runs)
    mu = next(x for x in m["mutations"] if x["name"] == "tx-publish-dropped")
    assert (mu["missed"], mu["known_failure"], m["misattributed"]) == ([], [refused], [])
    assert m["ok"], m["problems"]
    healthy = _judge([{**c, "verdict": "pass"} if c.get("known_bug") else c for c in clean],
                     {"tx-publish-dropped": [_rec("r[quorum]", refused, "pass", "SHOULD"), _rec("t[classic]", "TX-COMMIT-IN-FLIGHT-ATOMIC", "fail")]})
    assert not healthy["ok"] and healthy["misattributed"] and healthy["missed"], healthy["problems"]


def test_a_known_bug_exempts_only_its_own_cell() -> None:
    """A known bug on the quorum cell (e.g. PREFETCH-ZERO-UNLIMITED [quorum]) is the broker's on that
    cell only: a mutation declared to break the requirement that leaves its classic cell passing has
    missed it, and a mutation no case caught is a blind spot, whatever the quorum cell does."""
    bug = "https://github.com/rabbitmq/rabbitmq-server/issues/8966 (open)"
    refused = "PUBLISH-TX-REFUSED-NOT-SILENT"
    clean = [_rec("r[classic]", refused, "pass", "SHOULD"), {**_rec("r[quorum]", refused, "fail", "SHOULD"), "known_bug": bug},
             _rec("t[classic]", "TX-COMMIT-IN-FLIGHT-ATOMIC", "pass")]
    runs = {"tx-publish-dropped": [_rec("r[classic]", refused, "pass", "SHOULD"), {**_rec("r[quorum]", refused, "fail", "SHOULD"), "known_bug": bug},
                                   _rec("t[classic]", "TX-COMMIT-IN-FLIGHT-ATOMIC", "fail")]}
    m = _judge(clean, runs)
    mu = next(x for x in m["mutations"] if x["name"] == "tx-publish-dropped")
    assert (mu["missed"], mu["known_failure"]) == ([refused], [])
    assert m["missed"] == [{"mutation": "tx-publish-dropped", "requirements": [refused]}] and m["misattributed"] and not m["ok"]
    blind = _judge(clean, {"tx-publish-dropped": [_rec("r[classic]", refused, "pass", "SHOULD"), _rec("t[classic]", "TX-COMMIT-IN-FLIGHT-ATOMIC", "pass")]})
    assert blind["blind_spots"] == ["tx-publish-dropped"], blind["problems"]


def test_kill_matrix_is_ok_when_everything_is_proven() -> None:
    clean = [_rec("a", "ACK-FIRST-NOT-REDELIVERED", "pass"), _rec("x", "ACK-REQUEUE-POSITION", "unsupported", "SHOULD")]
    m = _judge(clean, {"redelivered-set": [_rec("a", "ACK-FIRST-NOT-REDELIVERED", "fail")]})
    assert m["ok"], m["problems"]
    assert m["counts"] | {} == m["counts"] and m["counts"]["provable"] == 1 and m["counts"]["kills"] == 1
    assert m["cases"][0]["killed_by"] == ["redelivered-set"]
    page = html(m)
    assert "redelivered-set" in page and 'class="k"' in page and "<script" not in page


def test_selftest_refuses_an_unreachable_target_in_one_line(tmp_path: Path) -> None:
    proc = subprocess.run(conformance_cmd("selftest", "--target", "amqp://user:s3cret@127.0.0.1:1/", "--out", str(tmp_path)),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "unreachable" in proc.stderr
    assert "s3cret" not in proc.stderr + proc.stdout


def test_second_round_runs_only_what_the_declared_mutations_left_unproven() -> None:
    from conformance.runner.selftest.plan import second_round

    clean = [_rec("A[classic]", "A", "pass"), _rec("A[quorum]", "A", "pass"), _rec("B[classic]", "B", "pass"),
             _rec("C[classic]", "C", "unsupported")]
    first = Run("m1", "m1", "exclude", ["A"], records=[_rec("A[classic]", "A", "fail"), _rec("A[quorum]", "A", "pass")])
    runs = second_round(clean, [first], {"m1": ["B"], "m2": ["A", "B", "C"], "m3": []})
    # A[quorum] and B are unproven; C was never provable; m1 only reaches B beyond what it is meant to break
    assert [(r.label, r.mutation, r.requirements) for r in runs] == [("m1+rest", "m1", ["B"]), ("m2+rest", "m2", ["A", "B"])]
    proven = Run("m2", "m2", "exclude", ["A", "B"], records=[_rec("A[quorum]", "A", "fail"), _rec("B[classic]", "B", "fail")])
    assert second_round(clean, [first, proven], {"m2": ["A", "B"]}) == []


def test_a_pass_after_a_restart_on_a_target_without_a_store_is_not_owed_a_kill() -> None:
    """A queue a target without a store lost is gone whatever the wire carried: no mutation can fail
    the case there, so it is listed apart, never an unproven MUST; a pass on a target with a store is owed one."""
    note = "qpidd-process has no store (no store module): its durable state does not survive a restart or kill"
    clean = [{**_rec("p::a", "PERSIST-NON-DURABLE-QUEUE-GONE", "pass"), "reason": note},
             _rec("p::b", "PERSIST-ACKED-STAYS-GONE", "pass")]
    m = _judge(clean, {"requeue-cleared": [_rec("p::a", "PERSIST-NON-DURABLE-QUEUE-GONE", "pass"),
                                           _rec("p::b", "PERSIST-ACKED-STAYS-GONE", "pass")]})
    assert m["unproven_no_store"] == ["p::a"]
    assert m["unproven_must"] == ["p::b"]
