"""Which catalogue runs the self-test makes: a run (:class:`Run`), the self-test's options, the
requirements each mutation reaches on the clean run, each mutation's runs, and the second round."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from conformance.catalogue.requirements import catalogue
from conformance.nemesis.mutations import Expectation, Mutation

if TYPE_CHECKING:
    from conformance.targets import Target

#: Clean verdicts a mutation can turn into a kill (anything else is not a working check to prove).
PROVABLE = ("pass", "deviation")


@dataclass
class Run:
    """One catalogue run of the self-test: clean (probing) or through one mutation."""

    label: str
    mutation: str
    disruptive: str  # "exclude" or "only"
    requirements: list[str] | None = None
    records: list[dict[str, Any]] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    wall_s: float = 0.0
    returncode: int | None = None


def case_of(rec: dict[str, Any]) -> str:
    """A record's case: its case id, else requirement[queue type-variant]."""
    return str(rec.get("case_id") or f"{rec['requirement']}[{rec.get('queue_type')}-{rec.get('variant')}]")


@dataclass
class Options:
    target_url: str
    handle: dict[str, str] | None
    protocol: str
    out: Path
    adapter: str | None = None
    profile: str | None = None
    areas: list[str] = field(default_factory=list)
    mutations: list[str] = field(default_factory=list)
    workers: int = 2
    parallel: int = 2
    case_timeout: float = 30.0
    run_timeout_s: float = 900.0
    #: Leave out the cases that restart the broker (minutes each run); their mutations go out of scope.
    skip_restarts: bool = False
    #: "declared": each mutation first runs the cases of the requirements it is declared to break
    #: (breaks and may_break), then only the cases still unproven that it reaches; "reach": every
    #: case it reaches (a full collateral audit, about 7 times the case runs).
    scope: str = "declared"
    #: --pack options, passed on to every run (conformance.catalogue.packs: the runs load the same packs).
    packs: list[str] = field(default_factory=list)
    #: Makes (not starts) another target like the run's own: the runs that restart the broker go
    #: there, beside the others (conformance.nemesis.spare_node). None: they go after the others, here.
    second_target: "Callable[[], Target] | None" = None


def requirement_of(connection_name: str) -> str | None:
    """'conformance ACK-SINGLE-ONLY-TAG consumer' -> 'ACK-SINGLE-ONLY-TAG' (cases name their connections)."""
    parts = connection_name.split()
    if len(parts) >= 2 and parts[0] == "conformance" and parts[1] in catalogue():
        return parts[1]
    return None


def disruptive_requirements() -> set[str]:
    from conformance.cases import all_cases

    return {c.requirement for c in all_cases() if c.disrupts_broker}


def touched(clean: list[Run]) -> dict[str, set[str]]:
    """mutation name -> requirement ids whose connections carried a frame it would rewrite."""
    out: dict[str, set[str]] = {}
    for run in clean:
        probe = (run.meta.get("mutation") or {}).get("touches") or {}
        for name, conns in probe.items():
            reqs = {r for r in map(requirement_of, conns) if r}
            out.setdefault(name, set()).update(reqs)
    return out


def plan_runs(opts: Options, mutations: dict[str, Mutation], declared: dict[str, Expectation], restarts: set[str],
               reach: dict[str, set[str]], clean_records: list[dict[str, Any]]) -> tuple[list[Run], list[Run], dict[str, list[str]], list[str]]:
    """Which runs each mutation gets: (plain runs, restart runs, scope "declared"'s rest for the
    second round, mutations out of scope). Removes the out-of-scope ones from ``mutations``."""
    provable = {r["requirement"] for r in clean_records if r["verdict"] in PROVABLE}
    plans: list[Run] = []
    restart_plans: list[Run] = []
    rest: dict[str, list[str]] = {}  # scope "declared": requirements a mutation reaches but is not meant to break
    out_of_scope: list[str] = []
    for spec, m in list(mutations.items()):
        exp = declared.get(spec) or declared.get(m.name)
        if exp is not None and not set(exp.breaks) & provable:
            out_of_scope.append(spec)  # nothing it is meant to break ran here (an area left out, or unsupported)
            del mutations[spec]
            continue
        reqs = sorted(reach.get(m.name, set()) & provable)
        plain = [r for r in reqs if r not in restarts]
        if opts.scope == "declared" and exp is not None:
            meant = set(exp.breaks) | set(exp.may_break)
            rest[spec] = [r for r in plain if r not in meant]
            plain = [r for r in plain if r in meant]
        if plain:
            plans.append(Run(spec, spec, "exclude", plain))
        with_restart = [r for r in reqs if r in restarts and exp is not None and r in exp.breaks]
        if with_restart and opts.handle:
            restart_plans.append(Run(spec + "+restarts", spec, "only", with_restart))
    return plans, restart_plans, rest, out_of_scope


def second_round(clean_records: list[dict[str, Any]], done: list[Run], rest: dict[str, list[str]]) -> list[Run]:
    """Runs for the cases the first round left unproven: each mutation that reaches one of their
    requirements without being declared to break it runs that requirement's cases. A kill there
    proves the case fails under some violation, as in scope "reach", at a fraction of the runs."""
    provable = {case_of(r) for r in clean_records if r["verdict"] in PROVABLE}
    killed = {case_of(rec) for run in done for rec in run.records if rec["verdict"] == "fail"}
    open_reqs = {r["requirement"] for r in clean_records if case_of(r) in provable - killed}
    runs = []
    for spec, reqs in rest.items():
        wanted = [r for r in reqs if r in open_reqs]
        if wanted:
            runs.append(Run(spec + "+rest", spec, "exclude", wanted))
    return runs

