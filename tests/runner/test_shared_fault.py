"""One broker restart (and one kill -9) serves every disruptive case of a run.

Against a real private node: the run restarts it once and kills it once, each case still observes
its own queues and writes a record of its own, with the verdicts the per-case path gives; a case
selected alone still does its own fault.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from adapters.rabbitmq.launcher import RabbitMQLocalNode
from conformance.cases import all_cases
from conformance.cli import EXIT_FAIL, EXIT_OK
from conformance.runner.results import read_results
from tests.conftest import ROOT, conformance_cmd
from tests.support.kill_loss import acked_back_after_kill, lost_to_kill
from tests.support.known_bugs import known_bug_fail


def run(node: RabbitMQLocalNode, out: Path, *args: str, plugin_args: tuple[str, ...] = ()) -> list[dict]:
    from conformance.cli import build_parser, pytest_args

    ns = build_parser().parse_args(["run", "--target", "rabbitmq-local", "--out", str(out), "--keep-history", *args])
    argv = pytest_args(ns, out) + ["--attach-target", json.dumps(node.handle()), *plugin_args]
    proc = subprocess.run([*conformance_cmd()[:1], "-m", "pytest", *argv], cwd=ROOT, capture_output=True, text=True, timeout=400)
    recs = list(read_results(out))
    # pytest exits 1 only for RabbitMQ 3.10.8's own loss of a queue at kill -9 (tests.support.kill_loss)
    # or a fail the profile names as a known bug (rabbitmq-server#10070, intermittent): still a fail
    failed = any(map(lost_to_kill, recs)) or any(map(known_bug_fail, recs))
    assert proc.returncode == (EXIT_FAIL if failed else EXIT_OK), proc.stdout[-3000:] + proc.stderr[-2000:]
    return recs


def faults(rec: dict) -> list[str]:
    return [f"{e['op']} {e['detail']}" for e in rec["history"] or [] if e["actor"] == "nemesis"]


def test_one_restart_and_one_kill_serve_every_disruptive_case(tmp_path: Path) -> None:
    node = RabbitMQLocalNode()
    node.start()
    try:
        recs = run(node, tmp_path / "all", plugin_args=("--disruptive", "only"))
        single = run(node, tmp_path / "one", "--requirement", "PERSIST-TRANSIENT-FATE", "--queue-type", "classic")
    finally:
        node.stop()
    disruptive = {c.requirement for c in all_cases() if c.disrupts_broker}
    assert {r["requirement"] for r in recs} == disruptive
    served = [r for r in recs if r["verdict"] != "unsupported"]
    # a case of two faults (a restart, then a kill -9) rides both shared faults
    both = [r for r in served if r["requirement"] == "PERSIST-SURVIVES-RESTART-THEN-KILL"]
    kills = [r for r in served if r not in both and (r["requirement"] in ("TX-COMMIT-DURABLE", "PERSIST-DECLARED-QUEUE-SURVIVES-KILL") or r["variant"] == "kill")]
    restarts = [r for r in served if r not in kills and r not in both]
    assert len(kills) >= 2 and len(restarts) >= 2 and both
    # every served case saw the same single fault of its kind, and says how many cases it served
    for group, kind in ((kills, "kill -9"), (restarts, "restart")):
        seen = {tuple(faults(r)) for r in group}
        assert len(seen) == 1, seen
        (events,) = seen
        assert any(e.startswith(kind) for e in events)
        assert all(f"shared by {len(group) + len(both)} cases" in e for e in events), events
    for r in both:
        assert faults(r) == [*faults(restarts[0]), *faults(kills[0])], faults(r)
    # each record stands alone: its own queue (declared, drained) in its own history, its own verdict
    queues = [{m for e in r["history"] for m in re.findall(r"conformance\.[\w.+-]+", e["detail"] or "") if "tether" not in m} for r in served]
    for a in range(len(queues)):
        for b in range(a + 1, len(queues)):
            assert not (queues[a] & queues[b]), (served[a]["case_id"], served[b]["case_id"], queues[a] & queues[b])
    for r in served:
        if r in kills and r["queue_type"] == "quorum" and r["verdict"] != "pass":  # known bug: leader not known after kill -9
            assert known_bug_fail(r, "10070"), (r["case_id"], r["observed"])
        else:
            assert r["verdict"] == "pass" or lost_to_kill(r) or acked_back_after_kill(r), (r["case_id"], r["observed"])
    # alone, a case does its own fault, as before
    (one,) = single
    assert one["verdict"] == "pass" and len(faults(one)) == 1 and "shared" not in faults(one)[0]
