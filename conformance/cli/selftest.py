"""The suite's self-test: run the catalogue clean and through each protocol mutation, build a kill matrix.

Unit tests of verdicts prove the judging; they do not prove that a scenario provokes and observes
the behaviour. Running the catalogue against a broker made wrong in one known way does: the cases
of the violated requirement must fail (a *kill*). The matrix shows mutations no case caught (blind
spots), cases no mutation failed (unproven checks), cases failing without any mutation (false
alarms), and mutations caught by the wrong requirements (checked against ``expectations.yaml``).

How it runs: one target for the whole self-test. The clean run goes through a probing proxy that
rewrites nothing and records, per case, which operators would have rewritten one of its frames;
each mutation then runs only the cases it can touch (a case whose frames a mutation never rewrites
sees an unchanged broker). Mutation runs go in parallel (cases use their own queues); cases that
restart the broker run apart from them, one run after another, and under a mutation only when the
mutation is declared to break their requirement. Within such a run the runner shares the faults
(conformance.runner.shared_faults): one restart and one kill serve all its cases. Where the target can be
launched twice, those runs go on a second node beside the others (conformance.nemesis.spare_node).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from conformance.catalogue.requirements import catalogue
from conformance.errors import UsageError
from conformance.nemesis.mutations import Expectation, Mutation, available, expectations, make
from conformance.nemesis.spare_node import SpareNode
from conformance.runner.results import read_results, read_run

if TYPE_CHECKING:
    from conformance.runner.options import Option
    from conformance.runner.progress import StepProgress
    from conformance.targets import Target

SCHEMA = "conformance.killmatrix/1"
KILLMATRIX_FILE = "killmatrix.json"
#: Clean verdicts a mutation can turn into a kill (anything else is not a working check to prove).
PROVABLE = ("pass", "deviation")
RESTART_CASE_TIMEOUT_S = 90.0


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


def workers_for(opts: Options, run: Run) -> int:
    """xdist workers for one run: ``opts.workers`` for the clean runs (the whole catalogue), one for a
    mutation run. Mutation runs already go ``opts.parallel`` at once, and most hold a few cases: two
    worker processes per run cost more start-up than they save (a 2-case run took 40 s with them)."""
    return opts.workers if run.mutation == "probe" else 1


def _pytest_argv(opts: Options, run: Run, out: Path, env: dict[str, str] | None = None) -> list[str]:
    from conformance.cli.run import pytest_args

    ns = argparse.Namespace(
        target=opts.target_url, adapter=opts.adapter, profile=opts.profile, requirement=run.requirements,
        area=None if run.requirements else (opts.areas or None), workers=workers_for(opts, run),
        # the first case of a shared fault prepares every case and takes the fault (a restart on a
        # busy machine: up to 10 s); a quorum queue's recovery window is 15 s
        case_timeout=max(opts.case_timeout, RESTART_CASE_TIMEOUT_S) if run.disruptive == "only" else opts.case_timeout,
        keep_history=False, verbose=False, mutation=run.mutation, pack=opts.packs or None,
        disruptive=run.disruptive, attach_target=json.dumps(opts.handle) if opts.handle else None,
    )
    return pytest_args(ns, out, env)


def execute(opts: Options, run: Run) -> Run:
    """Run the catalogue in a child process (a crash there loses nothing here); read what it decided."""
    out = opts.out / "runs" / run.label.replace(":", "=")
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    started = time.monotonic()
    env = dict(os.environ)  # the child's own: runs against two nodes go at once (the restart lane)
    with open(out / "pytest.log", "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "pytest", *_pytest_argv(opts, run, out, env)], stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=env)
        try:
            run.returncode = proc.wait(opts.run_timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            run.returncode = proc.wait()
            (out / "pytest.log").open("a").write(f"\nselftest: run killed after {opts.run_timeout_s:.0f}s\n")
    run.wall_s = time.monotonic() - started
    run.meta = read_run(out)
    run.records = list(read_results(out))
    return run


def touched(clean: list[Run]) -> dict[str, set[str]]:
    """mutation name -> requirement ids whose connections carried a frame it would rewrite."""
    out: dict[str, set[str]] = {}
    for run in clean:
        probe = (run.meta.get("mutation") or {}).get("touches") or {}
        for name, conns in probe.items():
            reqs = {r for r in map(requirement_of, conns) if r}
            out.setdefault(name, set()).update(reqs)
    return out


def selftest(opts: Options, say: Callable[[str], None] = print, progress: "StepProgress | None" = None) -> dict[str, Any]:
    """Run everything and return the kill matrix (also written to ``opts.out``).

    ``progress`` learns each catalogue run as it starts and ends, and the kills so far:
    a self-test takes minutes, and a line only when a mutation finishes left a person guessing."""
    track = progress or _NoProgress()
    started = time.monotonic()
    declared = expectations()
    specs = opts.mutations or [m.name for m in available(opts.protocol)]
    mutations: dict[str, Mutation] = {s: make(s) for s in specs}
    wrong = [s for s, m in mutations.items() if m.protocol != opts.protocol]
    if wrong:
        raise UsageError(f"mutation(s) {', '.join(wrong)} rewrite {mutations[wrong[0]].protocol}, the target is spoken to over {opts.protocol}")
    restarts = disruptive_requirements()
    areas = set(opts.areas)
    wants_restarts = bool(restarts) and not opts.skip_restarts and (not areas or any(catalogue()[r].area in areas for r in restarts))

    # A second node only pays when there are plain runs to overlap with: an area of restart cases
    # only (failover, on a three-node cluster) would wait for a second cluster to boot for nothing.
    plain_selected = any(rid not in restarts and (not areas or req.area in areas) for rid, req in catalogue().items())
    spare = SpareNode(opts.second_target) if wants_restarts and plain_selected and opts.handle and opts.second_target else None
    try:
        clean, done, reach, out_of_scope = _run_all(opts, mutations, declared, restarts, wants_restarts, spare, say, track)
    finally:
        if spare is not None:
            spare.stop()
    matrix = kill_matrix(clean, done, mutations, declared, reach, time.monotonic() - started)
    matrix["scope"] = opts.scope
    matrix["out_of_scope"] = out_of_scope
    matrix["restarts"] = "skipped" if not wants_restarts else "run"
    write(opts.out, matrix)
    return matrix


def _run_all(opts: Options, mutations: dict[str, Mutation], declared: dict[str, Expectation], restarts: set[str], wants_restarts: bool,
             spare: SpareNode | None, say: Callable[[str], None], track: Any) -> tuple[list[Run], list[Run], dict[str, set[str]], list[str]]:
    """The clean runs, the mutation runs and the second round, in two lanes when ``spare`` boots:
    the runs that restart the broker on the spare node, the others on the run's own node, at once.
    Returns (clean runs, mutation runs in plan order, reach, mutations out of scope);
    ``mutations`` loses the out-of-scope ones."""
    lane = ThreadPoolExecutor(max_workers=1, thread_name_prefix="selftest-restart-lane")
    side: dict[str, Options] = {}  # "opts" once the spare node answered: the restart lane's options

    def clean_restarts(o: Options) -> Run:
        track.begin("clean run of the restart cases")
        run = execute(o, Run("clean-restarts", "probe", "only"))
        track.finish("clean run of the restart cases", count=False)
        say(_line(run, 0, 0))
        return run

    def on_spare() -> Run | None:
        assert spare is not None
        node = spare.target()
        if node is None:
            say(f"selftest: no second node for the restart runs ({spare.error}): they go on this node after the others")
            return None
        side["opts"] = replace(opts, target_url=node.url, handle=node.handle(), second_target=None)
        return clean_restarts(side["opts"])

    try:
        say(f"selftest: clean run of the catalogue through a probing proxy ({opts.protocol})"
            + ("; the restart cases on a second node beside it" if spare is not None else ""))
        pending_clean = lane.submit(on_spare) if spare is not None else None
        track.begin("clean run through the probing proxy")
        clean = [execute(opts, Run("clean", "probe", "exclude"))]
        track.finish("clean run through the probing proxy", count=False)
        say(_line(clean[0], 0, 0))
        if wants_restarts and opts.handle:
            beside = pending_clean.result() if pending_clean is not None else None
            clean.append(beside if beside is not None else clean_restarts(opts))
        if not any(run.records for run in clean):  # an area of disruptive cases only (failover) has them all in the second run
            log = opts.out / "runs" / "clean" / "pytest.log"
            last = [line for line in log.read_text(errors="replace").splitlines() if line.strip()][-1:] if log.exists() else []
            raise UsageError(f"the clean run decided no case ({(last or ['no output'])[0].strip()}); see {log}")
        reach = touched(clean)
        clean_records = [r for run in clean for r in run.records]
        plans, restart_plans, rest, out_of_scope = _plan(opts, mutations, declared, restarts, reach, clean_records)
        total = len(plans) + len(restart_plans)
        say(f"selftest: {len(mutations)} mutations, {total} runs ({len(restart_plans)} with broker restarts, "
            + ("on the second node, beside the others)" if "opts" in side else "alone)")
            + (f"; out of scope here: {', '.join(out_of_scope)}" if out_of_scope else ""))
        done: list[Run] = []
        lock = threading.Lock()
        provable_cases = {_case(r) for r in clean_records if r["verdict"] in PROVABLE}
        kills = 0
        track.plan(total)

        def one(run: Run, o: Options = opts) -> Run:
            nonlocal kills
            track.begin(run.label)
            execute(o, run)
            with lock:
                done.append(run)
                kills += sum(1 for r in run.records if r["verdict"] == "fail" and _case(r) in provable_cases)
                track.finish(run.label, note=f"kills so far: {kills}")
                say(_line(run, len(done), total))
            return run

        beside_runs = lane.submit(lambda: [one(run, side["opts"]) for run in restart_plans]) if "opts" in side else None
        with ThreadPoolExecutor(max_workers=max(1, opts.parallel)) as pool:
            list(pool.map(one, plans))
        if beside_runs is None:
            for run in restart_plans:
                one(run)
        # Only plain runs decide the second round (its requirements are never restart ones, so a
        # restart run still going on the other node cannot change it).
        with lock:
            plain_done = [run for run in done if run.disruptive == "exclude"]
        second = second_round(clean_records, plain_done, rest)
        if second:
            total += len(second)
            track.plan(total)
            say(f"selftest: {len({r for run in second for r in run.requirements or []})} requirement(s) with a case no declared mutation "
                f"failed: {len(second)} more runs through the other mutations that reach them")
            with ThreadPoolExecutor(max_workers=max(1, opts.parallel)) as pool:
                list(pool.map(one, second))
        if beside_runs is not None:
            beside_runs.result()
    finally:
        lane.shutdown(wait=True, cancel_futures=True)
    position = {id(run): i for i, run in enumerate([*plans, *restart_plans, *second])}
    done.sort(key=lambda run: position[id(run)])  # the matrix as a serial run's, whichever run ended first
    return clean, done, reach, out_of_scope


def _plan(opts: Options, mutations: dict[str, Mutation], declared: dict[str, Expectation], restarts: set[str],
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
    provable = {_case(r) for r in clean_records if r["verdict"] in PROVABLE}
    killed = {_case(rec) for run in done for rec in run.records if rec["verdict"] == "fail"}
    open_reqs = {r["requirement"] for r in clean_records if _case(r) in provable - killed}
    runs = []
    for spec, reqs in rest.items():
        wanted = [r for r in reqs if r in open_reqs]
        if wanted:
            runs.append(Run(spec + "+rest", spec, "exclude", wanted))
    return runs


class _NoProgress:
    """What :func:`selftest` tells when nobody watches (a test, a script): nothing."""

    def begin(self, name: str) -> None: ...

    def finish(self, name: str, line: str | None = None, note: str | None = None, count: bool = True) -> None: ...

    def plan(self, total: int) -> None: ...


def _line(run: Run, n: int, total: int) -> str:
    verdicts: dict[str, int] = {}
    for r in run.records:
        verdicts[r["verdict"]] = verdicts.get(r["verdict"], 0) + 1
    counts = " ".join(f"{k}={v}" for k, v in sorted(verdicts.items()))
    head = f"[{n:>2}/{total}] " if total else ""
    rewritten = (run.meta.get("mutation") or {}).get("rewritten")
    frames = f", {rewritten} frames rewritten" if rewritten is not None else ""
    return f"  {head}{run.label}: {len(run.records)} cases ({counts}){frames}, {run.wall_s:.1f}s"


def _case(rec: dict[str, Any]) -> str:
    return str(rec.get("case_id") or f"{rec['requirement']}[{rec.get('queue_type')}-{rec.get('variant')}]")


def kill_matrix(clean: list[Run], runs: list[Run], mutations: dict[str, Mutation], declared: dict[str, Expectation],
                reach: dict[str, set[str]], wall_s: float) -> dict[str, Any]:
    """Judge the runs: kills, blind spots, unproven cases, false alarms, expectations met or missed."""
    meta = clean[0].meta if clean else {}
    cases: dict[str, dict[str, Any]] = {}
    for run in clean:
        for rec in run.records:
            cases[_case(rec)] = {"case": _case(rec), "requirement": rec["requirement"], "level": rec["level"], "area": rec["area"],
                                 "queue_type": rec.get("queue_type"), "variant": rec.get("variant"), "clean": rec["verdict"],
                                 "clean_observed": rec.get("observed", "") if rec["verdict"] not in PROVABLE else ""}
    provable = {c for c, info in cases.items() if info["clean"] in PROVABLE}
    kills: list[dict[str, Any]] = []
    cells: list[dict[str, Any]] = []
    by_mutation: dict[str, dict[str, Any]] = {}
    for spec, m in mutations.items():
        mine = [r for r in runs if r.mutation == spec]
        rewritten = sum(int((r.meta.get("mutation") or {}).get("rewritten") or 0) for r in mine)
        ran = [rec for r in mine for rec in r.records]
        killed = []
        for rec in ran:
            c = _case(rec)
            cells.append({"case": c, "mutation": spec, "verdict": rec["verdict"]})
            if rec["verdict"] == "fail" and c in provable:
                killed.append(c)
                kills.append({"case": c, "mutation": spec, "requirement": rec["requirement"], "verdict": "fail",
                              "observed": str(rec.get("observed", ""))[:400], "expected": str(rec.get("expected", ""))[:400]})
        exp = declared.get(spec) or declared.get(m.name)
        killed_reqs = sorted({cases[c]["requirement"] for c in killed})
        ran_reqs = {rec["requirement"] for rec in ran if _case(rec) in provable}
        breaks = list(exp.breaks) if exp else []
        by_mutation[spec] = {
            "name": spec, "description": m.description, "protocol": m.protocol, "breaks": breaks,
            "may_break": list(exp.may_break) if exp else [], "why": exp.why if exp else "",
            "frames_rewritten": rewritten, "cases_run": len(ran), "wall_s": round(sum(r.wall_s for r in mine), 2),
            "killed_requirements": killed_reqs,
            "errors": sorted({_case(rec) for rec in ran if rec["verdict"] == "error"}),
            "missed": sorted(set(breaks) & ran_reqs - set(killed_reqs)),
            "not_run": sorted(set(breaks) - ran_reqs),
            "collateral": sorted(set(killed_reqs) - set(breaks) - set(exp.may_break if exp else ())),
            "declared": exp is not None,
            "exercised": bool(ran) and rewritten > 0,
        }
    killers: dict[str, list[str]] = {}
    for k in kills:
        killers.setdefault(k["case"], []).append(k["mutation"])
    for c, info in cases.items():
        info["killed_by"] = sorted(killers.get(c, []))
    mut = by_mutation.values()
    blind = sorted(m["name"] for m in mut if m["exercised"] and not m["killed_requirements"])
    unexercised = sorted(m["name"] for m in mut if not m["exercised"])
    unproven = sorted(c for c in provable if c not in killers)
    # A documented deviation that no mutation changed: the broker never reaches the state the
    # requirement is about (e.g. a queue unavailable after kill -9), so nothing there can be proven.
    unproven_deviation = [c for c in unproven if cases[c]["clean"] == "deviation"]
    false_alarms = sorted(c for c, info in cases.items() if info["clean"] == "fail")
    clean_errors = sorted(c for c, info in cases.items() if info["clean"] == "error")
    misattributed = [{"mutation": m["name"], "expected": m["breaks"], "caught_by": m["killed_requirements"]}
                     for m in mut if m["killed_requirements"] and m["breaks"] and not set(m["breaks"]) & set(m["killed_requirements"])]
    missed = [{"mutation": m["name"], "requirements": m["missed"]} for m in mut if m["missed"]]
    undeclared = sorted(m["name"] for m in mut if not m["declared"])
    unproven_must = [c for c in unproven if cases[c]["level"] == "MUST" and c not in unproven_deviation]
    checks: list[tuple[object, str]] = [
        (unproven_must, f"{len(unproven_must)} MUST case(s) no mutation failed"),
        (blind, f"{len(blind)} mutation(s) no case caught: {', '.join(blind)}"),
        (misattributed, f"{len(misattributed)} mutation(s) caught only by requirements they were not declared to break"),
        (missed, "declared expectations not met: " + "; ".join(f"{m['mutation']} did not break {', '.join(m['requirements'])}" for m in missed)),
        (false_alarms, f"{len(false_alarms)} case(s) failed without any mutation"),
        (clean_errors, f"{len(clean_errors)} case(s) errored on the clean run"),
        (undeclared, f"mutation(s) without a declared expectation: {', '.join(undeclared)}"),
    ]
    problems = [text for found, text in checks if found]
    return {
        "schema": SCHEMA,
        "target": meta.get("target", ""), "product": meta.get("product", ""), "version": meta.get("version", ""),
        "protocol": meta.get("protocol", ""), "profile": meta.get("profile", ""), "adapter": meta.get("adapter", ""),
        "wall_s": round(wall_s, 1),
        "runs": [{"label": r.label, "mutation": r.mutation, "cases": len(r.records), "wall_s": round(r.wall_s, 2), "returncode": r.returncode}
                 for r in [*clean, *runs]],
        "mutations": list(by_mutation.values()),
        "cases": sorted(cases.values(), key=lambda c: c["case"]),
        "cells": cells,
        "kills": kills,
        "blind_spots": blind,
        "unexercised": unexercised,
        "unproven": unproven,
        "unproven_must": unproven_must,
        "unproven_deviation": unproven_deviation,
        "false_alarms": false_alarms,
        "clean_errors": clean_errors,
        "misattributed": misattributed,
        "missed": missed,
        "counts": {"cases": len(cases), "provable": len(provable), "mutations": len(by_mutation), "kills": len(kills),
                   "killed_cases": len(killers), "blind_spots": len(blind), "unexercised": len(unexercised),
                   "unproven": len(unproven), "unproven_must": len(unproven_must), "unproven_deviation": len(unproven_deviation),
                   "false_alarms": len(false_alarms)},
        "problems": problems,
        "ok": not problems,
        "reach": {k: sorted(v) for k, v in reach.items()},
    }


def write(out: Path, matrix: dict[str, Any]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    text = json.dumps(matrix, indent=1, sort_keys=True, default=str)
    (out / KILLMATRIX_FILE).write_text(text + "\n")
    clean = out / "runs" / "clean"
    if clean.is_dir():  # `conformance report <out>/runs/clean` shows the suite's strength beside the results
        (clean / KILLMATRIX_FILE).write_text(text + "\n")
    (out / "killmatrix.md").write_text(markdown(matrix))
    (out / "killmatrix.html").write_text(html(matrix))


def markdown(m: dict[str, Any]) -> str:
    c = m["counts"]
    lines = [
        f"# Self-test kill matrix: {m['product']} {m['version']} over {m['protocol']} (profile {m['profile']})",
        "",
        f"{c['cases']} cases ({c['provable']} provable: pass or documented deviation on the clean run), {c['mutations']} mutations, "
        f"{c['kills']} kills, {c['killed_cases']} cases killed, {c['blind_spots']} blind spots, {c['unexercised']} unexercised, "
        f"{c['unproven']} unproven ({c['unproven_must']} MUST, {c['unproven_deviation']} documented deviations), "
        f"{c['false_alarms']} false alarms; {m['wall_s']:.0f} s.",
        "",
        "**Result: " + ("OK**" if m["ok"] else "PROBLEMS**\n\n" + "\n".join(f"- {p}" for p in m["problems"])),
        "",
        "## Mutations",
        "",
        "| mutation | frames rewritten | cases run | killed requirements | declared to break | missed | errors |",
        "|---|---:|---:|---|---|---|---:|",
    ]
    for mu in m["mutations"]:
        lines.append(f"| `{mu['name']}` | {mu['frames_rewritten']} | {mu['cases_run']} | {', '.join(mu['killed_requirements']) or '—'} | "
                     f"{', '.join(mu['breaks']) or '(none declared)'} | {', '.join(mu['missed']) or ''} | {len(mu['errors'])} |")
    lines += ["", "## Cases", "", "| case | level | clean | killed by |", "|---|---|---|---|"]
    for case in m["cases"]:
        lines.append(f"| `{case['case']}` | {case['level']} | {case['clean']} | {', '.join(case['killed_by']) or ('**unproven**' if case['clean'] in PROVABLE else '')} |")
    return "\n".join(lines) + "\n"


def html(m: dict[str, Any]) -> str:
    """A single-file page (no scripts, no external assets): the cases × mutations grid at a glance."""
    from html import escape as e

    muts = [mu["name"] for mu in m["mutations"]]
    cell: dict[tuple[str, str], str] = {(c["case"], c["mutation"]): c["verdict"] for c in m["cells"]}
    killed = {(k["case"], k["mutation"]): k for k in m["kills"]}
    c = m["counts"]
    head = "".join(f'<th class="v" title="{e(mu["description"])}"><div>{i + 1}. {e(mu["name"])}</div></th>' for i, mu in enumerate(m["mutations"]))
    rows = []
    for case in m["cases"]:
        tds = []
        for name in muts:
            k = killed.get((case["case"], name))
            v = cell.get((case["case"], name))
            if k is not None:
                tds.append(f'<td class="k" title="{e(name)}: {e(k["observed"])}">&#x2715;</td>')
            elif v == "error":
                tds.append(f'<td class="e" title="{e(name)}: error">E</td>')
            elif v is not None:
                tds.append(f'<td class="s" title="{e(name)}: {e(v)}">&middot;</td>')
            else:
                tds.append("<td></td>")
        provable = case["clean"] in PROVABLE
        cls = "unproven" if provable and not case["killed_by"] else ("na" if not provable else "")
        rows.append(f'<tr class="{cls}"><th>{e(case["case"])}</th><td>{e(case["level"])}</td><td>{e(case["clean"])}</td>{"".join(tds)}</tr>')
    problems = "".join(f"<li>{e(p)}</li>" for p in m["problems"]) or "<li>none</li>"
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>Kill matrix {e(m['product'])} {e(m['version'])} {e(m['protocol'])}</title>
<style>body{{font:13px system-ui,sans-serif;margin:1em}}table{{border-collapse:collapse}}td,th{{border:1px solid #ddd;padding:1px 4px}}
th.v{{height:14em;white-space:nowrap;vertical-align:bottom}}th.v div{{transform:rotate(-60deg);width:1.4em;transform-origin:left bottom}}
td.k{{background:#c62828;color:#fff;text-align:center}}td.e{{background:#f9a825;text-align:center}}td.s{{color:#999;text-align:center}}
tr.unproven th{{background:#ffe082}}tr.na{{color:#aaa}}tbody th{{text-align:left;font-weight:normal;white-space:nowrap}}</style></head><body>
<h1>Self-test kill matrix: {e(m['product'])} {e(m['version'])} over {e(m['protocol'])}</h1>
<p>{c['cases']} cases ({c['provable']} provable), {c['mutations']} mutations, <b>{c['kills']} kills</b>, {c['blind_spots']} blind spots,
{c['unproven']} unproven ({c['unproven_must']} MUST), {c['false_alarms']} false alarms; {m['wall_s']:.0f} s. Result: <b>{'OK' if m['ok'] else 'PROBLEMS'}</b></p>
<ul>{problems}</ul>
<p>&#x2715;: the case failed under the mutation (hover: what it observed); E: error; &middot;: ran and passed; blank: the mutation never touched the case.
Yellow rows: provable but unproven. Grey rows: not provable on this target (unsupported, not applicable).</p>
<table><thead><tr><th>case</th><th>level</th><th>clean</th>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></body></html>
"""


# -- the command: ``conformance selftest`` -------------------------------------------------------------

def _command_options() -> tuple[Option, ...]:
    """What the self-test shares with ``conformance run`` (conformance.runner.options), with its own
    defaults where they differ, then its own options."""
    from conformance.runner.options import OPTIONS, Option

    return (
        *(OPTIONS[name] for name in ("target", "adapter", "profile")),
        OPTIONS["out"].but(help="output folder (default: runs/selftest-<timestamp>)"),
        OPTIONS["area"],
        OPTIONS["pack"],
        OPTIONS["mutation"].but(flags=("--mutation", "-m"), repeatable=True, help="only this mutation (repeatable; default: every mutation of the protocol)"),
        OPTIONS["workers"].but(default=2, help="worker processes of the clean runs (default 2; mutation runs use one each and go --parallel at once)"),
        Option("parallel", ("--parallel", "-p"), "mutation runs at once (default 2)", type=int, default=2, at_least=1, pytest=False),
        OPTIONS["case_timeout"].but(default=30.0, help="deadline per case in seconds (default 30)"),
        Option("scope", ("--scope",), "declared (default): each mutation runs the cases it is declared to break, then the cases still "
               "unproven that it reaches; reach: every case it reaches (a full collateral audit, several times longer)",
               choices=("declared", "reach"), default="declared", pytest=False),
        Option("skip_restarts", ("--skip-restarts",), "leave out the cases that restart or kill the broker (one restart and one kill per run, "
               "shared by its cases)", switch=True, pytest=False),
        Option("list", ("--list",), "list the mutations and what each is declared to break, then exit", switch=True, pytest=False),
    )


def add_parser(sub: Any) -> None:
    from conformance.runner.options import declare

    st = sub.add_parser("selftest", help="prove the catalogue can fail: run it clean and through each protocol mutation, write the kill matrix")
    declare(st.add_argument, _command_options())
    st.set_defaults(func=command)


def command(args: argparse.Namespace) -> int:
    from urllib.parse import urlsplit

    from rich.console import Console

    from conformance.api import adapter_for
    from conformance.catalogue import packs
    from conformance.cli.exit_codes import EXIT_FAIL, EXIT_OK
    from conformance.errors import ConformanceError
    from conformance.runner.options import check
    from conformance.runner.progress import Console as ProgressConsole
    from conformance.runner.progress import StepProgress
    from conformance.targets import make_target, redact

    console = Console(highlight=False)
    if args.list:
        declared = expectations()
        for m in available():
            exp = declared.get(m.name)
            console.print(f"[bold]{m.name}[/bold] ({m.protocol}): {m.description}", markup=True)
            console.print(f"    breaks: {', '.join(exp.breaks) if exp else '(not declared)'}", markup=False)
        return EXIT_OK
    options = _command_options()
    check(vars(args), options=options)  # a pack's area is a valid --area
    out = args.out or Path("runs") / time.strftime("selftest-%Y%m%dT%H%M%SZ", time.gmtime())
    try:
        target = make_target(args.target)
        target.start()
    except ConformanceError as exc:
        raise UsageError(str(exc).replace(args.target, redact(args.target))) from None
    try:
        adapter_cls = adapter_for(urlsplit(target.url).scheme, args.adapter)
        protocol = adapter_cls().protocol
        check(vars(args), packs.adapter_entry_name(adapter_cls), options)  # its package's packs, before expectations are read
        opts = Options(packs=args.pack or [], target_url=target.url, handle=target.handle(), protocol=protocol, out=out, adapter=args.adapter,
                       profile=args.profile, areas=args.area or [], mutations=args.mutation or [], workers=args.workers,
                       parallel=args.parallel, case_timeout=args.case_timeout, skip_restarts=args.skip_restarts, scope=args.scope,
                       # a launched target the suite restarts gets a twin for the restart runs
                       second_target=(lambda: make_target(args.target)) if target.can_restart and target.handle() else None)
        with StepProgress("selftest: mutation runs", ProgressConsole.for_stdout(verbose=False)) as progress:
            matrix = selftest(opts, say=progress.say, progress=progress)
    finally:
        target.stop()
    c = matrix["counts"]
    console.print(f"kill matrix: {c['cases']} cases ({c['provable']} provable), {c['mutations']} mutations, {c['kills']} kills, "
                  f"{c['blind_spots']} blind spots, {c['unexercised']} unexercised, {c['unproven']} unproven ({c['unproven_must']} MUST), "
                  f"{c['false_alarms']} false alarms, {matrix['wall_s']:.0f}s", markup=False)
    for problem in matrix["problems"]:
        console.print(f"PROBLEM: {problem}", markup=False)
    levels = {c["case"]: (c["level"], c["clean"]) for c in matrix["cases"]}
    for case in matrix["unproven"]:
        level, clean = levels[case]
        console.print(f"  unproven: {case} [{level}]" + (" (documented deviation on the clean run)" if clean == "deviation" else ""), markup=False)
    console.print(f"kill matrix: {out}/killmatrix.json  {out}/killmatrix.md", markup=False)
    return EXIT_OK if matrix["ok"] else EXIT_FAIL
