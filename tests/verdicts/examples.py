"""What every verdict-test module shares: the cases by name, the profiles, observation builders, the
Example and the contract each compliant observation and each violation is held to.

Each area's examples live in tests/verdicts/test_<area>.py beside the area's cases
(conformance/cases/<area>/): one compliant observation per case that a broker at the requirement
produces (the verdict must pass) and several distinct ways a broker could violate it (the verdict must
fail, saying what it expected and what it saw). tests/verdicts/test_coverage.py collects the tables of
all areas, so a new case cannot join the catalogue without such examples.

Case classes are looked up by name from ``all_cases()`` and never bound to module-level names: they are
called ``Test*`` and pytest would try to collect them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from conformance.cases import all_cases
from conformance.catalogue.profiles import Profile, select_profile
from conformance.kit.verdicts import Outcome, Verdict, apply_profile

CASES: dict[str, type] = {cls.__name__: cls for cls in all_cases()}

RABBIT = select_profile("RabbitMQ", "3.10.8", "amqp-0-9-1")
BASELINE = select_profile("Other", "1.0", "amqp-0-9-1")
P312 = select_profile("RabbitMQ", "3.12.0", "amqp-0-9-1")
P313 = select_profile("RabbitMQ", "3.13.0", "amqp-0-9-1")
P43 = select_profile("RabbitMQ", "4.3.0", "amqp-0-9-1")

#: Profiles a profile-independent verdict is judged with (each with all its queue types).
EVERY_PROFILE = (RABBIT, BASELINE, P43)

QQ = "quorum"


# -- observation builders ----------------------------------------------------------------------


def d(mid: str, tag: int, redelivered: bool = False, delivery_count: int | None = None) -> dict[str, Any]:
    """One delivery, shaped like conformance.kit.case.delivery_obs."""
    return {"id": mid, "tag": tag, "redelivered": redelivered, "delivery_count": delivery_count}


def first(*mids: str, start: int = 1) -> list[dict[str, Any]]:
    """First deliveries on one channel, tags counting from ``start``."""
    return [d(m, start + i) for i, m in enumerate(mids)]


def again(*mids: str, start: int = 1) -> list[dict[str, Any]]:
    """Redeliveries (redelivered=true) on one channel, tags counting from ``start``."""
    return [d(m, start + i, True) for i, m in enumerate(mids)]


def msgs(n: int) -> list[str]:
    return [f"m{i}" for i in range(1, n + 1)]


OPEN = {"closed": False, "code": None, "text": "", "hard": False}


def channel_406(text: str = "PRECONDITION_FAILED - unknown delivery tag 1") -> dict[str, Any]:
    return {"closed": True, "code": 406, "text": text, "hard": False}


def connection_closed(code: int, text: str) -> dict[str, Any]:
    return {"closed": True, "code": code, "text": text, "hard": True}


def soft(code: int, text: str) -> dict[str, Any]:
    return {"closed": True, "code": code, "text": text, "hard": False}


def with_(obs: dict[str, Any], **changes: Any) -> dict[str, Any]:
    return {**obs, **changes}


@dataclass(frozen=True)
class Example:
    case: str
    name: str
    obs: dict[str, Any]
    queue_type: str | None = "classic"
    profile: Profile = field(default_factory=lambda: RABBIT)
    marks: tuple[Any, ...] = field(default=())
    #: What a behaviour the requirement allows is judged: "pass" when it equals the reference,
    #: "deviation" when it differs as the profile documents (conformance.kit.reference), "unsupported"
    #: for a clean refusal of an optional feature.
    outcome: str = "pass"
    #: For a violation: a fragment the failing verdict's observed text must contain, so it cannot pass
    #: its test by failing for some unrelated reason.
    shows: str | None = None

    @property
    def id(self) -> str:
        return f"{self.case}:{self.name}"

    def param(self) -> Any:
        return pytest.param(self, id=self.id, marks=self.marks)

    def judge(self) -> Verdict:
        return CASES[self.case]().verdict(self.obs, self.profile, self.queue_type)


# -- table rows named for what the verdict should say -------------------------------------------


def everywhere(case: str, name: str, obs: dict[str, Any]) -> list[Example]:
    """A compliant observation of a profile-independent case, judged under every profile and queue type."""
    return [
        Example(case, f"{name}-{profile.id}-{qt}", obs, queue_type=qt, profile=profile)
        for profile in EVERY_PROFILE
        for qt in profile.queue_types
    ]


def under_rabbit_and_baseline(observations: dict[str, list[dict[str, Any]]]) -> list[Example]:
    """Compliant observations of cases the reference alone judges: each under RabbitMQ 3.10's profile and
    the spec-only baseline, every queue type, named by profile, queue type and position."""
    return [
        Example(case, f"{profile.id}-{qt}-{i}", obs, queue_type=qt, profile=profile)
        for case, observed in observations.items()
        for i, obs in enumerate(observed)
        for profile in (RABBIT, BASELINE)
        for qt in profile.queue_types
    ]


def ok(case: str, name: str, obs: dict[str, Any], qt: str | None, profile: Profile, outcome: str = "pass") -> Example:
    """A behaviour the requirement allows: the reference (pass), or ``outcome`` "deviation" for one
    that differs as the profile documents, "unsupported" for a clean refusal."""
    return Example(case, f"{name}-{profile.id}-{qt}", obs, queue_type=qt, profile=profile, outcome=outcome)


def dev(case: str, name: str, obs: dict[str, Any], qt: str | None, profile: Profile) -> Example:
    """Differs from the requirement's reference exactly as the profile documents: a deviation."""
    return ok(case, name, obs, qt, profile, "deviation")


def bad(case: str, name: str, obs: dict[str, Any], qt: str | None = "classic", profile: Profile = RABBIT,
        shows: str | None = None, bug: str | None = None) -> Example:
    """A violation; ``bug`` marks one the case's verdict wrongly passes (strict xfail: the bug stays visible)."""
    return Example(case, f"{name}-{profile.id}-{qt}", obs, queue_type=qt, profile=profile,
                   marks=(pytest.mark.xfail(strict=True, reason=f"verdict bug: {bug}"),) if bug else (), shows=shows or None)


def judged(case: str, obs: dict[str, Any], profile: Profile, qt: str | None = "classic") -> Any:
    """The verdict as a run records it: the case's verdict with the profile applied."""
    c = CASES[case]()
    return apply_profile(c.verdict(obs, profile, qt), c.requirement, qt, profile)


# -- the contract ---------------------------------------------------------------------------------


def assert_passes(ex: Example) -> None:
    """The contract for a compliant observation, shared by every verdict-test module."""
    v = ex.judge()
    assert v.outcome.value == ex.outcome, v.render(CASES[ex.case].requirement, "?")
    assert v.expected and v.observed
    if v.outcome is Outcome.DEVIATION:
        assert v.reason and v.citation, "a deviation says why the broker differs and cites where it is documented"
    if v.outcome is Outcome.UNSUPPORTED:
        assert v.unsupported_kind, "an unsupported verdict names its kind"


def assert_fails(ex: Example, shows: str | None = None) -> None:
    """The contract for a violation: FAIL, saying what was expected and what was seen (``shows``, by
    default the example's own: a fragment the observed text must contain, so it failed for this
    violation and no other)."""
    shows = ex.shows if shows is None else shows
    v = ex.judge()
    assert v.outcome is Outcome.FAIL, v.render(CASES[ex.case].requirement, "?")
    assert v.expected.strip(), "a failing verdict must say what it expected"
    assert v.observed.strip(), "a failing verdict must say what it observed"
    assert v.expected != v.observed, "a failing verdict must tell expected and observed apart"
    assert v.vendor == "fail"
    if shows is not None:
        assert shows in v.observed, f"failed for another reason than the violation:\n{v.render(CASES[ex.case].requirement, '?')}"


def verdict_tests(good: Sequence[Example], violations: Sequence[Example]) -> tuple[Callable[..., None], Callable[..., None]]:
    """An area module's two table tests, bound in it as ``test_compliant_observation_passes,
    test_violation_fails = verdict_tests(GOOD, VIOLATIONS)``: every compliant observation passes,
    every violation fails."""

    @pytest.mark.parametrize("ex", [e.param() for e in good])
    def test_compliant_observation_passes(ex: Example) -> None:
        assert_passes(ex)

    @pytest.mark.parametrize("ex", [e.param() for e in violations])
    def test_violation_fails(ex: Example) -> None:
        assert_fails(ex)

    return test_compliant_observation_passes, test_violation_fails
