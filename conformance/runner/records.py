"""A case's result record, one line of results.jsonl: the one place its fields are set.

The others hand it facts and get fields back:

- the case runner, what it decided about the case (:func:`decided`);
- the pytest plugin's report hook, a case that never reached a verdict (:func:`undecided`) and what
  pytest reported of the case (:func:`record`);
- the run's lifecycle, the run's own fields (:func:`run_fields`), which head run.json too.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import conformance
from conformance.catalogue.profiles import profile_digest
from conformance.catalogue.requirements import Requirement, catalogue_digest, requirement
from conformance.kit.history import History
from conformance.kit.verdicts import Outcome, Verdict
from conformance.nemesis.mutations import alters
from conformance.runner.shared_faults import PlannedCase, plain_nodeid
from conformance.runner.state import RunState
from conformance.targets import redact

#: The id pytest gives a repetition (``[classic-attempt2]``); the record's case_id leaves it out.
ATTEMPT_ID = "attempt"


@dataclass(frozen=True)
class Result:
    """What the runner decided about one case: the facts its record and its report are made of.

    Taken when the case is decided (history and wire trace included), so nothing that happens to
    the case's context afterwards changes them."""

    requirement: Requirement
    protocol: str
    queue_type: str | None
    variant: str | None
    verdict: Verdict
    #: False for a case interrupted before a verdict: its record has only what the report says.
    reached: bool = True
    #: The case's own time, and its wait for the broker lock or a restart kept apart from it.
    duration_s: float = 0.0
    lock_wait_s: float = 0.0
    observations: Any = None
    #: Kept in the record only for a case that did not pass, or under ``--keep-history``.
    history: list[dict[str, Any]] | None = None
    wire_trace: list[str] | None = None
    history_text: str = ""
    trace_text: str = ""
    #: Why the case ran a second time (another case's hang restarted the broker under it).
    rerun: str | None = None
    #: One line on the console: the cause (a target down since an earlier case) was shown once.
    brief: bool = False

    @property
    def level(self) -> str:
        return self.requirement.level_for(self.protocol)

    @property
    def rendered(self) -> str:
        """The verdict as the console and the report show it."""
        return self.verdict.render(self.requirement.id, self.level)


def decided(req: Requirement, protocol: str, queue_type: str | None, variant: str | None, verdict: Verdict, *,
            duration_s: float, lock_wait_s: float, observations: Any = None, history: History | None = None, trace: str = "",
            keep_history: bool = False, rerun: str | None = None, brief: bool = False) -> Result:
    """The runner's decision about a case; the record keeps the history and wire trace of a case
    that did not pass (of every case with ``keep_history``)."""
    keep = history is not None and (keep_history or verdict.outcome is not Outcome.PASS)
    result = Result(
        requirement=req, protocol=protocol, queue_type=queue_type, variant=variant, verdict=verdict,
        duration_s=round(duration_s, 4), lock_wait_s=round(lock_wait_s, 4), observations=observations,
        history=history.as_records() if keep and history is not None else None,
        wire_trace=trace.splitlines() if keep and trace else None,
        history_text=history.render() if history else "", trace_text=trace, rerun=rerun, brief=brief,
    )
    return result


def undecided(case: PlannedCase, protocol: str, observed: str) -> Result:
    """A case interrupted before a verdict (its deadline, or a crash outside the scenario)."""
    req = requirement(case.cls.requirement)  # type: ignore[union-attr]
    return Result(requirement=req, protocol=protocol, queue_type=case.queue_type, variant=None,
                  verdict=Verdict(Outcome.ERROR, req.text, observed, reason="case did not reach a verdict"), reached=False)


def case_fields(result: Result) -> dict[str, Any]:
    """The record's fields about the case and its verdict."""
    v = result.verdict
    fields: dict[str, Any] = {
        "requirement": result.requirement.id,
        "level": result.level,
        "area": result.requirement.area,
        "queue_type": result.queue_type,
        "verdict": v.outcome.value,
        "spec_verdict": v.spec,
        "vendor_verdict": v.vendor,
        "expected": v.expected,
        "observed": v.observed,
        "reason": v.reason,
    }
    if not result.reached:
        return fields
    fields.update(
        variant=result.variant,
        citation=v.citation,
        known_bug=v.known_bug or None,
        unsupported_kind=v.unsupported_kind or None,
        duration_s=result.duration_s,
        lock_wait_s=result.lock_wait_s,
        observations=result.observations,
        history=result.history,
        wire_trace=result.wire_trace,
    )
    if result.rerun is not None:
        fields["rerun"] = result.rerun
    return fields


def run_fields(state: RunState) -> dict[str, Any]:
    """The fields every record of the run shares (run.json starts with them too)."""
    return {
        "run_id": state.run_id,
        "target": state.target_label,
        "target_url": redact(state.url),
        "product": state.server["product"],
        "version": state.server["version"],
        "protocol": state.adapter.protocol,
        "adapter": state.adapter.name,
        "adapter_library": state.adapter.library_version(),
        "profile": state.profile.id,
        "profile_digest": profile_digest(state.profile),
        "catalogue_digest": catalogue_digest(),
        "suite_version": conformance.__version__,
        # a probing or plain relay changes nothing: only a real mutation marks the records
        **({"mutation": state.mutation} if alters(state.mutation) else {}),
    }


def record(case: PlannedCase, state: RunState, result: Result, *, outcome: str, longrepr: str, worker: str) -> dict[str, Any]:
    """The case's line of results.jsonl: its verdict, the run's fields, and what pytest reported
    (``outcome``, ``longrepr``) in which process (``worker``: an xdist worker's id, or "main")."""
    fields = case_fields(result)
    fields.update(run_fields(state))
    fields.update(
        case_id=case_id(case, result.requirement),
        attempt=case.attempt if case.attempt is not None else 1,
        pytest_outcome=outcome,
        worker=worker,
        finished_at=time.time(),
    )
    if fields["verdict"] == "error" and longrepr:
        fields["traceback"] = longrepr[-2000:]
    return fields


def sections(result: Result) -> list[tuple[str, str]]:
    """The report sections of a case that did not pass: expected vs observed, history, wire trace."""
    if result.verdict.outcome in (Outcome.PASS, Outcome.UNSUPPORTED, Outcome.UNDOCUMENTED) or result.brief:
        return []
    text = result.rendered if result.reached else f"Expected: {result.verdict.expected}\nActual:   {result.verdict.observed}"
    out = [("expected vs observed", text)]
    if result.history_text:
        out.append(("history", result.history_text))
    if result.trace_text:
        # "Captured stdout ..." sections are what junitxml writes to <system-out> (junit_logging).
        # junitxml titles it only "Captured Out", so the text names itself.
        out.append(("Captured stdout wire trace", "Wire trace (every frame both ways, decoded):\n" + result.trace_text))
    return out


def case_id(case: PlannedCase, req: Requirement) -> str:
    """The case's id, the same for every repetition (``--repeat``): the attempt is a field of its own.
    Without xdist's "@group" suffix. A pack's case ids start with the pack's name: pytest names a file
    outside the core relative to the folder it was collected from, which could repeat a core case's id."""
    node = plain_nodeid(case.nodeid)
    if req.pack:
        node = f"{req.pack}/{node}"
    attempt = case.attempt
    if not attempt:
        return node
    return node.replace(f"-{ATTEMPT_ID}{attempt}]", "]").replace(f"[{ATTEMPT_ID}{attempt}]", "")
