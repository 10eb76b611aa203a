"""A run's lifecycle: the target launched (or attached) and probed, the profile chosen, preflight run,
run.json written; what the controller hands its workers; the target stopped and run.json finished at the end.

The controller process launches the target (if a launcher was named) and hands its URL to the
workers; every process probes the server once to learn product and version and pick the profile.
The pytest plugin calls these from its session hooks (conformance.pytest_plugin.session) with the
run's option values (conformance.runner.options) and, in a worker, what the controller handed it.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import urlsplit

import conformance
from conformance.api import Adapter, adapter_for
from conformance.catalogue import packs
from conformance.catalogue.capabilities import server_capabilities
from conformance.catalogue.packs import Pack
from conformance.catalogue.profiles import profile_data, profile_on
from conformance.catalogue.requirements import catalogue_digest
from conformance.errors import ConformanceError, NoReply, OperationTimeout, TargetError, UsageError
from conformance.nemesis.cluster import merge_mutation_stats, mutated_node_urls
from conformance.nemesis.proxy_isolated import IsolatedFaultProxy
from conformance.runner import allure, hangs, judged, posed, preflight, records
from conformance.runner.options import check
from conformance.runner.results import ResultsWriter, read_results, read_run
from conformance.runner.state import RunState
from conformance.secrets import SecretUrl, register_url, scrub
from conformance.targets import Target, attach_target, make_target, redact


def abort_record(results_dir: str | None, cause: str) -> None:
    """run.json for a run that could not start: it says so, with the cause, instead of nothing.
    The controller's to write (a worker never gets this far without it)."""
    if results_dir:
        ResultsWriter(Path(results_dir)).write_run({"status": f"aborted: {cause}", "suite_version": conformance.__version__,
                                                    "catalogue_digest": catalogue_digest(), "finished_at": time.time()})


def start(values: Mapping[str, Any], worker: Mapping[str, Any] | None = None) -> tuple[RunState, list[Pack]] | None:
    """Start a run: every option checked (the requirement packs they select included) before
    anything is launched, the target launched or attached, probed, its profile chosen, preflight run
    (by the controller; a worker gets its records in ``worker``, what :func:`worker_input` gave it).

    ``values`` maps the option table's names to the run's values. Returns the run's state and the
    requirement packs it loaded (their cases join the run), or None without a target. Whatever stops
    the run from starting is a :class:`UsageError` of one line; the controller's run.json then says
    ``aborted`` with it (:func:`abort_record`), and nothing the run launched is left running."""
    spec = values.get("target")
    if values.get("target_env"):
        spec = os.environ.get(values["target_env"]) or spec
    if not spec:
        return None
    register_url(spec)
    allure.install_scrubbing_writer()
    out = values.get("results_dir")
    try:  # the options, the requirement packs they select included, before anything is launched
        check(values)
    except UsageError as exc:
        if worker is None:
            abort_record(out, str(exc))
        raise
    target: Target | None = None
    mutation_proxy: IsolatedFaultProxy | None = None
    url = SecretUrl(spec)
    try:
        if worker is not None:
            url, run_id = SecretUrl(worker["conformance_url"]), worker["conformance_run_id"]
            if worker.get("conformance_target"):
                target = attach_target(json.loads(worker["conformance_target"]))
        else:
            handle = values.get("attach_target")
            target = attach_target(json.loads(handle)) if handle else make_target(spec, **({"run_dir": out} if out else {}))  # a launched target may keep its log there
            if not handle:
                target.start()
            url, run_id = SecretUrl(target.url), uuid.uuid4().hex[:12]
            mutation = values.get("mutation")
            if mutation:
                mutation_proxy = IsolatedFaultProxy.for_url(url, mutation=mutation).start()
                url = SecretUrl(mutation_proxy.url(url))
        scheme = urlsplit(url).scheme
        adapter = adapter_for(scheme, values.get("adapter"), getattr(target, "protocol", None))()
        loaded = check(values, packs.adapter_entry_name(type(adapter)))  # the packs its package ships too
        server = _probe_server(adapter, url)
        profile = profile_on(target, server.product, server.version, adapter.protocol, values.get("profile"))
        offered = server_capabilities(adapter, server)
        not_posed = posed.undeclarable(adapter, server, profile)
    except Exception as exc:  # noqa: BLE001 - whatever broke, the user gets one line, the node is stopped
        _give_up(scrub(one_line(exc)), out, worker, target, mutation_proxy, bool(values.get("attach_target")))
    state = RunState(
        target=target,
        url=url,
        adapter=adapter,
        profile=profile,
        server={"product": server.product, "version": server.version},
        run_id=run_id,
        writer=ResultsWriter(Path(out)) if out else None,
        keep_history=bool(values.get("keep_history")),
        mutation_proxy=mutation_proxy,
        attached=bool(values.get("attach_target")),
        mutation=values.get("mutation"),
        target_name=(worker or {}).get("conformance_target_name") or None,
        capabilities=offered,
        not_posed=not_posed,
    )
    # --- preflight: the controller runs it once; workers get its records --------------------------
    if worker is not None:
        state.preflight = preflight.from_records(json.loads(worker.get("conformance_preflight") or "[]"))
    else:
        try:
            state.preflight = preflight.run_preflight(adapter, url)
        except Exception as exc:  # noqa: BLE001 - the suite's own breakage: one line, nothing left running
            _give_up(scrub(f"preflight could not run: {one_line(exc)}"), out, worker, target, mutation_proxy, state.attached)
        print(scrub(preflight.render(state.preflight)))
    _cluster_urls(state, values.get("mutation"), worker)
    return state, loaded


def _give_up(message: str, out: str | None, worker: Mapping[str, Any] | None, target: Target | None,
             mutation_proxy: IsolatedFaultProxy | None, attached: bool) -> NoReturn:
    """The run cannot start: nothing it launched is left running, the controller's run.json says
    ``aborted`` with ``message``, and the user gets that one line."""
    if mutation_proxy is not None:
        mutation_proxy.close()
    if target is not None and not attached:
        target.stop()
    if worker is None:
        abort_record(out, message)
    raise UsageError(message) from None


def record_start(state: RunState, values: Mapping[str, Any], allure_dir: str | None) -> None:
    """The controller's record of the run's start: Allure's environment, and run.json saying
    ``running`` until :func:`finish` (a run.json that still says so belongs to a killed run)."""
    allure.environment(allure_dir, records.run_fields(state))
    if state.writer:
        state.writer.write_run(
            {
                **records.run_fields(state),
                "started_at": time.time(),
                "host": platform.node(),
                "python": platform.python_version(),
                "target_facts": state.target.facts if state.target else {},
                # what the target reports of itself that profile entries may hold on (when_target)
                "target_conditions": sorted(state.profile.target_conditions),
                "profile_path": state.profile.path,
                # the resolved profile itself: a gate across releases lists the entries two runs' profiles differ in
                "profile_data": profile_data(state.profile),
                "repeat": values.get("repeat"),
                "status": "running",
                "preflight": [c.as_record() for c in state.preflight],
                "not_posed": dict(state.not_posed),
            }
        )


def one_line(exc: BaseException) -> str:
    """A suite-made failure as one line: the suite's own errors speak for themselves."""
    if isinstance(exc, ConformanceError):
        text = str(exc)
    else:
        text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return " ".join(text.split()) or type(exc).__name__


def _probe_server(adapter: Adapter, url: str) -> Any:
    """Connect once to learn product and version; anything but a broker of the protocol is one line."""
    try:
        conn = adapter.connect(url, name="conformance probe")
    except (OperationTimeout, NoReply) as exc:  # a port that is not a broker, or a silent one
        raise TargetError(f"target {redact(url)} did not answer as {adapter.protocol} ({one_line(exc)})") from None
    except ConformanceError:
        raise
    except Exception as exc:  # noqa: BLE001 - a client library's surprise on a port that is not a broker
        raise TargetError(f"target {redact(url)} did not answer as {adapter.protocol} ({one_line(exc)})") from None
    server = conn.server
    conn.close()
    return server


def worker_input(state: RunState) -> dict[str, str]:
    """What the controller hands each worker, so workers reuse its target and run id instead of
    launching their own (plain strings: execnet sends nothing else; the worker wraps the URL again)."""
    handle = state.target.handle() if state.target is not None else None
    return {
        "conformance_url": str.__str__(state.url),
        "conformance_run_id": state.run_id,
        "conformance_target": json.dumps(handle) if handle else "",
        "conformance_target_name": state.target.name if state.target is not None else state.target_name or "",
        "conformance_preflight": json.dumps([c.as_record() for c in state.preflight]),
        "conformance_node_urls": json.dumps(state.node_urls or {}),
    }


def finish(state: RunState) -> None:
    """The controller's end of the run: run.json finished (counts, status, restarts), the broker lock
    and the shared record removed, proxies closed, a launched target stopped."""
    try:
        if state.writer:
            counts: dict[str, int] = {}
            for rec in read_results(state.writer.dir):
                if rec.get("run_id") == state.run_id:
                    counts[rec["verdict"]] = counts.get(rec["verdict"], 0) + 1
            status = f"aborted: {state.abort_cause}" if state.abort_cause else "finished"
            meta = {**records.run_fields(state), "finished_at": time.time(), "counts": counts, "status": status,
                    "judged": judged.summary(counts)}  # the score's base: error and blocked apart
            meta.update(hangs.run_record(state.health_path))  # restarts after a hang, and any end of the judging
            if state.dead_cause:
                meta["target_dead"] = state.dead_cause
            if state.mutation_proxy is not None:
                meta["mutation"] = merge_mutation_stats([p.mutation_stats() for p in [state.mutation_proxy, *state.node_proxies]])
            state.writer.write_run({**read_run(state.writer.dir), **meta})
    finally:
        for path in (state.lock_path, state.health_path):  # the broker lock and the shared record (workers are gone by now)
            with contextlib.suppress(OSError):
                os.unlink(path)
        if state.mutation_proxy is not None:
            state.mutation_proxy.close()
        for p in state.node_proxies:
            p.close()
        if state.target is not None and not state.attached:
            state.target.stop()


def _cluster_urls(state: RunState, mutation: str | None, worker: Mapping[str, Any] | None) -> None:
    """A cluster target's node URLs (the controller's, handed to workers), each behind the run's
    mutation proxy when there is one."""
    if worker is not None:
        state.node_urls = json.loads(worker.get("conformance_node_urls") or "{}") or None
        return
    node_urls = getattr(state.target, "node_urls", None)
    if not callable(node_urls):
        return
    urls: dict[str, str] = node_urls()
    if not mutation or state.mutation_proxy is None:
        state.node_urls = urls
        return
    assert state.target is not None
    state.node_urls, state.node_proxies = mutated_node_urls(
        urls, (state.target.url, str.__str__(state.url)),
        lambda u: IsolatedFaultProxy.for_url(SecretUrl(u), mutation=mutation).start())
