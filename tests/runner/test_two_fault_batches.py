"""How the shared-fault runner places a case of two faults (a restart, then a kill -9), on planned
cases alone (no broker): the restart's batch prepares it out of its place in the kill group, the
kill's batch takes it again only once it awaits the kill, and alone it is in no batch."""

from __future__ import annotations

from conformance.cases import all_cases
from conformance.runner.shared_faults import PlannedCase, Prepared, _batch, fault_of, order, two_faults

CLASSES = {c.__name__: c for c in all_cases()}


def planned(name: str, variant: str | None = None) -> PlannedCase:
    return PlannedCase(f"{name}[{variant}]", CLASSES[name], "classic", variant)


def test_a_two_fault_case_joins_the_restart_batch_then_the_kill_batch() -> None:
    restart, kill, both = planned("TestConfirmedSurvives", "restart"), planned("TestConfirmedSurvives", "kill"), planned("TestSurvivesRestartThenKill")
    assert two_faults(both) == ("restart", "kill") and fault_of(both) == "kill" and two_faults(restart) is None
    run = order([both, kill, restart])
    assert run == [restart, both, kill] or run == [restart, kill, both]  # in the kill group, as its last fault says
    assert _batch(restart, run, "restart").members == [restart, both]
    assert _batch(kill, run[run.index(kill):], "kill").members == [kill]  # not prepared for its first fault: not yet
    both.prepared = Prepared(ctx=None, prepared={}, awaiting="kill")  # type: ignore[arg-type]
    restart.prepared = Prepared(ctx=None, prepared={})  # type: ignore[arg-type]
    assert set(map(id, _batch(kill, run[run.index(kill):] + [both], "kill").members)) == {id(kill), id(both)}
    both.prepared.awaiting = None  # had its second fault: in no later batch
    assert _batch(kill, [kill, both], "kill").members == [kill]
