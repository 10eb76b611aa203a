"""A target that stopped answering during a case: the finding, the restart, and the run's record of both.

A broker that stops answering is a finding of the case that was running: it fails with "broker
stopped answering <operation> after <what the case did>". Then the run goes on:

- a target the suite launched (``Target.can_restart``) is killed (-9: a frozen process ignores
  anything gentler), started again on its data, and the next case runs against it;
- a target the suite cannot restart (a URL), a run through a mutation (the proxy, not the broker,
  went silent) or a run that used up :data:`MAX_RESTARTS` ends its judging: every later case is
  ``error`` at once, naming the case that hung the target.

Cases run in several processes at once (xdist workers), so the record is a file shared by every
process of the run (beside the broker lock), read and written under ``flock``: its *generation*
counts the restarts. A case notes the generation when it starts; the one that finds the target
silent with the generation unchanged restarts it (holding the file exclusively, so the other workers
wait at the start of their next case instead of running into a dead broker). A case whose scenario
ended while the generation moved under it was running when another case hung the broker, or when
its restart cut every connection: it is not the cause, and it runs once more on the restarted broker.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from dataclasses import dataclass, replace
from typing import Any, Iterator

from conformance.errors import NoReply
from conformance.kit.history import History
from conformance.kit.verdicts import Outcome, Verdict
from conformance.runner import deadline
from conformance.runner.liveness import operation_of
from conformance.targets import Target

#: Restarts one run may need before it stops judging: a broker that hangs this often is the finding.
MAX_RESTARTS = 3

#: How many of the case's last operations the finding names.
LAST_OPERATIONS = 3


class Rerun(Exception):
    """The case was running when another case hung the broker (or its restart cut the case's
    connections): run it again on the restarted broker."""


@dataclass(frozen=True)
class Health:
    generation: int
    #: Why the run stopped judging (the target cannot be restarted, or too many restarts), or None.
    dead: str | None
    restarts: tuple[dict[str, Any], ...]
    #: The cases under way now, in every process of the run.
    running: tuple[str, ...] = ()


@contextlib.contextmanager
def _locked(path: str, exclusive: bool) -> Iterator[Any]:
    with open(path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        try:
            yield fh
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _parse(fh: Any) -> Health:
    fh.seek(0)
    text = fh.read()
    data = json.loads(text) if text.strip() else {}
    return Health(int(data.get("generation", 0)), data.get("dead"), tuple(data.get("restarts", ())), tuple(data.get("running", ())))


def _write(fh: Any, health: Health) -> None:
    fh.seek(0)
    fh.truncate()
    fh.write(json.dumps({"generation": health.generation, "dead": health.dead, "restarts": list(health.restarts),
                         "running": list(health.running)}))
    fh.flush()  # other processes read it through the same page cache: no fsync needed


def read(path: str) -> Health:
    """The run's record now. Waits while a restart is under way (it holds the file exclusively)."""
    with _locked(path, exclusive=False) as fh:
        return _parse(fh)


def generation_at(path: str, started_generation: int, began_at: float) -> int:
    """The generation a scenario that began at wall time ``began_at`` ran against: restarts recorded
    since ``started_generation`` that were over before it began (a restart holds the broker lock
    alone, so one is over before any scenario gets the lock) do not concern it. A case waiting for
    the lock behind reruns that run alone is not cut short by their restarts."""
    return _generation_at(read(path), started_generation, began_at)


def _generation_at(health: Health, started_generation: int, began_at: float) -> int:
    earlier = 0
    for restart in health.restarts[started_generation:]:
        if float(restart.get("done_at", float("inf"))) > began_at:
            break
        earlier += 1
    return started_generation + earlier


def begin(path: str, case_id: str) -> Health:
    """A case starts: the record as it is now (waiting while a restart is under way), the case noted as running."""
    with _locked(path, exclusive=True) as fh:
        health = _parse(fh)
        if case_id not in health.running:
            health = replace(health, running=(*health.running, case_id))
            _write(fh, health)
        return health


def end(path: str, case_id: str) -> None:
    """A case is decided: no longer running."""
    with _locked(path, exclusive=True) as fh:
        health = _parse(fh)
        if case_id in health.running:
            _write(fh, replace(health, running=tuple(c for c in health.running if c != case_id)))


#: The case this process ran last (its id), named when the target is silent before a case did anything.
_previous: list[str] = []


def ran(case_id: str) -> None:
    """Note the case this process just ran."""
    _previous[:] = [case_id]


def what_it_did(history: History) -> str:
    """The case's last operations that the broker answered, oldest first: "what the case did"."""
    done = [e for e in history.events if e.error is None and e.actor != "suite"]
    if not done:
        before = f", after {_previous[0]} ran" if _previous else ""
        return f"nothing: it did not answer the case's first operation{before}"
    shown = [f"{e.actor} {e.op}({e.detail})" if e.detail else f"{e.actor} {e.op}" for e in done[-LAST_OPERATIONS:]]
    return "; ".join(s if len(s) <= 120 else s[:117] + "..." for s in shown)


def operation(history: History, exc: BaseException) -> str:
    """The operation the broker did not answer: in protocol terms when the adapter said which
    (a reply it waited for), else the case's last operation that failed, else the exception's name."""
    if isinstance(exc, NoReply):
        return exc.operation
    failed = [e for e in history.events if e.error is not None and e.actor != "suite"]
    return f"{failed[-1].actor} {failed[-1].op}" if failed else operation_of(exc)


def finding(operation: str, did: str, cause: str, others: tuple[str, ...] = ()) -> Verdict:
    """The failure of the case that was running when the target stopped answering (``did``: what
    the case did before, :func:`what_it_did`). Never a profile matter: no broker documents a hang
    as its behaviour."""
    also = f"; also under way then, in other workers: {', '.join(others)}" if others else ""
    return Verdict(
        Outcome.FAIL,
        expected=f"the broker answers {operation} and every later operation (a case never stops the broker answering)",
        observed=f"broker stopped answering {operation} after {did} ({cause}){also}",
        key="broker-stopped-answering",
        spec="fail",
    )


@dataclass(frozen=True)
class Hang:
    """What a case that found the target silent learns from the run's record."""

    #: This case was running when the target stopped answering, and no other case was found first.
    culprit: bool
    #: Why the run stops judging the target, or None when it was restarted and the run goes on.
    dead: str | None
    #: The other cases under way when it was found (each runs again after a restart).
    others: tuple[str, ...] = ()


def after_hang(path: str, *, target: Target | None, case_id: str, cause: str, started_generation: int,
               restartable: bool, history: History, lock_path: str | None = None, alone: bool = False) -> Hang:
    """The target stopped answering during ``case_id``. Raises :class:`Rerun` if another case
    restarted it meanwhile (this case was not the cause). Otherwise this case is the one that found
    it: the target is restarted when it can be, else the record says why the run stops judging it.
    Cases of other workers under way at that moment are named: a silent broker cannot say which
    of them stopped it, and each of them runs again on the restarted broker.

    The case runner calls this still holding its broker lock, so no disruptive case of another
    worker (it needs the lock alone) kills or restarts the node under the restart; ``lock_path``
    takes that lock alone here instead, for a caller that holds none. No deadlock: a case takes the
    broker lock only after this record (:func:`begin`). The case's deadline is disarmed first (a
    restart takes seconds), and the record is written whatever interrupts it."""
    with _locked(path, exclusive=True) as fh:
        health = _parse(fh)
        if health.generation != started_generation:
            raise Rerun(_moved_text(health))
        if health.dead:
            return Hang(False, health.dead)
        # a case that held the broker alone had it to itself: the others were waiting, not under way
        others = () if alone else tuple(c for c in health.running if c != case_id)
        said = cause if case_id in cause else f"{cause}; the case that hung it: {case_id}"
        if target is None or not target.can_restart or not restartable:
            why = "the suite cannot restart this target" if target is None or not target.can_restart else \
                "a run through a mutation: the proxy went silent, not the broker"
            dead = f"{said} ({why})"
            _write(fh, replace(health, dead=dead))
            return Hang(True, dead, others)
        if len(health.restarts) >= MAX_RESTARTS:
            dead = f"{said} (after {MAX_RESTARTS} restarts the run stops judging this target)"
            _write(fh, replace(health, dead=dead))
            return Hang(True, dead, others)
        deadline.disarm()  # the restart is the suite's, not the case's: its deadline must not cut it short
        start = time.monotonic()
        try:
            with _locked(lock_path, exclusive=True) if lock_path else contextlib.nullcontext():
                target.kill()
                history.add("nemesis", "kill -9", f"{target.name}: it stopped answering")
                target.start()
                done_at = time.time()  # inside the broker lock: every scenario that gets it later began after
        except Exception as exc:  # noqa: BLE001 - a target that does not come back ends the judging, with its reason
            dead = f"{said} (restart failed: {exc})"
            _write(fh, replace(health, generation=health.generation + 1, dead=dead))
            return Hang(True, dead, others)
        except BaseException as exc:
            # interrupted (Ctrl-C, a stray alarm): the node was killed at least, so the generation
            # moves and the record says so, or the next case would blame and restart all over again
            dead = f"{said} (restart interrupted: {type(exc).__name__})"
            restart = {"after_case": case_id, "cause": cause, "seconds": round(time.monotonic() - start, 2), "also_running": list(others)}
            _write(fh, replace(health, generation=health.generation + 1, dead=dead, restarts=(*health.restarts, restart)))
            raise
        took = time.monotonic() - start
        history.add("nemesis", "start", f"{target.name} accepting connections after {took:.1f}s (data kept)")
        restart = {"after_case": case_id, "cause": cause, "seconds": round(took, 2), "also_running": list(others), "done_at": done_at}
        _write(fh, replace(health, generation=health.generation + 1, restarts=(*health.restarts, restart)))
        return Hang(True, None, others)


def _moved_text(health: Health) -> str:
    last = health.restarts[-1]["after_case"] if health.restarts else "another case"
    return f"the broker was restarted while this case ran, after {last} hung it"


def moved(path: str, started_generation: int, began_at: float = float("-inf")) -> str | None:
    """Why a case that ended must run again: the target was restarted while its scenario, begun at
    wall time ``began_at``, ran (None if not; see :func:`generation_at`)."""
    health = read(path)
    return None if _generation_at(health, started_generation, began_at) == health.generation else _moved_text(health)


def run_record(path: str) -> dict[str, Any]:
    """What run.json says about the run's restarts and the end of its judging (controller, at the end)."""
    if not os.path.exists(path):
        return {"restarts": []}
    health = read(path)
    out: dict[str, Any] = {"restarts": list(health.restarts)}
    if health.dead:
        out["target_dead"] = health.dead
    return out
