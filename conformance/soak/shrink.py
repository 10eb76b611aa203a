"""Shrinking a failed soak: the smallest schedule and workload that still fails, by re-running it.

A failing soak of thousands of operations and several faults is hard to read. The shrinker re-runs
it, each time a real soak with the same seed, mutation and options, smaller: fewer faults (schedule
entries dropped), fewer operations (``--ops`` bisected), faults earlier. It keeps every candidate
that still fails and ends with the smallest, and the command that replays it.

*Still fails* means: the checker that failed in the original run (with a mutation, the checker the
mutation must be caught by) fails again. Not necessarily with the same anomaly: a smaller run loses
other messages, or the same mutation hits another one; what is kept is the kind of wrongness a
checker judges, which is what the replay is for. A run that broke (the target did not answer, the
drain did not end) does not fail: it proves nothing either way.

Soaks are not deterministic (threads interleave differently each time), so a candidate that failed
once may pass when replayed. The search leaves its last runs (:data:`REPLAYS`) to replay the
smallest candidate; if that one passes, it falls back to the larger candidates that failed before
it, newest first, while runs remain, and says whether the result it gives was seen to fail twice
(``verified``). The bisection of ``--ops`` stops within a quarter of the threshold for the same
reason: the count where a failure begins is where it replays least reliably.

The bound: at most ``max_runs`` re-runs (default 10) and ``max_seconds`` of them (default 300);
the search stops at whichever comes first and gives the smallest failing candidate so far.

:func:`shrink` is the search alone, over a ``run`` function (tests give it a fake); the command
gives it :func:`soak_runner`, which runs real soaks.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

#: Defaults of the bound on re-runs.
MAX_RUNS, MAX_SECONDS = 10, 300.0
#: Runs the search leaves for the replays (the smallest, then the next larger if it passed).
REPLAYS = 2
#: Faults are not moved earlier than this (the workload must be running when one fires).
EARLIEST_S = 0.5


@dataclass(frozen=True)
class Candidate:
    """A soak to try: how many publishes it runs (``--ops``) and its schedule, as (at_s, kind) pairs."""

    ops: int
    schedule: tuple[tuple[float, str], ...] = ()

    def entries(self) -> list[dict[str, Any]]:
        return [{"at_s": at, "kind": kind} for at, kind in self.schedule]

    def size(self) -> tuple[int, int, float]:
        return len(self.schedule), self.ops, sum(at for at, _ in self.schedule)

    def describe(self) -> str:
        faults = ", ".join(f"{k}@{at:g}s" for at, k in self.schedule) or "no faults"
        return f"{self.ops} ops, {faults}"

    @classmethod
    def of(cls, ops: int, schedule: list[dict[str, Any]]) -> Candidate:
        return cls(int(ops), tuple((float(e["at_s"]), str(e["kind"])) for e in schedule))


@dataclass(frozen=True)
class Outcome:
    """What one run of a candidate showed."""

    #: The judged checker failed.
    fails: bool
    #: Indices into the candidate's schedule of the faults that fired (None: all of them). A fault
    #: after the workload ended never fired, so the failure owes it nothing and it is dropped.
    fired: tuple[int, ...] | None = None
    seconds: float = 0.0
    note: str = ""


@dataclass
class Step:
    phase: str
    candidate: Candidate
    outcome: Outcome

    def record(self) -> dict[str, Any]:
        return {"phase": self.phase, "ops": self.candidate.ops, "schedule": self.candidate.entries(), "fails": self.outcome.fails,
                "seconds": round(self.outcome.seconds, 3), **({"note": self.outcome.note} if self.outcome.note else {})}


@dataclass
class ShrinkResult:
    start: Candidate
    best: Candidate
    #: ``best`` failed on its replay as well as in the search (or it is the original run, replayed).
    verified: bool
    steps: list[Step] = field(default_factory=list)
    #: Why the search ended: "done" (every reduction tried), "runs" or "seconds" (the bound).
    stopped: str = "done"
    seconds: float = 0.0


class _Budget(Exception):
    pass


def shrink(start: Candidate, run: Callable[[Candidate], Outcome], *, max_runs: int = MAX_RUNS, max_seconds: float = MAX_SECONDS,
           clock: Callable[[], float] = time.monotonic) -> ShrinkResult:
    """The smallest candidate below ``start`` (a run that failed) that ``run`` still sees fail.

    Order: fewer faults first (each costs seconds and muddies the history), then fewer ops
    (bisection), then faults earlier (and fewer ops again); the last run replays the result."""
    t0 = clock()
    steps: list[Step] = []
    accepted: list[Candidate] = [start]   # candidates that failed, oldest first
    seen: dict[Candidate, bool] = {}

    def left() -> bool:
        return len(steps) < max_runs and clock() - t0 < max_seconds

    def attempt(c: Candidate, phase: str, reserve: int = REPLAYS) -> bool:
        """Run ``c`` (once: a candidate is judged by its first run); True if it failed and became the best."""
        if c in seen:
            return seen[c]
        if len(steps) + reserve >= max_runs or clock() - t0 >= max_seconds:
            raise _Budget
        o = run(c)
        steps.append(Step(phase, c, o))
        seen[c] = o.fails
        if not o.fails:
            return False
        if o.fired is not None:  # what did not fire is no part of the failure
            c = Candidate(c.ops, tuple(e for i, e in enumerate(c.schedule) if i in set(o.fired)))
            seen.setdefault(c, True)
        if c.size() < accepted[-1].size():
            accepted.append(c)
        return True

    def best() -> Candidate:
        return accepted[-1]

    def fewer_faults() -> None:
        if not best().schedule:
            return
        if attempt(Candidate(best().ops, ()), "faults"):
            return
        chunk = max(1, len(best().schedule) // 2)
        while chunk >= 1 and best().schedule:
            removed = False
            sched = best().schedule
            for i in range(len(sched) - chunk, -1, -chunk):  # later faults first: the run can end sooner
                trial = sched[:i] + sched[i + chunk:]
                if trial and attempt(Candidate(best().ops, trial), "faults"):
                    removed = True
                    break
            if not removed:
                if chunk == 1:
                    return
                chunk //= 2

    def fewer_ops() -> None:
        lo = 0  # the largest count known (or taken) to pass
        while True:
            hi = best().ops
            if hi - lo <= max(1, hi // 4):  # within a quarter: a failure near its threshold is the flakiest to replay
                return
            mid = (lo + hi) // 2
            if not attempt(Candidate(mid, best().schedule), "ops"):
                lo = mid

    def earlier_faults() -> bool:
        if not best().schedule:
            return False
        trial = tuple((max(EARLIEST_S, round(at / 2, 3)), k) for at, k in best().schedule)
        return trial != best().schedule and attempt(Candidate(best().ops, trial), "earlier")

    stopped = "done"
    try:
        fewer_faults()
        fewer_ops()
        if earlier_faults():
            fewer_ops()
    except _Budget:
        stopped = "runs" if len(steps) + REPLAYS >= max_runs else "seconds"

    # the replay: the smallest first, then the larger ones that failed before it
    verified = False
    chosen = best()
    for n in range(len(accepted) - 1, -1, -1):
        if not left():
            break
        o = run(accepted[n])
        steps.append(Step("replay", accepted[n], o))
        if o.fails:
            chosen, verified = accepted[n], True
            break
        chosen = accepted[max(0, n - 1)]  # the next larger one that failed (once), if no run is left to replay it
    return ShrinkResult(start, chosen, verified, steps, stopped, clock() - t0)


# -- real soaks ---------------------------------------------------------------------------------------

def judged_checker(record: dict[str, Any]) -> str | None:
    """The checker a shrink keeps failing: the mutation's own when it failed, else the first that failed."""
    verdicts = record.get("verdicts") or {}
    wanted = (record.get("mutation") or {}).get("expected_checker")
    if wanted and verdicts.get(wanted, {}).get("verdict") == "fail":
        return str(wanted)
    return next((name for name, v in verdicts.items() if v.get("verdict") == "fail"), None)


def start_of(record: dict[str, Any]) -> Candidate:
    """The failed run as a candidate: its publishes as ``--ops``, the faults that fired."""
    stats = record.get("stats") or {}
    ops = record.get("ops") or stats.get("publishes") or 1
    fired = {f["entry"] for f in stats.get("faults_fired") or ()}
    return Candidate.of(ops, [e for i, e in enumerate(record.get("schedule") or ()) if i in fired])


def soak_runner(target: Any, options: Any, out: Any, checker: str, *, adapter_name: str | None = None,
                say: Callable[[str], None] = print) -> Callable[[Candidate], Outcome]:
    """A run function for :func:`shrink`: each candidate a real soak against ``target`` (started,
    kept running) with ``options`` (seed, mutation, workload), in ``out``/run-NN."""
    from dataclasses import replace
    from pathlib import Path

    from conformance.errors import ConformanceError
    from conformance.soak.execute import execute

    count = [0]

    def run(c: Candidate) -> Outcome:
        count[0] += 1
        folder = Path(out) / f"run-{count[0]:02d}"
        o = replace(options, ops=c.ops, seconds=None, schedule=c.entries(), nemesis=())
        started = time.monotonic()
        try:
            _, record = execute(None, o, folder, target=target, adapter_name=adapter_name, say=lambda _: None)
        except ConformanceError as exc:
            outcome = Outcome(False, None, time.monotonic() - started, f"the run broke: {exc}")
        else:
            verdict = (record["verdicts"].get(checker) or {}).get("verdict")
            fired = tuple(sorted(f["entry"] for f in record["stats"]["faults_fired"]))
            outcome = Outcome(verdict == "fail", fired, time.monotonic() - started, f"{checker} {verdict}")
        say(f"shrink: run {count[0]} ({c.describe()}): {'FAILS' if outcome.fails else 'passes'} "
            f"({outcome.note}; {outcome.seconds:.1f}s) -> {folder}")
        return outcome

    return run


def replay_args(options: Any, candidate: Candidate, schedule_file: Any, *, adapter: str | None = None) -> list[str]:
    """``conformance soak`` arguments (after ``--target``) that replay ``candidate`` with ``options``."""
    from conformance.soak.runner import MODES, SoakOptions

    d = SoakOptions()
    args = ["--seed", str(options.seed), "--ops", str(candidate.ops)]
    if candidate.schedule:
        args += ["--schedule", str(schedule_file)]
    if adapter:
        args += ["--adapter", adapter]
    for name in ("producers", "consumers", "prefetch", "nack_rate", "cancel_rate", "rollback_rate", "queue_type"):
        value = getattr(options, name)
        if value != getattr(d, name) and value is not None:
            args += [f"--{name.replace('_', '-')}", str(value)]
    if tuple(options.modes) != MODES:
        args += ["--modes", ",".join(options.modes)]
    for flag in ("ordered", "requeue_counts"):
        if getattr(options, flag):
            args.append(f"--{flag.replace('_', '-')}")
    if options.mutation:
        args += ["--mutation", options.mutation]
    return args


def run_and_shrink(spec: str, options: Any, out: Any, *, adapter_name: str | None = None, max_runs: int = MAX_RUNS,
                   max_seconds: float = MAX_SECONDS, say: Callable[[str], None] = print) -> tuple[int, dict[str, Any] | None]:
    """``conformance soak --shrink``: the soak, and when a checker failed, the shrink, on one
    target launched (or attached) once for every run. The exit code is the soak's; shrink.json's
    content (None when there was nothing to shrink)."""
    import shlex
    from pathlib import Path

    import yaml

    from conformance.secrets import redact, register_url
    from conformance.soak.execute import EXIT_FAIL, execute
    from conformance.soak.runner import write_json
    from conformance.targets import make_target

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    register_url(spec)
    target = make_target(spec, run_dir=str(out))
    target.start()
    try:
        code, record = execute(None, options, out, target=target, adapter_name=adapter_name, say=say)
        checker = judged_checker(record) if code == EXIT_FAIL else None
        if checker is None:
            say("shrink: no checker failed, nothing to shrink")
            return code, None
        start = start_of(record)
        folder = out / "shrink"
        say(f"shrink: keeping the {checker} checker failing, from {start.describe()}; at most {max_runs} re-runs and {max_seconds:g}s")
        result = shrink(start, soak_runner(target, options, folder, checker, adapter_name=adapter_name, say=say),
                        max_runs=max_runs, max_seconds=max_seconds)
    finally:
        target.stop()
    folder.mkdir(parents=True, exist_ok=True)
    schedule_file = folder / "schedule.yaml"
    schedule_file.write_text(yaml.safe_dump(result.best.entries(), sort_keys=False), encoding="utf-8")
    args = replay_args(options, result.best, schedule_file, adapter=adapter_name)
    command = " ".join(["conformance", "soak", "--target", shlex.quote(redact(spec)), *map(shlex.quote, args), "--out", "REPLAY_DIR"])
    replay = next((n for n, s in reversed(list(enumerate(result.steps, 1))) if s.phase == "replay" and s.outcome.fails), None)
    data = {
        "checker": checker,
        "still_fails": f"the {checker} checker fails (any anomaly of it)",
        "seed": options.seed, "mutation": record.get("mutation"),
        "start": {"ops": start.ops, "schedule": start.entries()},
        "best": {"ops": result.best.ops, "schedule": result.best.entries()},
        "verified": result.verified, "stopped": result.stopped, "seconds": round(result.seconds, 1),
        "bound": {"max_runs": max_runs, "max_seconds": max_seconds},
        "runs": [{**s.record(), "out": str(folder / f"run-{n:02d}")} for n, s in enumerate(result.steps, 1)],
        **({"replayed_in": str(folder / f"run-{replay:02d}")} if replay else {}),
        "schedule_file": str(schedule_file), "args": args, "command": command,
    }
    write_json(out / "shrink.json", data)
    say(f"shrink: {start.describe()} -> {result.best.describe()} in {len(result.steps)} re-run(s), {result.seconds:.0f}s "
        f"({'failed again on its replay' if result.verified else 'NOT seen to fail again: the replay may pass'}; "
        f"search {'complete' if result.stopped == 'done' else 'stopped by the bound on ' + result.stopped})")
    say(f"replay: {command}")
    return code, data
