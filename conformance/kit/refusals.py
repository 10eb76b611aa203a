"""Judging what a case could not do: a clean refusal, a protocol violation, or a capability missing.

Pure functions (exceptions and data in, a Verdict out), so each path is tested with synthetic
observations. The rule they keep: ``unsupported`` has three meanings only (conformance.unsupported);
a broker that refuses what its specification requires, answers outside its protocol, or accepts an
operation and then does not do it, is judged (fail, or a deviation its profile documents).
"""

from __future__ import annotations

from typing import Any

from conformance.errors import ChannelClosed, ProtocolViolation, Unsupported
from conformance.kit.verdicts import Outcome, Verdict
from conformance.unsupported import CANNOT_EXPRESS, REFUSED

#: AMQP 0-9-1's reply code for "not implemented" (AMQP 1.0's amqp:not-implemented maps to it).
NOT_IMPLEMENTED = 540
#: Levels at which a requirement is optional: a clean refusal of it is no failure.
OPTIONAL_LEVELS = ("MAY", "EXTENSION")


def rule_citation(ref: str) -> str:
    """``amqp-1.0 4.3 declare error (MUST): "quote"``, or the bare reference for a rule not in the data."""
    from conformance.catalogue.rules import all_rules

    rule = all_rules().get(ref)
    return f'{ref} ({rule.keyword}): "{rule.quote}"' if rule else ref


def unsupported_verdict(exc: Unsupported, expected: str, who: str, doc: Any = None) -> Verdict:
    """What an adapter or case raised as unsupported, with its kind; a refusal is the observation."""
    observed = f"refused by the broker: {exc.refusal}" if exc.kind == REFUSED else "not run"
    return Verdict(Outcome.UNSUPPORTED, expected, observed, reason=f"{who}: {exc}",
                   citation=doc.source if doc is not None else "", unsupported_kind=exc.kind)


def violation_verdict(exc: ProtocolViolation) -> Verdict:
    """A broker that answered outside its protocol fails, naming the rule it broke."""
    return Verdict(Outcome.FAIL, exc.expected, exc.observed, key="protocol-violation", spec="fail",
                   reason=f"the broker broke {exc.rule}", citation=rule_citation(exc.rule))


def _answer(exc: ChannelClosed) -> str:
    return f"{'connection' if exc.hard else 'channel'} closed with {exc.code} {exc.text}".strip()


def refusal_matches(refusal: str, exc: ChannelClosed) -> bool:
    """A profile's expected refusal against the broker's answer: a reply code and the words of the
    refusal ("406 x-delivery-limit": 406 whose text names the argument), or an AMQP 1.0 condition
    ("amqp:not-implemented"). A bare code matches any close with it, so an unrelated 406 later in
    the case (an unknown delivery tag) would pass for the refusal: give the words."""
    code, _, words = refusal.partition(" ")
    if code.isdigit():
        return int(code) == exc.code and (not words or words in exc.text)
    return refusal in exc.text


def refusal_verdict(exc: ChannelClosed, req: Any, protocol: str, doc: Any = None) -> Verdict | None:
    """A channel or connection closed by the broker during a scenario, judged; None to leave it to
    the runner's error handling (the case did something the broker rightly refused).

    - the refusal the profile documents for this requirement (``unsupported`` entry of kind
      refused), seen on the wire: unsupported, kind refused, the refusal recorded;
    - 540 NOT_IMPLEMENTED for a method the specification requires (a MUST chassis rule the
      requirement cites, or a MUST/SHOULD requirement): fail, naming the rule;
    - 540 for an optional requirement (MAY, or a vendor EXTENSION): unsupported, kind refused."""
    answer = _answer(exc)
    if doc is not None and getattr(doc, "kind", "") == REFUSED and refusal_matches(doc.refusal, exc):
        return Verdict(Outcome.UNSUPPORTED, req.text, f"refused by the broker: {answer}", reason=doc.reason,
                       citation=doc.source, unsupported_kind=REFUSED)
    if exc.code != NOT_IMPLEMENTED:
        return None
    from conformance.catalogue.rules import all_rules

    rules = all_rules()
    cited = [rules[f"{protocol} {i}"] for i in req.rule_refs().get(protocol, []) if f"{protocol} {i}" in rules]
    required = [r for r in cited if r.id.endswith("chassis/server") and r.keyword == "MUST"]
    level = req.level_for(protocol)
    if not required and level in OPTIONAL_LEVELS:
        return Verdict(Outcome.UNSUPPORTED, req.text, f"refused by the broker: {answer}",
                       reason=f"the broker does not implement this optional ({level}) feature and said so with {NOT_IMPLEMENTED}",
                       unsupported_kind=REFUSED)
    named = next((r for r in required if r.id.split("/chassis")[0].replace("/", ".") in exc.text), None)
    rule = named or (required[0] if required else (cited[0] if cited else None))
    ref = rule.ref if rule else f"{protocol} ({level} requirement {req.id})"
    return Verdict(Outcome.FAIL, f"the broker implements what {req.id} rests on ({ref}): {req.text}",
                   f"answered {NOT_IMPLEMENTED} NOT_IMPLEMENTED: {answer}", key="not-implemented", spec="fail",
                   reason=f"a method the specification requires is not implemented ({ref})",
                   citation=rule_citation(ref) if rule else "")


def profile_skip(doc: Any, expected: str) -> Verdict | None:
    """A profile ``unsupported`` entry that skips its case: only a requirement the broker cannot
    express at all. An entry of kind refused runs the case, which must observe the refusal."""
    if doc is None or getattr(doc, "kind", CANNOT_EXPRESS) != CANNOT_EXPRESS:
        return None
    return Verdict(Outcome.UNSUPPORTED, expected, "not run", reason=doc.reason, citation=doc.source, unsupported_kind=CANNOT_EXPRESS)


def observed_refusal(obs: Any, expected: str, doc: Any = None) -> Verdict | None:
    """The refusal a profile entry of kind refused expects, caught by the case itself (its
    observations hold the broker's answer as ``{closed, code, text}``): unsupported, kind refused.
    None when the entry is of another kind or no such answer was observed (the case is judged)."""
    if doc is None or getattr(doc, "kind", "") != REFUSED or not isinstance(obs, dict):
        return None
    for answer in obs.values():
        if isinstance(answer, dict) and answer.get("closed") and answer.get("code") is not None:
            exc = ChannelClosed(int(answer["code"]), str(answer.get("text") or ""), hard=bool(answer.get("hard")))
            if refusal_matches(doc.refusal, exc):
                return Verdict(Outcome.UNSUPPORTED, expected, f"refused by the broker: {_answer(exc)}", reason=doc.reason,
                               citation=doc.source, unsupported_kind=REFUSED)
    return None
