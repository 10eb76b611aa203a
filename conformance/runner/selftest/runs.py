"""Running the self-test: each catalogue run in a child process, the clean runs first, then the
mutation runs at once, the restart runs in their own lane (on a second node when one boots), then
the second round; the matrix judged (.judge) and written (.render) at the end."""

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
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable

from conformance.catalogue.requirements import catalogue
from conformance.errors import UsageError
from conformance.nemesis.mutations import Expectation, Mutation, available, expectations, make
from conformance.nemesis.spare_node import SpareNode
from conformance.runner.pytest_argv import pytest_args
from conformance.runner.results import read_results, read_run
from conformance.runner.selftest.judge import kill_matrix
from conformance.runner.selftest.plan import (
    PROVABLE,
    Options,
    Run,
    case_of,
    disruptive_requirements,
    plan_runs,
    second_round,
    touched,
)
from conformance.runner.selftest.render import write

if TYPE_CHECKING:
    from pathlib import Path

    from conformance.runner.progress import StepProgress

RESTART_CASE_TIMEOUT_S = 90.0


def workers_for(opts: Options, run: Run) -> int:
    """xdist workers for one run: ``opts.workers`` for the clean runs (the whole catalogue), one for a
    mutation run. Mutation runs already go ``opts.parallel`` at once, and most hold a few cases: two
    worker processes per run cost more start-up than they save (a 2-case run took 40 s with them)."""
    return opts.workers if run.mutation == "probe" else 1


def _pytest_argv(opts: Options, run: Run, out: Path, env: dict[str, str] | None = None) -> list[str]:
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


def selftest(opts: Options, say: Callable[[str], None] = print, progress: "StepProgress | None" = None) -> dict[str, Any]:
    """Run everything and return the kill matrix (also written to ``opts.out``).

    ``progress`` learns each catalogue run as it starts and ends, and the kills so far:
    a self-test takes minutes, and a line only when a mutation finishes left a person guessing."""
    track = progress or _NoProgress()
    started = time.monotonic()
    declared = expectations()
    specs = opts.mutations or [m.name for m in available(opts.protocol)]
    mutations: dict[str, Mutation] = {s: make(s) for s in specs}
    soak_only = [s for s, m in mutations.items() if m.scope != "selftest"]
    if soak_only:
        raise UsageError(f"mutation(s) {', '.join(soak_only)} are made for soaks (conformance soak --mutation, docs/soak.md), not the self-test")
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
        plans, restart_plans, rest, out_of_scope = plan_runs(opts, mutations, declared, restarts, reach, clean_records)
        total = len(plans) + len(restart_plans)
        say(f"selftest: {len(mutations)} mutations, {total} runs ({len(restart_plans)} with broker restarts, "
            + ("on the second node, beside the others)" if "opts" in side else "alone)")
            + (f"; out of scope here: {', '.join(out_of_scope)}" if out_of_scope else ""))
        done: list[Run] = []
        lock = threading.Lock()
        provable_cases = {case_of(r) for r in clean_records if r["verdict"] in PROVABLE}
        kills = 0
        track.plan(total)

        def one(run: Run, o: Options = opts) -> Run:
            nonlocal kills
            track.begin(run.label)
            execute(o, run)
            with lock:
                done.append(run)
                kills += sum(1 for r in run.records if r["verdict"] == "fail" and case_of(r) in provable_cases)
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
