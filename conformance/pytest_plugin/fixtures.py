"""The parameters of a case (queue type, variant, repetition) and the ``conformance_case`` fixture
that hands the case to the runner (conformance.runner.case_runner) and reports how it ended."""

from __future__ import annotations

from typing import Callable, Iterator, NoReturn

import pytest

from conformance.catalogue.capabilities import adapter_capabilities, missing
from conformance.catalogue.configurations import cell_types
from conformance.kit.case import Case
from conformance.pytest_plugin.stash import DEADLINE, STASH_RESULT, planned, state_of
from conformance.runner.case_runner import CaseCall, Ended, run_case
from conformance.runner.deadline import Deadline
from conformance.runner.posed import why_not_posed
from conformance.runner.records import ATTEMPT_ID
from conformance.runner.shared_faults import PlannedCase


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
    if cls.configurations and configurable(state):
        qts = cell_types(qts, cls.configurations)
    if state is not None:  # only the cells this broker can have (conformance.runner.posed)
        qts = tuple(q for q in qts if why_not_posed(state, q) is None)
        if not qts:
            metafunc.parametrize("queue_type", [pytest.param(None, marks=pytest.mark.conformance_not_posed)], ids=["not-posed"])
            return
    metafunc.parametrize("queue_type", qts, ids=[q or "default" for q in qts])
    if cls.variants:
        metafunc.parametrize("variant", cls.variants)
    repeat = metafunc.config.getoption("--repeat", 1) or 1
    if repeat > 1:
        metafunc.parametrize("conformance_attempt", range(1, repeat + 1), ids=[f"{ATTEMPT_ID}{n}" for n in range(1, repeat + 1)])


def configurable(state: object) -> bool:
    """Queue configurations are declaration arguments: a run whose adapter cannot send them (AMQP
    1.0 and STOMP attach to a node by address) or whose broker's dialect lacks them gets no
    configured cells, rather than a column of cells that could never run. No run state (collecting
    the catalogue): every cell."""
    if state is None:
        return True
    offered = getattr(state, "capabilities", None)  # what the adapter offers against the run's server
    if offered is None:
        offered = adapter_capabilities(state.adapter)  # type: ignore[attr-defined]
    if offered is None:
        return True
    not_offered, lacked = missing(("queue.arguments",), offered, getattr(state.profile, "lacks", {}) or {})  # type: ignore[attr-defined]
    return not not_offered and not lacked


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
        item = request.node
        call = CaseCall(planned(item), deadline_of(item), item.config.getoption("--case-timeout"), lambda: following(item))
        ended = None
        try:
            run_case(call, state, case)
        except Ended as end:
            ended = end
        finally:
            if call.result is not None:
                item.stash[STASH_RESULT] = call.result
        if ended is not None:
            report_end(ended)

    yield run


def deadline_of(item: pytest.Item) -> Deadline:
    """The case's deadline: the one pytest_timeout_set_timer armed, else its ``timeout`` mark's,
    which the runner still checks after the scenario (pytest-timeout's thread method times it)."""
    armed = item.stash.get(DEADLINE, None)
    if armed is not None:
        return armed
    mark = item.get_closest_marker("timeout")
    value = None if mark is None else (mark.args[0] if mark.args else mark.kwargs.get("timeout"))
    return Deadline(float(value) if value is not None else None, pytest.fail)


def following(item: pytest.Item) -> list[PlannedCase]:
    """This case and the cases after it, in the session's order."""
    items = item.session.items
    return [planned(other) for other in items[items.index(item):]]


def report_end(end: Ended) -> NoReturn:
    """The runner's end of a case as pytest's outcome. It keeps what the runner was handling when
    it ended the case (pytest shows that chain in the report, as it did when the runner raised
    pytest's outcome itself)."""
    __tracebackhide__ = True
    try:
        if end.kind == "skip":
            pytest.skip(end.message)
        if end.kind == "xfail":
            pytest.xfail(end.message)
        pytest.fail(end.message, pytrace=False)
    except BaseException as exc:
        exc.__context__, exc.__suppress_context__ = end.__context__, end.__suppress_context__
        raise

