"""The case runner: scenario, verdict and profile, the broker lock; what it decided goes to conformance.runner.records.

It runs one case without pytest: the pytest plugin hands it a :class:`CaseCall` of plain values and
turns the :class:`Ended` it raises into pytest's outcome of the same name (fail, skip, xfail).
"""

from __future__ import annotations

import contextlib
import fcntl
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, NoReturn

from conformance.catalogue.configurations import base_of
from conformance import inflight
from conformance.catalogue.capabilities import applicability
from conformance.catalogue.requirements import Requirement, requirement
from conformance.errors import (
    ChannelClosed,
    ConformanceError,
    ConnectionLost,
    DeliveriesMissing,
    ProtocolViolation,
    TargetError,
    Unsupported,
)
from conformance.kit.case import Case, CaseContext
from conformance.kit.history import History
from conformance.kit.refusals import observed_refusal, profile_skip, refusal_verdict, unsupported_verdict, violation_verdict
from conformance.kit.verdicts import Outcome, Verdict, apply_profile
from conformance.nemesis.kinds import FaultKind, fault_applicability, fault_notes
from conformance.nemesis.mutations import alters
from conformance.runner import (
    allure,
    deadline,
    hangs,
    liveness,
    preflight,
    records,
    shared_faults,
)
from conformance.runner.missing_deliveries import missing_obs
from conformance.runner.records import Result
from conformance.runner.shared_faults import PlannedCase
from conformance.runner.state import RunState
from conformance.targets import probe_tcp
from conformance.unsupported import CANNOT_EXPRESS, NO_FAULT


#: Outcomes of a case that was not put to the broker (or whose fault never came): no fault note.
_NOT_RUN = (Outcome.UNSUPPORTED, Outcome.UNDOCUMENTED, Outcome.BLOCKED)


class Ended(BaseException):
    """How a decided case ends, for the test framework to report: ``fail`` (``message`` is the whole
    story, no traceback), ``skip`` or ``xfail`` (a deviation). A BaseException, as pytest's outcomes
    are: no ``except Exception`` on the way out takes it for the case's error."""

    def __init__(self, kind: Literal["fail", "skip", "xfail"], message: str) -> None:
        super().__init__(message)
        self.kind, self.message = kind, message


def _end(kind: Literal["fail", "skip", "xfail"], message: str) -> NoReturn:
    __tracebackhide__ = True
    raise Ended(kind, message)


@dataclass
class CaseCall:
    """One case handed to the runner: the case, its deadline, and the run's cases from this one on
    (``following()``, for a shared broker fault). The runner leaves the case's :class:`Result` in
    ``result`` once it is decided."""

    case: PlannedCase
    deadline: deadline.Deadline
    #: ``--case-timeout``: what a deadline's error says the deadline was.
    case_timeout: float
    following: Callable[[], Sequence[PlannedCase]]
    result: Result | None = None


def run_case(call: CaseCall, state: RunState, case: Case) -> None:
    """Scenario, verdict, record. Its frames are the suite's, not the broker's: hidden from tracebacks.

    A case that was running when another case hung the broker runs once more on the restarted one
    (conformance.runner.hangs), under a deadline of its own; its record says so. Once only: a rerun that
    another restart cuts short again is an ``error`` naming both restarts."""
    __tracebackhide__ = True
    nodeid = call.case.nodeid
    try:
        _attempt(call, state, case, None)
    except hangs.Rerun as again:
        state.dead_cause = None  # what this process saw before the restart; the shared record says if it failed
        call.deadline.rearm()
        _attempt(call, state, case, str(again))
    finally:
        hangs.end(state.health_path, nodeid)
        hangs.ran(nodeid)


def _attempt(call: CaseCall, state: RunState, case: Case, rerun: str | None) -> None:
    __tracebackhide__ = True
    me = call.case
    nodeid, queue_type, variant = me.nodeid, me.queue_type, me.variant
    req = requirement(case.requirement)
    target_label = f"{state.server['product']} {state.server['version']} {state.adapter.protocol}"
    allure.labels(req, queue_type, variant, target_label, state.adapter.protocol, state.profile.id)
    started = time.monotonic()
    waited = [0.0]  # time spent waiting for the broker lock or a restart: the case's record keeps it apart

    #: What the target says about the broker faults the case inflicts (a node without a store comes
    #: back without its durable state): in the reason of whatever the case ends with, once it ran.
    fault_note = fault_notes(case.fault_kinds(variant), state.target)

    def finish(v: Verdict, history: History | None = None, obs: Any = None, trace: str = "", brief: bool = False) -> None:
        if fault_note and not brief and v.outcome not in _NOT_RUN and fault_note not in v.reason:
            v = replace(v, reason=f"{v.reason}; {fault_note}" if v.reason else fault_note)
        allure.verdict_label(v.outcome.value)
        if v.outcome not in (Outcome.PASS, Outcome.UNSUPPORTED, Outcome.UNDOCUMENTED):
            allure.attach(v.render(req.id, req.level_for(state.adapter.protocol)), history, trace)
        call.result = records.decided(req, state.adapter.protocol, queue_type, variant, v, duration_s=time.monotonic() - started - waited[0],
                                      lock_wait_s=waited[0], observations=obs, history=history, trace=trace,
                                      keep_history=state.keep_history, rerun=rerun, brief=brief)

    health = hangs.begin(state.health_path, nodeid)  # waits while another worker restarts the target
    waited[0] = time.monotonic() - started

    def restarted(again: str) -> NoReturn:
        """The broker was restarted while this attempt ran: the first attempt runs again, a rerun is
        an error (its observations span a restart too, and a case runs at most twice)."""
        ctx.close(True)
        if rerun is None:
            raise hangs.Rerun(again)
        state.dead_cause = None  # the restart answered what this process saw
        detail = f"not judged: {rerun}; and again during its rerun: {again}"
        finish(Verdict(Outcome.ERROR, req.text, detail, reason="the broker was restarted during both attempts"), history,
               trace=ctx.wire_trace())
        _end("fail", f"error: {detail}")

    dead = state.dead_cause or health.dead
    if dead:
        # a silent target's cause names itself ("target stopped answering ..."); a gone one is "down"
        said = dead if dead.startswith("target ") else f"target is down: {dead}"
        finish(Verdict(Outcome.ERROR, "a reachable target", said), brief=True)  # one line per remaining case: the cause was shown once
        _end("fail", f"error: target is down since an earlier case: {dead}")
    why = _not_applicable(req, state, queue_type, case.fault_kinds(variant))
    if why:
        finish(why)
        _end("skip", f"{why.outcome.value} ({why.unsupported_kind}): {why.reason}")
    blocked = preflight.blocking(state.preflight, req)  # at once, never at the deadline
    if blocked is not None:
        finish(blocked)
        raise TargetError(blocked.observed)
    inflight.clear_interrupted()
    history = History()
    if rerun:
        history.add("suite", "rerun", rerun)
    ctx = _context(state, req, queue_type, variant, history)
    interrupted = True
    began_at = float("inf")
    # The broker lock is held until the case knows whether the broker stopped answering, and through
    # the restart if so: a case waiting for it never starts against a frozen broker, and no case that
    # restarts or kills the broker runs beside the restart.
    lock = contextlib.ExitStack()
    try:
        # a rerun runs alone: if it stops the broker again, no other case was under way to share the blame
        alone = case.disrupts_broker or rerun is not None
        lock.enter_context(_broker_lock(state, exclusive=alone, history=history, waited=waited))
        began_at = time.time()  # a restart that was over by now (it holds this lock) is not this scenario's
        obs = shared_faults.scenario(me, case, ctx, call.following, lambda other: _context_for(other, state))
        call.deadline.overrun(started)  # a lost alarm never lets a case pass past its deadline
        lock.close()
        interrupted = False
    except Unsupported as exc:
        ctx.close(True)
        who = f"adapter {state.adapter.name}" if exc.by == "adapter" else f"target {_target_label(state)}"
        v = unsupported_verdict(exc, req.text, who, state.profile.unsupported_reason(req.id, queue_type))
        finish(v, history, trace=ctx.wire_trace())
        _end("skip", f"unsupported ({v.unsupported_kind}): {v.reason}")
    except ProtocolViolation as exc:
        ctx.close(True)
        v = apply_profile(violation_verdict(exc), req.id, queue_type, state.profile)
        finish(v, history, trace=ctx.wire_trace())
        _report(v, req, state.adapter.protocol)
    except BaseException as exc:
        # The broker refused what the case did: the refusal its profile documents, or 540 for what
        # the specification requires, is a verdict; any other refusal is the case's error below.
        refused = refusal_verdict(exc, req, state.adapter.protocol, state.profile.unsupported_reason(req.id, queue_type)) \
            if isinstance(exc, ChannelClosed) else None
        if refused is not None:
            ctx.close(True)
            v = apply_profile(refused, req.id, queue_type, state.profile)
            finish(v, history, trace=ctx.wire_trace())
            _report(v, req, state.adapter.protocol, unsupported=v.observed)  # the refusal it saw
        if type(exc).__name__ == "Failed":
            deadline.disarm()  # the deadline is caught: the record below is written undisturbed
        generation = hangs.generation_at(state.health_path, health.generation, began_at)
        again = None if isinstance(exc, (KeyboardInterrupt, SystemExit)) else hangs.moved(state.health_path, generation)
        if again:  # another case hung the broker while this one ran: not this case's finding
            restarted(again)
        cause = None
        if isinstance(exc, (ConnectionLost, OSError, ConformanceError)):
            cause = probe_tcp(state.url) if state.target is None else (state.target.check_alive())
            if cause:
                state.dead_cause = cause
        # a protocol-level health probe after a timeout; a missing delivery is a verdict
        judged = liveness.Judgement(None, None) if cause else liveness.after_scenario_exception(
            exc, adapter=state.adapter, url=state.url, case_id=nodeid, requirement_text=req.text)
        if judged.dead_cause:
            state.dead_cause = cause = judged.dead_cause
        ctx.skip_cleanup = bool(cause)  # a target that stopped answering would stall the cleanup too
        if cause:
            did = hangs.what_it_did(history)  # before the restart adds its own events
            try:
                # this case still holds the broker lock: the restart needs no other
                hung = hangs.after_hang(state.health_path, target=state.target, case_id=nodeid, cause=cause,
                                        started_generation=generation, restartable=not alters(state.mutation),
                                        history=history, alone=alone)
            except hangs.Rerun as moved:  # another case found the silence first and restarted the broker
                restarted(str(moved))
            finally:
                lock.close()
            state.dead_cause = hung.dead
            others = hung.others
            if hung.culprit and hung.dead is None and others:
                # Several cases were under way: a silent broker cannot say which of them stopped it.
                # Each runs again, alone, on the restarted broker; one that stops it again is the finding.
                restarted(f"the broker stopped answering while {len(others) + 1} cases were under way "
                          f"({', '.join((nodeid, *others))}) and was restarted; each runs again alone")
            if hung.culprit:  # the finding of this case; the target restarted, or the run's judging ends
                v = hangs.finding(hangs.operation(history, exc), did, cause, others)
                ctx.close(True)
                finish(v, history, None, ctx.wire_trace())
                _end("fail", v.render(req.id, req.level_for(state.adapter.protocol)))
            cause = hung.dead
        if judged.verdict is not None and judged.verdict.outcome is not Outcome.ERROR:
            ctx.close(True)
            v = apply_profile(judged.verdict, req.id, queue_type, state.profile)
            finish(v, history, {"missing": missing_obs(exc)} if isinstance(exc, DeliveriesMissing) else None, ctx.wire_trace())
            _report(v, req, state.adapter.protocol)
        detail = f"{type(exc).__name__}: {exc}" + (f" (target down: {cause})" if cause else "")
        if type(exc).__name__ == "Failed":  # the case deadline (pytest-timeout): name the operation
            detail = inflight.deadline_text(call.case_timeout) or detail
        if judged.verdict is not None:
            detail = judged.verdict.observed
        ctx.close(True)
        finish(Verdict(Outcome.ERROR, req.text, detail, reason="scenario did not complete"), history, trace=ctx.wire_trace())
        if type(exc).__name__ == "Failed":
            # the deadline's alarm can interrupt a frame that has no line number, and pytest then
            # fails to format the traceback (INTERNALERROR): the deadline speaks in one line instead
            _end("fail", f"error: {detail}")
        raise
    finally:
        lock.close()
        ctx.close(interrupted)
    again = hangs.moved(state.health_path, health.generation, began_at)
    if again:  # its observations span another case's restart of the broker
        restarted(again)
    v = observed_refusal(obs, req.text, state.profile.unsupported_reason(req.id, queue_type))  # caught by the case itself
    v = v or apply_profile(case.verdict(obs, state.profile, queue_type), req.id, queue_type, state.profile)
    finish(v, history, obs, ctx.wire_trace())
    _report(v, req, state.adapter.protocol)


def _report(v: Verdict, req: Requirement, protocol: str, *, unsupported: str | None = None) -> None:
    """End a decided case as its verdict says; a pass returns. ``unsupported``: what an unsupported
    verdict's line says instead of its reason (a refusal seen on the wire says what the broker answered)."""
    __tracebackhide__ = True
    if v.outcome is Outcome.UNDOCUMENTED:
        _end("skip", f"undocumented: {v.reason}")
    if v.outcome is Outcome.UNSUPPORTED:  # e.g. a refusal, or a client-side one the verdict found
        _end("skip", f"unsupported ({v.unsupported_kind}): {unsupported or v.reason}")
    if v.outcome is Outcome.FAIL:
        # the verdict is the whole story: no traceback of the runner's frames before it
        _end("fail", v.render(req.id, req.level_for(protocol)))
    if v.outcome is Outcome.DEVIATION:
        _end("xfail", f"deviation: {v.reason} [{v.citation}]")


def _context_for(other: PlannedCase, state: RunState) -> CaseContext | None:
    """A fresh context for another case of the run, or None if that case will not run its scenario."""
    req = requirement(other.cls.requirement)  # type: ignore[union-attr]
    qt = other.queue_type
    if state.dead_cause or _not_applicable(req, state, qt, other.cls().fault_kinds(other.variant)) or preflight.blocking(state.preflight, req) is not None:  # type: ignore[misc]
        return None
    return _context(state, req, qt, other.variant, History())


def _context(state: RunState, req: Requirement, queue_type: str | None, variant: str | None, history: History) -> CaseContext:
    """A case's context on the run's target, adapter and profile (a cluster's node URLs included)."""
    ctx = CaseContext(adapter=state.adapter, url=state.url, profile=state.profile, requirement=req, queue_type=queue_type,
                      variant=variant, history=history, target=state.target)
    ctx.node_urls = state.node_urls
    return ctx


#: A shared-lock wait this long is shown in the case's history (a disruptive case held the broker).
LOCK_WAIT_SHOWN_S = 0.05


@contextlib.contextmanager
def _broker_lock(state: RunState, *, exclusive: bool, history: History, waited: list[float]) -> Iterator[None]:
    """Cases share the broker (shared lock); a case that restarts or kills it holds it alone.

    A file lock, so it spans xdist workers; the case deadline bounds the wait for it. The wait is
    the suite's scheduling, not the broker's answer: it goes to ``waited``, apart from the case's time."""
    if state.target is None or not state.target.can_restart:
        yield
        return
    with open(state.lock_path, "a+") as fh:
        started = time.monotonic()
        fcntl.flock(fh, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        took = time.monotonic() - started
        waited[0] += took
        if exclusive:
            history.add("suite", "lock", f"broker held exclusively after {took * 1000:.0f}ms")
        elif took >= LOCK_WAIT_SHOWN_S:
            history.add("suite", "lock", f"broker shared after {took * 1000:.0f}ms (a case that restarts or kills it held it)")
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _not_applicable(req: Requirement, state: RunState, queue_type: str | None, faults: tuple[FaultKind, ...]) -> Verdict | None:
    # applicability by capability (conformance.catalogue.capabilities): one the adapter's protocol or the
    # broker's dialect has no way to express
    why = applicability(req, state.adapter, state.profile, state.capabilities)
    if why:
        return Verdict(Outcome.UNSUPPORTED, req.text, "not run", reason=why, unsupported_kind=CANNOT_EXPRESS)
    if queue_type is not None and base_of(queue_type) not in state.profile.queue_types:
        return Verdict(Outcome.UNSUPPORTED, req.text, "not run", reason=f"profile {state.profile.id} has no queue type {base_of(queue_type)!r}",
                       unsupported_kind=CANNOT_EXPRESS)
    # an entry of kind refused runs the case: only the refusal seen on the wire makes it unsupported
    skip = profile_skip(state.profile.unsupported_reason(req.id, queue_type), req.text)
    if skip is not None:
        return skip
    # the same rule for the target: an ability a fault kind of the case needs (conformance.nemesis.kinds)
    why = fault_applicability(faults, state.target)
    if why:
        return Verdict(Outcome.UNSUPPORTED, req.text, "not run", reason=f"target {_target_label(state)}: {why}", unsupported_kind=NO_FAULT)
    return None


def _target_label(state: RunState) -> str:
    return state.target_label
