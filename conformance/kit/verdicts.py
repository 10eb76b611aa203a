"""Verdicts: the judgement of one case's observations, kept apart from the scenario that made them.

A verdict function is pure: observations (plain data) and a profile in, a :class:`Verdict` out. That
is what lets unit tests feed it observations that violate the requirement and see it fail.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace
from typing import Any, Sequence

from conformance.catalogue.profile_keys import fmt
from conformance.catalogue.profiles import Profile


class Outcome(str, enum.Enum):
    PASS = "pass"
    FAIL = "fail"
    DEVIATION = "deviation"  # documented vendor behaviour that differs from the spec
    UNSUPPORTED = "unsupported"  # not put to the broker, for one of three reasons (conformance.unsupported)
    UNDOCUMENTED = "undocumented"  # the spec leaves it to the broker and the profile has no entry
    ERROR = "error"  # the suite or the infrastructure broke, not the broker
    #: The target broke an assumption the case needs to judge its requirement (conformance.runner.preflight):
    #: not the suite's breakage and not a judgement of the requirement. Rendered "blocked: <assumption>".
    BLOCKED = "blocked"
    INDETERMINATE = "indeterminate"


@dataclass(frozen=True)
class Verdict:
    outcome: Outcome
    expected: str
    observed: str
    #: Short canonical form of what was observed, matched against a profile's documented deviation.
    key: str | None = None
    #: Spec verdict apart from the vendor verdict: "pass", "fail", or "n/a" when the spec leaves it open.
    spec: str = "n/a"
    reason: str = ""
    citation: str = ""
    #: For an UNSUPPORTED verdict, which of its three meanings (conformance.unsupported.KINDS).
    unsupported_kind: str = ""
    #: For a FAIL the profile names as a bug open upstream: the report's citation, also the verdict's
    #: ``citation`` (the source of its reason); the verdict stays a fail.
    known_bug: str = ""

    @property
    def vendor(self) -> str:
        if self.outcome in (Outcome.PASS, Outcome.DEVIATION):
            return "pass"
        if self.outcome is Outcome.FAIL:
            return "fail"
        return "n/a"

    def render(self, requirement_id: str, level: str) -> str:
        kind = f" ({self.unsupported_kind})" if self.unsupported_kind else ""
        lines = [f"{requirement_id} [{level}] {self.outcome.value.upper()}{kind}", f"  Expected: {self.expected}", f"  Actual:   {self.observed}"]
        if self.reason:
            lines.append(f"  Reason:   {self.reason}")
        if self.known_bug:
            lines.append(f"  Known bug: {self.known_bug}")
        elif self.citation:
            lines.append(f"  Source:   {self.citation}")
        return "\n".join(lines)


def holds(condition: bool, *, expected: str, observed: str, key: str | None = None, spec: bool = True) -> Verdict:
    """Pass when ``condition`` holds, else fail; ``spec`` says whether the spec itself decides."""
    outcome = Outcome.PASS if condition else Outcome.FAIL
    return Verdict(
        outcome=outcome,
        expected=expected,
        observed=observed,
        key=key,
        spec=("pass" if condition else "fail") if spec else "n/a",
    )


def same(expected: Any, observed: Any, *, what: str, spec: bool = True) -> Verdict:
    """Equality check with both sides rendered; the observed value doubles as the deviation key."""
    return holds(
        expected == observed,
        expected=f"{what} = {fmt(expected)}",
        observed=f"{what} = {fmt(observed)}",
        key=fmt(observed),
        spec=spec,
    )


def first_failure(*verdicts: Verdict) -> Verdict:
    """Combine checks of one case: the first failing one, else the first (all passed)."""
    for v in verdicts:
        if v.outcome is not Outcome.PASS:
            return v
    return replace(
        verdicts[0],
        expected="; ".join(v.expected for v in verdicts),
        observed="; ".join(v.observed for v in verdicts),
    )


def each_step(steps: Sequence[tuple[str, Verdict]]) -> Verdict:
    """Judge a scenario run as numbered steps (a seed's demonstration): pass when every step holds;
    otherwise fail showing every step's Expected and Actual, the failing ones marked, keyed and
    spec-judged by the first that failed (a later step often fails only because an earlier one did)."""
    failed = [(i, name, v) for i, (name, v) in enumerate(steps, 1) if v.outcome is not Outcome.PASS]
    expected = "; ".join(f"{i} {name}: {v.expected}" for i, (name, v) in enumerate(steps, 1))
    observed = "; ".join(f"{i} {name}: {'FAILED ' if v.outcome is not Outcome.PASS else ''}{v.observed}"
                         for i, (name, v) in enumerate(steps, 1))
    if not failed:
        spec = "pass" if any(v.spec == "pass" for _, v in steps) else "n/a"
        return Verdict(Outcome.PASS, expected=expected, observed=observed, key=None, spec=spec)
    i, _, first = failed[0]
    spec = "fail" if any(v.spec == "fail" for _, _, v in failed) else first.spec
    return replace(first, expected=expected, observed=observed, key=first.key or f"step-{i}", spec=spec)


def undocumented(entry: str, profile: Profile) -> Verdict:
    return Verdict(
        outcome=Outcome.UNDOCUMENTED,
        expected=f"the behaviour profile {profile.id} documents under {entry!r}",
        observed="not judged",
        reason=f"profile {profile.id} documents no {entry!r}; the spec leaves it to the broker",
    )


def spec_scope(v: Verdict, level: str | None) -> Verdict:
    """A spec verdict exists only where a spec rule is cited: an EXTENSION requirement's verdict
    carries none (spec "n/a"), whatever the check that made it defaulted to."""
    if level == "EXTENSION" and v.spec != "n/a":
        return replace(v, spec="n/a")
    return v


#: How the reason of a failure the profile names as a known bug starts.
KNOWN_BUG_REASON = "known broker bug, open upstream: "


def apply_profile(v: Verdict, requirement_id: str, queue_type: str | None, profile: Profile) -> Verdict:
    """Turn a failure whose observed behaviour the profile documents into a deviation; give a failure
    the profile names as a known bug (open upstream) its reference, a failure still; strip the spec
    verdict of an EXTENSION requirement (:func:`spec_scope`). A deviation wins over a known bug: a bug
    fixed in a later release is a deviation on the versions it affects."""
    from conformance.catalogue.requirements import catalogue

    req = catalogue().get(requirement_id)
    protocol = profile.protocols[0] if len(profile.protocols) == 1 else None
    v = spec_scope(v, req.level_for(protocol) if req else None)
    if v.outcome is not Outcome.FAIL:
        return v
    doc = profile.deviation(requirement_id, queue_type, v.key)
    if doc is not None:
        return replace(v, outcome=Outcome.DEVIATION, reason=doc.reason, citation=doc.source)
    bug = profile.known_bug(requirement_id, queue_type, v.key)
    if bug is not None:
        return replace(v, reason=KNOWN_BUG_REASON + bug.reason, citation=bug.source, known_bug=bug.source)
    return v


def ids(deliveries: Sequence[dict[str, Any]]) -> list[str]:
    return [d["id"] for d in deliveries]
