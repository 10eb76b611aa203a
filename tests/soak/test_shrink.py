"""The shrinker's search (conformance.soak.shrink.shrink) over fake runners: no broker, no soak.
A fake says whether a candidate fails the way a real soak would (a loss from the Nth publish on, a
duplicate after any fault that fired, faults after the workload's end never firing)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from conformance.soak.runner import SoakOptions
from conformance.soak.shrink import Candidate, Outcome, judged_checker, replay_args, shrink, start_of

#: The fake workload's pace: a run of N ops lasts N / RATE seconds; a fault later than that never fires.
RATE = 100.0


def fake(fails_if: Callable[[int, list[tuple[float, str]]], bool], log: list[Candidate] | None = None) -> Callable[[Candidate], Outcome]:
    def run(c: Candidate) -> Outcome:
        fired = tuple(i for i, (at, _) in enumerate(c.schedule) if at < c.ops / RATE)
        f = fails_if(c.ops, [c.schedule[i] for i in fired])
        if log is not None:
            log.append(c)
        return Outcome(f, fired, 1.0)
    return run


def test_ops_bisected_to_the_first_failing_count() -> None:
    start = Candidate(5000)
    r = shrink(start, fake(lambda ops, faults: ops >= 437), max_runs=20)
    assert r.verified and r.stopped == "done"
    assert 437 <= r.best.ops <= 437 * 1.34, r.best
    assert r.steps[-1].phase == "replay" and r.steps[-1].candidate == r.best
    assert all(s.candidate.ops >= 437 for s in r.steps if s.outcome.fails)


def test_faults_dropped_then_ops_then_earlier() -> None:
    start = Candidate(900, ((1.5, "cut"), (3.5, "restart"), (5.2, "cut"), (7.0, "cut")))
    needs_restart = shrink(start, fake(lambda ops, faults: any(k == "restart" for _, k in faults)), max_runs=20)
    assert needs_restart.verified
    assert [k for _, k in needs_restart.best.schedule] == ["restart"]
    # one fault, moved earlier, and just the ops that reach it (a run of N ops lasts N/100 s)
    at = needs_restart.best.schedule[0][0]
    assert at < 3.5 and at * RATE <= needs_restart.best.ops <= 2 * at * RATE, needs_restart.best
    any_fault = shrink(start, fake(lambda ops, faults: bool(faults)), max_runs=20)
    assert len(any_fault.best.schedule) == 1 and any_fault.best.ops < 900


def test_faults_that_did_not_fire_are_dropped_with_the_ops() -> None:
    start = Candidate(900, ((1.5, "cut"), (7.0, "cut")))
    r = shrink(start, fake(lambda ops, faults: ops >= 200 and bool(faults)), max_runs=20)
    assert r.best.schedule and all(at < r.best.ops / RATE for at, _ in r.best.schedule)
    assert len(r.best.schedule) == 1


def test_bounded_by_runs_and_keeps_one_for_the_replay() -> None:
    log: list[Candidate] = []
    r = shrink(Candidate(5000), fake(lambda ops, faults: ops >= 437, log), max_runs=4)
    assert len(r.steps) == len(log) == 3 and r.stopped == "runs"  # two searched, one replay (the second replay unneeded)
    assert r.steps[-1].phase == "replay" and r.verified
    assert r.best.ops < 5000


def test_bounded_by_seconds() -> None:
    now = [0.0]

    def clock() -> float:
        return now[0]

    def run(c: Candidate) -> Outcome:
        now[0] += 40.0  # each run takes 40 s
        return Outcome(c.ops >= 100, None, 40.0)

    r = shrink(Candidate(5000), run, max_runs=50, max_seconds=100.0, clock=clock)
    assert r.stopped == "seconds" and len(r.steps) <= 3


def test_a_smallest_that_does_not_fail_again_falls_back_to_a_larger_one() -> None:
    seen: dict[int, int] = {}

    def flaky(c: Candidate) -> Outcome:  # fails below 1000 ops only the first time it is run
        seen[c.ops] = seen.get(c.ops, 0) + 1
        return Outcome(c.ops >= 1000 or (c.ops >= 300 and seen[c.ops] == 1))

    r = shrink(Candidate(4000), flaky, max_runs=20)
    assert r.verified and r.best.ops >= 1000, r.best
    replays = [s for s in r.steps if s.phase == "replay"]
    assert len(replays) >= 2 and not replays[0].outcome.fails and replays[-1].outcome.fails


def test_nothing_fails_again_gives_the_original_unverified() -> None:
    start = Candidate(800, ((2.0, "cut"),))
    r = shrink(start, lambda c: Outcome(False), max_runs=6)
    assert r.best == start and not r.verified
    assert len(r.steps) <= 6


def test_judged_checker_and_start_from_soak_json() -> None:
    record = {"verdicts": {"queue": {"verdict": "fail"}, "redelivery": {"verdict": "pass"}, "tx": {"verdict": "fail"}},
              "mutation": {"expected_checker": "tx"}, "seconds": 10.0,
              "schedule": [{"at_s": 1.5, "kind": "cut"}, {"at_s": 9.5, "kind": "cut"}],
              "stats": {"publishes": 4321, "faults_fired": [{"at_s": 1.5, "kind": "cut", "entry": 0}]}}
    assert judged_checker(record) == "tx"
    assert judged_checker({**record, "mutation": None}) == "queue"
    assert judged_checker({"verdicts": {"queue": {"verdict": "pass"}}}) is None
    assert start_of(record) == Candidate(4321, ((1.5, "cut"),))
    assert start_of({**record, "ops": 500}).ops == 500


def test_replay_args_name_what_differs_from_the_defaults() -> None:
    o = SoakOptions(seed=9, seconds=30.0, modes=("confirm",), consumers=1, mutation="confirmed-lost", ordered=True)
    args = replay_args(o, Candidate(700, ((1.0, "cut"),)), Path("/r/shrink/schedule.yaml"))
    assert args[:6] == ["--seed", "9", "--ops", "700", "--schedule", "/r/shrink/schedule.yaml"]
    assert "--consumers" in args and args[args.index("--consumers") + 1] == "1"
    assert args[args.index("--modes") + 1] == "confirm" and "--ordered" in args
    assert args[-2:] == ["--mutation", "confirmed-lost"]
    assert "--producers" not in args and "--schedule" not in replay_args(o, Candidate(700), Path("x"))
