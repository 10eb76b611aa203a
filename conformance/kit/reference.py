"""Judging an observation against the requirement's reference, with the profile as explanation only.

The rule every profile-keyed verdict follows:
- the observation equals the requirement's reference (its spec rule, seed or the vendor's documented
  intent, stated in conformance/catalogue/data/requirements/*.yaml): pass;
- it differs, and equals what the profile documents (an entry whose value differs from the reference,
  with the reason and a citation): deviation, visible and counted;
- anything else: fail.

A profile value therefore never turns a difference into a pass, and the loader refuses a profile
entry that differs from the reference without saying why
(:func:`conformance.catalogue.profile_check.profile_problems`).

A case gives :func:`judge` a ``check``: the verdict of its observation against one assignment of the
keys it reads (the same function it would apply to any documented value), so the rule lives here once.
"""

from __future__ import annotations

import itertools
from dataclasses import replace
from typing import Any, Callable, Mapping, Sequence

from conformance.catalogue.profile_keys import profile_keys
from conformance.catalogue.profiles import Entry, Profile
from conformance.catalogue.requirements import requirement
from conformance.kit.verdicts import Outcome, Verdict, fmt, undocumented

Check = Callable[[Mapping[str, Any]], Verdict]


def _choices(req_id: str, key: str, profile: Profile, queue_type: str | None) -> list[tuple[Any, str]] | None:
    """The values that are right for ``key`` with their source, or None when only the profile could
    say (a vendor-judged key the profile does not document)."""
    spec = profile_keys()[key]
    if spec.judged == "vendor":
        entry = profile.entry(key, queue_type)
        return None if entry is None else [(entry.value, entry.source)]
    ref = requirement(req_id).reference_for(key)
    if ref is None:
        raise ValueError(f"{req_id} states no reference for {key} (conformance/catalogue/data/requirements)")
    return [(v, ref.source) for v in ref.values]


def documented_difference(key: str, profile: Profile, queue_type: str | None, right: Sequence[Any]) -> Entry | None:
    """The profile's entry for ``key`` when it documents a value other than the right ones."""
    if profile_keys()[key].judged != "reference":
        return None
    entry = profile.entry(key, queue_type)
    return entry if entry is not None and entry.value not in right else None


def judge(req_id: str, profile: Profile, queue_type: str | None, keys: Sequence[str], check: Check) -> Verdict:
    """The verdict of one observation over the profile ``keys`` its case reads (see the module text)."""
    per_key: list[list[tuple[Any, str]]] = []
    for key in keys:
        choices = _choices(req_id, key, profile, queue_type)
        if choices is None:
            return undocumented(key, profile)
        per_key.append(choices)
    documented = {k: documented_difference(k, profile, queue_type, [v for v, _ in c]) for k, c in zip(keys, per_key)}
    differing = {k: e for k, e in documented.items() if e is not None}
    values = {k: (differing[k].value if k in differing else c[0][0]) for k, c in zip(keys, per_key)}
    said = ", ".join(f"{k} = {fmt(e.value)}" for k, e in differing.items())
    first: Verdict | None = None
    for combo in itertools.product(*per_key):
        v = check({k: value for k, (value, _) in zip(keys, combo)})
        if v.outcome is Outcome.PASS:
            v = replace(v, citation=v.citation or "; ".join(dict.fromkeys(src for _, src in combo)))
            if differing and check(values).outcome is Outcome.PASS:
                # the case saw nothing that tells the two apart: a pass, said to be a weak one
                v = replace(v, reason=f"this observation does not tell the reference from what profile {profile.id} documents ({said})")
            return v
        if v.outcome is not Outcome.FAIL:
            return v  # unsupported (a clean refusal), undocumented...: the check's own word
        first = first or v
    assert first is not None
    if not differing:
        return first
    explained = check(values)
    if explained.outcome is not Outcome.PASS:
        return replace(first, reason=f"neither the reference nor what profile {profile.id} documents ({said}): "
                                     f"{explained.observed}")
    return replace(
        first,
        outcome=Outcome.DEVIATION,
        reason="; ".join(f"{e.reason} ({k} = {fmt(e.value)})" for k, e in differing.items()),
        citation="; ".join(dict.fromkeys(e.source for e in differing.values())),
    )
