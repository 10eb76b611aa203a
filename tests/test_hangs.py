"""A broker that stops answering during a case: that case's finding, a restart, verdicts for the rest.

And the suite's own part ruled out: the cases that fault the broker never hold the ordinary ones at
the broker lock (they are scheduled after them, on one worker), and a wait for that lock is never
counted as a case's own time.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from conformance import hangs, shared_fault
from conformance.cases import all_cases
from conformance.cli import build_parser, pytest_args
from conformance.errors import NoReply
from conformance.history import History
from conformance.results import read_results, read_run
from conformance.verdict import Outcome
from tests.conftest import ROOT

#: Verdicts that judge the broker (or say why a case could not): anything but the suite's error.
REAL = {"pass", "fail", "deviation", "unsupported", "undocumented"}


# -- the suite's own part: scheduling of the disruptive cases ---------------------------------------

def _items() -> list[Any]:
    """Stand-ins for the collected catalogue: each case class with its parameters, in catalogue order."""
    items = []
    for cls in all_cases():
        for qt in cls.queue_types or ("classic", "quorum"):
            for variant in cls.variants or [None]:
                items.append(SimpleNamespace(cls=cls, callspec=SimpleNamespace(params={"queue_type": qt, "variant": variant}),
                                             nodeid=f"{cls.__name__}[{qt}-{variant}]", add_marker=lambda mark: None))
    return items


def test_every_disruptive_case_comes_after_every_ordinary_one() -> None:
    """A disruptive case that does its own fault (no shared phases) was sorted among the ordinary
    ones, so xdist's broker-fault group began there and held the other workers at the lock."""
    items = _items()
    shared_fault.order(items)
    disrupts = [bool(it.cls.disrupts_broker) for it in items]
    assert True in disrupts and False in disrupts
    first = disrupts.index(True)
    assert all(disrupts[first:]), [it.nodeid for it in items[first:] if not it.cls.disrupts_broker]
    kinds = [shared_fault.fault_of(it) for it in items[first:]]  # own faults, then the shared restart, then the kill
    assert kinds == sorted(kinds, key=lambda k: {None: 0, "restart": 1, "kill": 2}[k])


def test_xdist_hands_out_the_broker_fault_group_last() -> None:
    """xdist's loadgroup sorts its units largest first unless told not to: the broker-fault group
    (the largest) then went to a worker first, and every ordinary case of the others waited at the
    broker lock while it restarted and killed the node (5.8 s per ack or dlx case, 0.03 s alone)."""
    args = build_parser().parse_args(["run", "--target", "rabbitmq-local", "--out", "/tmp/x", "--workers", "3"])
    argv = pytest_args(args, Path("/tmp/x"))
    assert "--dist" in argv and argv[argv.index("--dist") + 1] == "loadgroup"
    assert "--no-loadscope-reorder" in argv


# -- the finding -----------------------------------------------------------------------------------

def test_the_finding_names_the_operation_and_what_the_case_did() -> None:
    h = History()
    h.add("suite", "lock", "broker shared after 60ms")
    h.add("admin", "declare_queue", "q1 (classic)")
    h.add("producer", "publish", "q1, m1")
    h.add("consumer", "consume", "q1")
    h.add("consumer", "get", "q1", error="NoReply: basic.get: no basic.get-ok within 10s")
    v = hangs.finding(hangs.operation(h, RuntimeError("x")), hangs.what_it_did(h), "target stopped answering basic.get since c1", ("c2",))
    assert v.outcome is Outcome.FAIL and v.spec == "fail" and v.key == "broker-stopped-answering"
    assert v.observed.startswith("broker stopped answering consumer get after admin declare_queue(q1 (classic)); "
                                 "producer publish(q1, m1); consumer consume(q1) (target stopped answering basic.get since c1)")
    assert v.observed.endswith("also under way then, in other workers: c2")
    hangs.ran("ack/x.py::TestA::test[classic]")
    assert hangs.operation(h, NoReply("basic.get", "basic.get-ok", 10.0)) == "basic.get"  # in protocol terms when the adapter says
    silent = hangs.finding("admin connect", hangs.what_it_did(History()), "refused")
    assert "after nothing: it did not answer the case's first operation, after ack/x.py::TestA::test[classic] ran" in silent.observed


# -- the run: a launched broker frozen during one case ----------------------------------------------

FROZEN = "ack/test_basic_ack.py::TestAckMultipleUpToTag::test[classic]"


def _frozen_run(tmp_path: Path, workers: int) -> tuple[list[dict[str, Any]], dict[str, Any], subprocess.CompletedProcess[str]]:
    out = tmp_path / f"run{workers}"
    args = build_parser().parse_args(["run", "--target", "rabbitmq-local", "--out", str(out), "--area", "ack",
                                      "--workers", str(workers), "--keep-history"])
    argv = pytest_args(args, out) + ["-p", "tests.support.freezer"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FREEZE_CASE": FROZEN, "FREEZE_AFTER_OP": "publish",
           "FREEZE_ONCE": str(tmp_path / f"frozen{workers}")}
    proc = subprocess.run([sys.executable, "-m", "pytest", *argv], cwd=ROOT, env=env, capture_output=True, text=True, timeout=400)
    return list(read_results(out)), read_run(out), proc


@pytest.mark.timeout(450)
@pytest.mark.parametrize("workers", [1, 3])
def test_a_frozen_broker_fails_its_case_is_restarted_and_the_run_goes_on(tmp_path: Path, workers: int) -> None:
    recs, run, proc = _frozen_run(tmp_path, workers)
    tail = proc.stdout[-3000:] + proc.stderr[-2000:]
    assert (tmp_path / f"frozen{workers}").exists(), tail  # the freeze happened
    assert run["status"] == "finished", run
    assert len(recs) == 38, tail  # every ack case recorded, once
    hung = [r for r in recs if "broker stopped answering" in r["observed"]]
    assert len(hung) == 1, tail
    (culprit,) = hung
    assert culprit["verdict"] == "fail" and culprit["spec_verdict"] == "fail", culprit
    if culprit["case_id"] == FROZEN:  # what it did: up to the publish the broker froze after
        assert "publish(" in culprit["observed"].split(" (")[0], culprit["observed"]
    assert len(run["restarts"]) == 1, run["restarts"]
    assert run["restarts"][0]["after_case"] == culprit["case_id"] and run["restarts"][0]["cause"] in culprit["observed"]
    assert "nemesis" not in culprit["observed"].split(" (")[0]  # what the case did, not the restart that followed
    assert "target_dead" not in run
    # a silent broker cannot say which of the cases under way stopped it: the frozen one found it,
    # or it was under way beside the one that did and ran again after the restart
    assert culprit["case_id"] == FROZEN or FROZEN in run["restarts"][0]["also_running"], (culprit["case_id"], run["restarts"])
    others = [r for r in recs if r is not culprit]
    assert {r["verdict"] for r in others} <= REAL, [(r["case_id"], r["verdict"], r["observed"]) for r in others if r["verdict"] not in REAL]
    if workers == 1:
        assert culprit["case_id"] == FROZEN and not run["restarts"][0]["also_running"]
        assert not [r for r in recs if r.get("rerun")]
        after = [r for r in recs if r["finished_at"] > culprit["finished_at"]]
        assert after and {r["verdict"] for r in after} <= REAL
    for r in recs:
        if r.get("rerun"):
            assert r["case_id"] in run["restarts"][0]["also_running"] and "after " in r["rerun"], r
