"""A broker that stops answering during a case: that case's finding, a restart, verdicts for the rest.

And the suite's own part ruled out: the cases that fault the broker never hold the ordinary ones at
the broker lock (they are scheduled after them, on one worker), and a wait for that lock is never
counted as a case's own time.
"""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from conformance.cases import all_cases
from conformance.catalogue.configurations import cell_types
from conformance.catalogue.requirements import requirement
from conformance.cli import build_parser, pytest_args
from conformance.errors import ConnectionLost, NoReply
from conformance.kit.history import History
from conformance.kit.verdicts import Outcome, Verdict
from conformance.runner import hangs, records, shared_faults
from conformance.runner.case_runner import CaseCall, Ended
from conformance.runner.deadline import Deadline
from conformance.runner.results import read_results, read_run
from conformance.runner.shared_faults import PlannedCase
from conformance.targets import ExternalTarget, Target
from tests.conftest import ROOT
from tests.reports.test_reports import rec, run_dir, spark  # noqa: F401 - spark: the module's shared session fixture

#: Verdicts that judge the broker (or say why a case could not): anything but the suite's error.
REAL = {"pass", "fail", "deviation", "unsupported", "undocumented"}


# -- the suite's own part: scheduling of the disruptive cases ---------------------------------------

def _items() -> list[PlannedCase]:
    """The collected catalogue as the runner sees it: each case class with its parameters, in catalogue order."""
    items = []
    for cls in all_cases():
        for qt in cell_types(cls.queue_types or ("classic", "quorum"), cls.configurations):
            for variant in cls.variants or [None]:
                items.append(PlannedCase(f"{cls.__name__}[{qt}-{variant}]", cls, qt, variant))
    return items


def test_every_disruptive_case_comes_after_every_ordinary_one() -> None:
    """A disruptive case that does its own fault (no shared phases) was sorted among the ordinary
    ones, so xdist's broker-fault group began there and held the other workers at the lock."""
    items = shared_faults.order(_items())
    disrupts = [bool(it.cls.disrupts_broker) for it in items]
    assert True in disrupts and False in disrupts
    first = disrupts.index(True)
    assert all(disrupts[first:]), [it.nodeid for it in items[first:] if not it.cls.disrupts_broker]
    kinds = [shared_faults.fault_of(it) for it in items[first:]]  # own faults, then the shared restart, then the kill
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


# -- the run's shared record: who restarts, how often, and when the judging ends ---------------------

@dataclass
class Counting(Target):
    """Synthetic: counts the kills and starts the record asks of a restartable target."""

    kills: int = 0
    starts: int = 0

    @property
    def can_restart(self) -> bool:
        return True

    def kill(self) -> None:
        self.kills += 1

    def start(self) -> None:
        self.starts += 1


def _hang(path: str, target: Target | None, case_id: str, generation: int, restartable: bool = True) -> hangs.Hang:
    return hangs.after_hang(path, target=target, case_id=case_id, cause=f"target stopped answering basic.get since {case_id}",
                            started_generation=generation, restartable=restartable, history=History())


def test_the_first_case_to_find_the_hang_restarts_and_the_others_run_again(tmp_path: Path) -> None:
    path, target = str(tmp_path / "health"), Counting(name="node")
    for case in ("a", "b", "c"):
        assert hangs.begin(path, case).generation == 0
    hung = _hang(path, target, "a", 0)
    assert hung == hangs.Hang(True, None, ("b", "c")) and (target.kills, target.starts) == (1, 1)
    with pytest.raises(hangs.Rerun, match="after a hung it"):
        _hang(path, target, "b", 0)  # found the same silence: another case's restart already answered it
    assert hangs.moved(path, 0) == "the broker was restarted while this case ran, after a hung it" and hangs.moved(path, 1) is None
    hangs.end(path, "a")
    assert hangs.read(path).running == ("b", "c")
    first = hangs.read(path).restarts[0]
    assert hangs.run_record(path)["restarts"] == [{"after_case": "a", "cause": "target stopped answering basic.get since a",
                                                   "seconds": first["seconds"], "also_running": ["b", "c"], "done_at": first["done_at"]}]
    assert "target_dead" not in hangs.run_record(path) and (target.kills, target.starts) == (1, 1)


def test_after_the_cap_the_judging_ends_naming_the_case(tmp_path: Path) -> None:
    path, target = str(tmp_path / "health"), Counting(name="node")
    for n in range(hangs.MAX_RESTARTS):
        assert _hang(path, target, f"c{n}", n).dead is None
    last = _hang(path, target, "c9", hangs.MAX_RESTARTS)
    assert last.culprit and last.dead is not None and f"after {hangs.MAX_RESTARTS} restarts" in last.dead and "since c9" in last.dead
    assert target.kills == hangs.MAX_RESTARTS
    assert _hang(path, target, "c10", hangs.MAX_RESTARTS) == hangs.Hang(False, last.dead)  # not its finding: already told
    assert hangs.run_record(path)["target_dead"] == last.dead


@pytest.mark.parametrize("target, restartable, why", [
    (None, True, "the suite cannot restart this target"),
    (ExternalTarget(name="amqp://127.0.0.1:1/"), True, "the suite cannot restart this target"),
    (Counting(name="node"), False, "a run through a mutation"),
])
def test_a_target_the_run_cannot_restart_ends_the_judging(tmp_path: Path, target: Target | None, restartable: bool, why: str) -> None:
    path = str(tmp_path / "health")
    hung = _hang(path, target, "ack/x.py::T::test[classic]", 0, restartable)
    assert hung.culprit and hung.dead is not None and why in hung.dead and "since ack/x.py::T::test[classic]" in hung.dead
    assert hangs.read(path).dead == hung.dead and hangs.read(path).restarts == ()
    assert not isinstance(target, Counting) or target.kills == 0


# -- the run: a launched broker frozen during one case ----------------------------------------------

FROZEN = "ack/test_basic_ack.py::TestAckMultipleUpToTag::test[classic]"


def _ack_cases() -> list[Any]:
    """The cases ``--area ack`` runs (every one, disruptive or not: ``--disruptive include`` is the default)."""
    return [it for it in _items() if requirement(it.cls.requirement).area == "ack"]


def _frozen_run(tmp_path: Path, workers: int) -> tuple[list[dict[str, Any]], dict[str, Any], subprocess.CompletedProcess[str]]:
    out = tmp_path / f"run{workers}"
    args = build_parser().parse_args(["run", "--target", "rabbitmq-local", "--out", str(out), "--area", "ack",
                                      "--workers", str(workers), "--keep-history"])
    argv = pytest_args(args, out) + ["-p", "tests.support.freezer"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FREEZE_CASE": FROZEN, "FREEZE_AFTER_OP": "publish",
           "FREEZE_ONCE": str(tmp_path / f"frozen{workers}")}
    if workers > 1:  # the case hangs the broker each time it runs, so its rerun alone can show it
        env["FREEZE_EVERY"] = "1"
    proc = subprocess.run([sys.executable, "-m", "pytest", *argv], cwd=ROOT, env=env, capture_output=True, text=True, timeout=400)
    return list(read_results(out)), read_run(out), proc


@pytest.mark.timeout(450)
@pytest.mark.parametrize("workers", [1, 3])
def test_a_frozen_broker_fails_its_case_is_restarted_and_the_run_goes_on(tmp_path: Path, workers: int) -> None:
    recs, run, proc = _frozen_run(tmp_path, workers)
    tail = proc.stdout[-3000:] + proc.stderr[-2000:]
    assert (tmp_path / f"frozen{workers}").exists(), tail  # the freeze happened
    assert run["status"] == "finished", run
    assert len(recs) == len(_ack_cases()), tail  # every ack case recorded, once
    hung = [r for r in recs if "broker stopped answering" in r["observed"]]
    assert len(hung) == 1, tail
    (culprit,) = hung
    # the case that hangs the broker is the one that fails: found alone, or (several cases under
    # way at the first silence) when it hung it again on its rerun, alone
    assert culprit["case_id"] == FROZEN, (culprit["case_id"], run["restarts"])
    assert culprit["verdict"] == "fail" and culprit["spec_verdict"] == "fail", culprit
    last = run["restarts"][-1]
    assert last["after_case"] == FROZEN and last["cause"] in culprit["observed"] and not last["also_running"], run["restarts"]
    did = culprit["observed"].split(f" ({last['cause']})")[0]
    assert did.startswith("broker stopped answering ") and "nemesis" not in did  # what the case did, not the restart after it
    assert did.endswith("persistent=False)") and "admin publish(" in did, did  # up to the publish the broker froze after
    assert "target_dead" not in run
    others = [r for r in recs if r is not culprit]
    assert {r["verdict"] for r in others} <= REAL, [(r["case_id"], r["verdict"], r["observed"]) for r in others if r["verdict"] not in REAL]
    if workers == 1:
        assert len(run["restarts"]) == 1 and not [r for r in recs if r.get("rerun")]
        after = [r for r in recs if r["finished_at"] > culprit["finished_at"]]
        assert after and {r["verdict"] for r in after} <= REAL
    else:
        assert 1 <= len(run["restarts"]) <= 2, run["restarts"]
        if len(run["restarts"]) == 2:  # the first silence was found among several cases: every suspect ran again alone
            first = run["restarts"][0]
            suspects = {first["after_case"], *first["also_running"]}
            assert FROZEN in suspects and culprit.get("rerun"), (first, culprit)
        # a rerun says which restart cut its first attempt short (a case that got the broker between
        # the hang and the restart ran against it, so it too runs again)
        for r in recs:
            if r.get("rerun"):
                assert "each runs again alone" in r["rerun"] or any(f"after {x['after_case']} hung it" in r["rerun"] for x in run["restarts"]), r
    assert all("lock_wait_s" in r for r in recs)


# -- the report -------------------------------------------------------------------------------------

def test_the_report_says_which_case_hung_the_target_and_how_often_it_was_restarted(spark: Any, tmp_path: Path,
                                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    from conformance.cli import main

    restarted = run_dir(tmp_path, "restarted", [rec("ACK-A", "fail"), rec("ACK-B", "pass", case="b")],
                        restarts=[{"after_case": "ack/a.py::TestA::test[classic]", "cause": "node does not answer on port 1",
                                   "seconds": 4.2, "also_running": []}])
    ended = run_dir(tmp_path, "ended", [rec("ACK-A", "fail", run="r2", version="3.11.0")], restarts=[],
                    target_dead="target stopped answering basic.get since ack/a.py::TestA::test[classic]")
    out = tmp_path / "report"
    assert main(["report", restarted, ended, "--out", str(out)]) == 0
    console = capsys.readouterr().out
    said = f"current run {restarted} restarted its target 1 time(s): after ack/a.py::TestA::test[classic] hung it (node does not answer on port 1)"
    stopped = f"current run {ended} stopped judging its target: target stopped answering basic.get since ack/a.py::TestA::test[classic]"
    md = (out / "summary.md").read_text()
    assert f"> :warning: **TARGET STOPPED ANSWERING**: {said}" in md and f"> :warning: **TARGET STOPPED ANSWERING**: {stopped}" in md
    page = (out / "report.html").read_text()
    assert f'class="banner unfinished">TARGET STOPPED ANSWERING: {said}.' in page
    assert f"TARGET STOPPED ANSWERING: {said}" in console and f"TARGET STOPPED ANSWERING: {stopped}" in console


def test_the_run_summary_names_each_restart(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from conformance.cli import summarize

    summarize({"restarts": [{"after_case": "ack/a.py::TestA::test[classic]", "cause": "node does not answer on port 1"}]},
              [rec("ACK-A", "fail")], tmp_path)
    assert "restarted the target after ack/a.py::TestA::test[classic] hung it: node does not answer on port 1" in capsys.readouterr().out


# -- the restart itself: the broker lock, the deadline, an interruption --------------------------------

@dataclass
class Checking(Counting):
    """Synthetic: at its kill, whether another worker could still take the broker lock (shared)."""

    lock_path: str = ""
    shared_possible: bool | None = None
    start_for_s: float = 0.0
    start_raises: BaseException | None = None

    def kill(self) -> None:
        super().kill()
        with open(self.lock_path, "a+") as fh:
            try:
                fcntl.flock(fh, fcntl.LOCK_SH | fcntl.LOCK_NB)
                self.shared_possible = True
                fcntl.flock(fh, fcntl.LOCK_UN)
            except BlockingIOError:
                self.shared_possible = False

    def start(self) -> None:
        super().start()
        end = time.monotonic() + self.start_for_s  # a restart takes a while: long past a short deadline
        while time.monotonic() < end:
            pass
        if self.start_raises is not None:
            raise self.start_raises


def test_the_restart_holds_the_broker_lock_alone(tmp_path: Path) -> None:
    """A disruptive case of another worker could kill or restart the node under the restart."""
    path, lock = str(tmp_path / "health"), str(tmp_path / "lock")
    target = Checking(name="node", lock_path=lock)
    hung = hangs.after_hang(path, target=target, case_id="a", cause="silent", started_generation=0, restartable=True,
                            history=History(), lock_path=lock)
    assert hung.dead is None and target.shared_possible is False


def test_the_restart_runs_with_the_case_deadline_disarmed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The case's alarm (still armed after a connection error) fired inside the restart: the record
    was never written, and the next case restarted and blamed all over again."""
    monkeypatch.setattr(sys, "unraisablehook", lambda unraisable: None)
    path, lock = str(tmp_path / "health"), str(tmp_path / "lock")
    deadline = Deadline(0.05, pytest.fail)
    assert deadline.arm()
    target = Checking(name="node", lock_path=lock, start_for_s=0.3)
    try:
        hung = hangs.after_hang(path, target=target, case_id="a", cause="silent", started_generation=0, restartable=True,
                                history=History(), lock_path=lock)
    finally:
        deadline.cancel()
    assert hung.dead is None and hangs.read(path).generation == 1 and len(hangs.read(path).restarts) == 1


def test_an_interrupted_restart_is_recorded_all_the_same(tmp_path: Path) -> None:
    path = str(tmp_path / "health")
    target = Checking(name="node", lock_path=str(tmp_path / "lock"), start_raises=KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt):
        _hang(path, target, "a", 0)
    health = hangs.read(path)
    assert health.generation == 1 and [r["after_case"] for r in health.restarts] == ["a"]
    assert health.dead is not None and "restart interrupted: KeyboardInterrupt" in health.dead and "since a" in health.dead


# -- the runner around a restart: a second attempt at most, under its own deadline ------------------

def _runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scenarios: list[Any], verdict: Any = None) -> tuple[Any, ...]:
    """run_case with every broker contact replaced: each attempt runs the next of ``scenarios``."""
    from conformance.runner import case_runner

    for name in ("labels", "verdict_label", "attach"):
        monkeypatch.setattr(case_runner.allure, name, lambda *a, **k: None)
    monkeypatch.setattr(case_runner, "_not_applicable", lambda *a: None)
    monkeypatch.setattr(case_runner, "apply_profile", lambda v, *a: v)
    monkeypatch.setattr(case_runner, "observed_refusal", lambda *a: None)
    monkeypatch.setattr(case_runner.liveness, "after_scenario_exception", lambda *a, **k: case_runner.liveness.Judgement(None, None))
    runs = iter(scenarios)
    monkeypatch.setattr(case_runner.shared_faults, "scenario", lambda me, case, ctx, following, other: next(runs)(ctx))
    cls = all_cases()[0]
    case = SimpleNamespace(requirement=cls.requirement, disrupts_broker=False, fault_kinds=lambda variant: (),
                           verdict=verdict or (lambda obs, profile, qt: Verdict(Outcome.FAIL, "x", f"observed {obs}")))
    state = SimpleNamespace(adapter=SimpleNamespace(protocol="amqp-0-9-1", name="fake"), server={"product": "p", "version": "1"},
                            profile=SimpleNamespace(id="p", unsupported_reason=lambda *a: None), url="amqp://127.0.0.1:1/",
                            target=None, node_urls=None, health_path=str(tmp_path / "health"), lock_path=str(tmp_path / "lock"),
                            dead_cause=None, keep_history=False, preflight=[], mutation=None)
    me = PlannedCase("ack/x.py::TestX::test[classic]", cls, "classic")
    call = CaseCall(me, Deadline(0.2, pytest.fail), 0.2, lambda: [me])
    return case_runner, case, state, call


def _restart_elsewhere(path: str, after: str) -> None:
    """Another worker's case hung the broker and restarted it (the shared record's side of it)."""
    alarm = signal.getitimer(signal.ITIMER_REAL)  # another process's restart leaves this one's deadline alone
    hangs.after_hang(path, target=Counting(name="node"), case_id=after, cause=f"silent since {after}",
                     started_generation=hangs.read(path).generation, restartable=True, history=History())
    signal.setitimer(signal.ITIMER_REAL, *alarm)


def test_a_rerun_cut_short_by_another_restart_is_an_error_naming_both(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The rerun skipped the check that the generation moved: observations spanning a second restart
    gave a fail (here) or, when the restart found this case silent, the Rerun escaped the runner."""
    path = str(tmp_path / "health")

    def restarted_by(after: str) -> Any:
        def scenario(ctx: Any) -> str:
            _restart_elsewhere(path, after)
            return "half before, half after a restart"
        return scenario

    case_runner, case, state, call = _runner(tmp_path, monkeypatch, [restarted_by("b"), restarted_by("c")])
    with pytest.raises(Ended, match="^error: not judged"):
        case_runner.run_case(call, state, case)
    rec = records.case_fields(call.result)
    assert rec["verdict"] == "error", rec
    assert "after b hung it" in rec["observed"] and "after c hung it" in rec["observed"] and "after b hung it" in rec["rerun"]
    assert hangs.read(path).running == () and state.dead_cause is None


def test_a_rerun_that_finds_the_broker_restarted_again_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = str(tmp_path / "health")

    def cut(after: str) -> Any:
        def scenario(ctx: Any) -> str:
            _restart_elsewhere(path, after)
            raise ConnectionLost("connection reset by the restart")
        return scenario

    case_runner, case, state, call = _runner(tmp_path, monkeypatch, [cut("b"), cut("c")])
    with pytest.raises(Ended, match="^error: not judged"):
        case_runner.run_case(call, state, case)
    rec = records.case_fields(call.result)
    assert rec["verdict"] == "error" and "after c hung it" in rec["observed"], rec


def test_the_rerun_runs_under_a_deadline_of_its_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first attempt's deadline fired and was disarmed; the rerun then ran with none at all."""
    monkeypatch.setattr(sys, "unraisablehook", lambda unraisable: None)
    path = str(tmp_path / "health")

    def hung_by_another(ctx: Any) -> str:
        _restart_elsewhere(path, "b")
        while True:  # blocked on the silent broker until the deadline
            pass

    def blocked(ctx: Any) -> str:
        end = time.monotonic() + 3
        while time.monotonic() < end:
            pass
        return "too late"

    case_runner, case, state, call = _runner(tmp_path, monkeypatch, [hung_by_another, blocked])
    assert call.deadline.arm()
    started = time.monotonic()
    try:
        with pytest.raises(Ended, match="^error: "):
            case_runner.run_case(call, state, case)
    finally:
        call.deadline.cancel()
    assert time.monotonic() - started < 2
    rec = records.case_fields(call.result)
    assert rec["verdict"] == "error" and rec["rerun"], rec


def test_the_wait_for_a_restart_under_way_is_not_the_case_s_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    begin = hangs.begin

    def waits_for_a_restart(path: str, case_id: str) -> hangs.Health:
        end = time.monotonic() + 0.3  # another worker holds the record while it restarts the target
        while time.monotonic() < end:
            pass
        return begin(path, case_id)

    case_runner, case, state, call = _runner(tmp_path, monkeypatch, [lambda ctx: "fine"],
                                             verdict=lambda obs, profile, qt: Verdict(Outcome.PASS, "x", obs))
    monkeypatch.setattr(case_runner.hangs, "begin", waits_for_a_restart)
    call.deadline = Deadline(5, pytest.fail)  # the deadline counts the wait (the alarm is armed before it): not this test's point
    case_runner.run_case(call, state, case)
    rec = records.case_fields(call.result)
    assert rec["verdict"] == "pass" and rec["lock_wait_s"] >= 0.3 and rec["duration_s"] < 0.3, rec



def test_a_restart_over_before_a_scenario_began_is_not_that_scenario_s(tmp_path: Path) -> None:
    """A case noted generation 0 at its start, then waited for the broker lock while another case's
    rerun (alone) hung the broker and it was restarted: its own scenario began after, on the new broker."""
    path, target = str(tmp_path / "health"), Counting(name="node")
    hangs.begin(path, "waiting")
    _hang(path, target, "rerun-alone", 0)
    done = hangs.read(path).restarts[0]["done_at"]
    assert hangs.generation_at(path, 0, began_at=done + 0.5) == 1  # began after: not moved under it
    assert hangs.moved(path, hangs.generation_at(path, 0, began_at=done + 0.5)) is None
    assert hangs.generation_at(path, 0, began_at=done - 0.5) == 0  # under way during the restart: moved
    assert hangs.moved(path, hangs.generation_at(path, 0, began_at=done - 0.5)) is not None


def _silent_runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, others: tuple[str, ...], disrupts: bool = False) -> tuple[Any, ...]:
    """run_case on a restartable synthetic target that goes silent in the first attempt; ``others``
    are the cases of other workers under way then."""

    attempts: list[bool] = []

    def scenario(ctx: Any) -> str:
        attempts.append(True)
        if len(attempts) == 1:
            for other in others:
                hangs.begin(str(tmp_path / "health"), other)
            raise ConnectionLost("no answer")
        return "fine after the restart"

    case_runner_, case, state, call = _runner(tmp_path, monkeypatch, [scenario, scenario],
                                              verdict=lambda obs, profile, qt: Verdict(Outcome.PASS, "x", f"observed {obs}"))
    target = Counting(name="node")
    target.check_alive = lambda: "node does not answer on port 1"  # type: ignore[method-assign]
    state.target = target
    case.disrupts_broker = disrupts
    return case_runner_, case, state, call, attempts


def test_a_silence_found_while_other_cases_ran_reruns_every_suspect_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A silent broker cannot say which of the cases under way stopped it: the case that noticed it
    first is not blamed; it runs again, alone, like the others (the one that stops it again is the finding)."""
    case_runner, case, state, call, attempts = _silent_runner(tmp_path, monkeypatch, others=("ack/y.py::TestY::test[quorum]",))
    case_runner.run_case(call, state, case)
    rec = records.case_fields(call.result)
    assert len(attempts) == 2 and rec["verdict"] == "pass", rec
    assert "each runs again alone" in rec["rerun"] and "ack/y.py::TestY::test[quorum]" in rec["rerun"]
    assert any(e["op"] == "lock" and "exclusively" in e["detail"] for e in rec["history"] or []) or "broker held exclusively" in call.result.history_text
    assert len(hangs.read(str(tmp_path / "health")).restarts) == 1


def test_a_silence_found_by_a_case_that_ran_alone_is_its_finding(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A case holding the broker alone (a rerun, or one that restarts or kills it): the cases waiting
    for the lock were not under way, so the hang is this case's."""
    case_runner, case, state, call, attempts = _silent_runner(tmp_path, monkeypatch, others=("ack/y.py::TestY::test[quorum]",), disrupts=True)
    with pytest.raises(Ended, match="broker stopped answering"):
        case_runner.run_case(call, state, case)
    rec = records.case_fields(call.result)
    assert len(attempts) == 1 and rec["verdict"] == "fail" and "also under way" not in rec["observed"], rec
