"""A profile explains, never excuses: the loader's check of a profile's entries against the references
the catalogue states (conformance/catalogue/data/requirements/*.yaml ``reference:``).

It reads the catalogue and the key schema and only the three fields below of a profile, so the
profile loader (:mod:`conformance.catalogue.profiles`) calls it without the two modules importing each
other; judging an observation against the same references is the kit's (:mod:`conformance.kit.reference`).
"""

from __future__ import annotations

import re
from typing import Any, Mapping, Protocol

from conformance.catalogue.profile_keys import fmt, profile_keys
from conformance.catalogue.requirements import catalogue

#: A citation of the vendor's own documentation: a URL, its docs, CHANGELOG or release notes.
VENDOR_DOCUMENT = re.compile(r"https?://|\bdocs?\b|changelog|release notes|\bLQ-(DOC|CL)\b", re.IGNORECASE)


class CheckedProfile(Protocol):
    """What the check reads of a profile (conformance.catalogue.profiles.Profile): its name and its
    entries by key, then by queue type (None: every queue type), each with value, source and reason."""

    @property
    def id(self) -> str: ...

    @property
    def path(self) -> str: ...

    @property
    def entries(self) -> Mapping[str, Mapping[str | None, Any]]: ...


def profile_problems(profile: CheckedProfile) -> list[str]:
    """Why the profile's entries would excuse rather than explain, one line each: an entry of a
    reference-judged key that differs from the reference and gives no reason, or an entry of a
    vendor-judged key that cites no documentation (a URL)."""
    problems = []
    reqs = catalogue()
    for key, by_qt in profile.entries.items():
        spec = profile_keys().get(key)
        if spec is None:
            continue
        for qt, entry in by_qt.items():
            where = f"{profile.path or profile.id}: entries.{key}" + ("" if qt is None else f".by_queue_type.{qt}")
            if spec.judged == "vendor" and not VENDOR_DOCUMENT.search(entry.source):
                problems.append(f"{where}: the specification leaves {key} to the vendor, so the entry must cite the "
                                "vendor's documentation (a URL, its docs, CHANGELOG or release notes), not only an observation")
            if spec.judged != "reference" or entry.reason:
                continue
            for rid in spec.read_by:
                ref = reqs[rid].reference_for(key) if rid in reqs else None
                if ref is not None and entry.value not in ref.values:
                    problems.append(
                        f"{where}: {fmt(entry.value)} differs from {rid}'s reference {' or '.join(fmt(v) for v in ref.values)}; "
                        "a profile explains a difference, never excuses it: give the reason (for a bug, the release "
                        "that fixes it) and the entry becomes a deviation")
                    break
    return problems
