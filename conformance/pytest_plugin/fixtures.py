"""The parameters of a case (queue type, variant, repetition) and the ``conformance_case`` fixture
that hands the case to the runner."""

from __future__ import annotations

from typing import Callable, Iterator

import pytest

from conformance.kit.case import Case
from conformance.runner.case_runner import run_case
from conformance.runner.records import ATTEMPT_ID
from conformance.runner.state import state_of


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    cls = metafunc.cls
    if cls is None or not issubclass(cls, Case) or "conformance_case" not in metafunc.fixturenames:
        return
    state = state_of(metafunc.config)
    qts: tuple[str | None, ...]
    if cls.queue_types is not None:
        qts = cls.queue_types
    elif state is not None:
        qts = tuple(n for n, q in state.profile.queue_types.items() if q.runs) or (None,)
    else:
        qts = ("classic", "quorum")
    metafunc.parametrize("queue_type", qts, ids=[q or "default" for q in qts])
    if cls.variants:
        metafunc.parametrize("variant", cls.variants)
    repeat = metafunc.config.getoption("--repeat", 1) or 1
    if repeat > 1:
        metafunc.parametrize("conformance_attempt", range(1, repeat + 1), ids=[f"{ATTEMPT_ID}{n}" for n in range(1, repeat + 1)])


@pytest.fixture
def queue_type() -> str | None:
    return None


@pytest.fixture
def variant() -> str | None:
    return None


@pytest.fixture
def conformance_attempt() -> int:
    return 1


@pytest.fixture
def conformance_case(request: pytest.FixtureRequest, queue_type: str | None, variant: str | None,
                     conformance_attempt: int) -> Iterator[Callable[[Case], None]]:
    state = state_of(request.config)
    if state is None:
        pytest.skip("no --target given: conformance cases need a broker")

    def run(case: Case) -> None:
        __tracebackhide__ = True
        run_case(request.node, state, case, queue_type, variant)

    yield run

