"""A run's lifecycle: the target launched (or attached) and probed, the profile chosen, preflight run,
run.json written; the xdist hand-off to workers; the target stopped and run.json finished at the end.

The controller process launches the target (if a launcher was named) and hands its URL to xdist
workers; every process probes the server once to learn product and version and pick the profile.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

import conformance
from conformance.runner import allure
from conformance.api import Adapter, adapter_for
from conformance.catalogue.requirements import catalogue_digest
from conformance.errors import ConformanceError, NoReply, OperationTimeout, TargetError, UsageError
from conformance.runner import preflight
from conformance.catalogue import packs
from conformance.catalogue.packs import Pack
from conformance.runner import judged
from conformance.runner import records
from conformance.runner import hangs
from conformance.nemesis.cluster import merge_mutation_stats, mutated_node_urls
from conformance.catalogue.profiles import select_profile
from conformance.nemesis.proxy_isolated import IsolatedFaultProxy
from conformance.runner.results import ResultsWriter, read_results, read_run
from conformance.secrets import SecretUrl, register_url, scrub
from conformance.targets import Target, attach_target, make_target, redact
from conformance.runner.options import PYTEST_OPTIONS, check
from conformance.runner.state import STATE_KEY, RunState, state_of


def option_values(config: pytest.Config) -> dict[str, Any]:
    return {o.name: config.getoption(o.long) for o in PYTEST_OPTIONS}


def check_options(config: pytest.Config, adapter: str | None = None) -> list[Pack]:
    """Every option is validated before anything is launched: bad input costs no node boot. Returns
    the requirement packs the options (and ``adapter``, once known) select, activated."""
    try:
        return check(option_values(config), adapter)
    except UsageError as exc:
        raise pytest.UsageError(str(exc)) from None


def _abort_record(config: pytest.Config, cause: str) -> None:
    """run.json for a run that could not start: it says so, with the cause, instead of nothing."""
    out = config.getoption("--results-dir")
    if out and getattr(config, "workerinput", None) is None:
        ResultsWriter(Path(out)).write_run({"status": f"aborted: {cause}", "suite_version": conformance.__version__,
                                            "catalogue_digest": catalogue_digest(), "finished_at": time.time()})


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "conformance: a requirement-traced conformance case")
    spec = config.getoption("--target")
    if config.getoption("--target-env"):
        spec = os.environ.get(config.getoption("--target-env")) or spec
    if not spec:
        return
    register_url(spec)
    allure.install_scrubbing_writer()
    try:  # the options, the requirement packs they select included, before anything is launched
        check_options(config)
    except pytest.UsageError as exc:
        _abort_record(config, str(exc))
        raise
    worker = getattr(config, "workerinput", None)
    target: Target | None = None
    mutation_proxy: IsolatedFaultProxy | None = None
    url = SecretUrl(spec)
    try:
        if worker is not None:
            url, run_id = SecretUrl(worker["conformance_url"]), worker["conformance_run_id"]
            if worker.get("conformance_target"):
                target = attach_target(json.loads(worker["conformance_target"]))
        else:
            handle = config.getoption("--attach-target")
            results_dir = config.getoption("--results-dir")  # a launched target may keep its log there
            target = attach_target(json.loads(handle)) if handle else make_target(spec, **({"run_dir": results_dir} if results_dir else {}))
            if not handle:
                target.start()
            url, run_id = SecretUrl(target.url), uuid.uuid4().hex[:12]
            mutation = config.getoption("--mutation")
            if mutation:
                mutation_proxy = IsolatedFaultProxy.for_url(url, mutation=mutation).start()
                url = SecretUrl(mutation_proxy.url(url))
        scheme = urlsplit(url).scheme
        adapter = adapter_for(scheme, config.getoption("--adapter"))()
        loaded = check_options(config, packs.adapter_entry_name(type(adapter)))  # the packs its package ships too
        config.args.extend(str(p.cases_dir) for p in loaded if str(p.cases_dir) not in config.args)  # packs' cases
        server = _probe_server(adapter, url)
        profile = select_profile(server.product, server.version, adapter.protocol, config.getoption("--profile"))
    except Exception as exc:  # noqa: BLE001 - whatever broke, the user gets one line, the node is stopped
        if mutation_proxy is not None:
            mutation_proxy.close()
        if target is not None and not config.getoption("--attach-target"):
            target.stop()
        message = scrub(_one_line(exc))
        _abort_record(config, message)
        raise pytest.UsageError(message) from None
    out = config.getoption("--results-dir")
    state = RunState(
        target=target,
        url=url,
        adapter=adapter,
        profile=profile,
        server={"product": server.product, "version": server.version},
        run_id=run_id,
        writer=ResultsWriter(Path(out)) if out else None,
        keep_history=bool(config.getoption("--keep-history")),
        mutation_proxy=mutation_proxy,
        attached=bool(config.getoption("--attach-target")),
        mutation=config.getoption("--mutation"),
    )
    # --- preflight: the controller runs it once; workers get its records --------------------------
    if worker is not None:
        state.preflight = preflight.from_records(json.loads(worker.get("conformance_preflight") or "[]"))
    else:
        try:
            state.preflight = preflight.run_preflight(adapter, url)
        except Exception as exc:  # noqa: BLE001 - the suite's own breakage: one line, nothing left running
            if mutation_proxy is not None:
                mutation_proxy.close()
            if target is not None and not state.attached:
                target.stop()
            message = scrub(f"preflight could not run: {_one_line(exc)}")
            _abort_record(config, message)
            raise pytest.UsageError(message) from None
        print(scrub(preflight.render(state.preflight)))
    _cluster_urls(state, config, worker)
    config.stash[STATE_KEY] = state
    if worker is None:
        allure.environment(getattr(config.option, "allure_report_dir", None), records.run_fields(state))
    if worker is None and state.writer:
        state.writer.write_run(
            {
                **records.run_fields(state),
                "started_at": time.time(),
                "host": platform.node(),
                "python": platform.python_version(),
                "target_facts": target.facts if target else {},
                "profile_path": profile.path,
                "repeat": config.getoption("--repeat"),
                # "running" until the run ends: a run.json that still says so belongs to a killed run
                "status": "running",
                "preflight": [c.as_record() for c in state.preflight],
            }
        )


def _one_line(exc: BaseException) -> str:
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
        raise TargetError(f"target {redact(url)} did not answer as {adapter.protocol} ({_one_line(exc)})") from None
    except ConformanceError:
        raise
    except Exception as exc:  # noqa: BLE001 - a client library's surprise on a port that is not a broker
        raise TargetError(f"target {redact(url)} did not answer as {adapter.protocol} ({_one_line(exc)})") from None
    server = conn.server
    conn.close()
    return server


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist: workers reuse the controller's target and run id instead of launching their own."""
    state = state_of(node.config)
    if state:
        node.workerinput["conformance_url"] = str.__str__(state.url)  # execnet sends plain str only; the worker wraps it again
        node.workerinput["conformance_run_id"] = state.run_id
        handle = state.target.handle() if state.target is not None else None
        node.workerinput["conformance_target"] = json.dumps(handle) if handle else ""
        node.workerinput["conformance_preflight"] = json.dumps([c.as_record() for c in state.preflight])
        node.workerinput["conformance_node_urls"] = json.dumps(state.node_urls or {})


def pytest_unconfigure(config: pytest.Config) -> None:
    state = state_of(config)
    if state is None or getattr(config, "workerinput", None) is not None:
        return
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


def pytest_internalerror(excrepr: Any, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
    """An error in the suite itself ends the run: run.json says ``aborted`` with the cause."""
    config = _CONFIG.get("config")
    state = state_of(config) if config is not None else None
    if state is not None and state.abort_cause is None:
        state.abort_cause = scrub(f"internal error: {_one_line(excinfo.value)}")


def pytest_keyboard_interrupt(excinfo: pytest.ExceptionInfo[BaseException]) -> None:
    config = _CONFIG.get("config")
    state = state_of(config) if config is not None else None
    if state is not None and state.abort_cause is None:
        state.abort_cause = "interrupted"


def pytest_sessionstart(session: pytest.Session) -> None:
    _CONFIG["config"] = session.config


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    state = state_of(session.config)
    if state is not None and state.abort_cause is None and exitstatus in (pytest.ExitCode.INTERRUPTED, pytest.ExitCode.INTERNAL_ERROR):
        state.abort_cause = "interrupted" if exitstatus == pytest.ExitCode.INTERRUPTED else "internal error"


#: The hooks above that pytest calls without a config (internal error, interrupt) find it here.
_CONFIG: dict[str, pytest.Config] = {}


def _cluster_urls(state: RunState, config: pytest.Config, worker: Any) -> None:
    """A cluster target's node URLs (the controller's, handed to workers), each behind the run's
    mutation proxy when there is one."""
    if worker is not None:
        state.node_urls = json.loads(worker.get("conformance_node_urls") or "{}") or None
        return
    node_urls = getattr(state.target, "node_urls", None)
    if not callable(node_urls):
        return
    urls: dict[str, str] = node_urls()
    mutation = config.getoption("--mutation")
    if not mutation or state.mutation_proxy is None:
        state.node_urls = urls
        return
    assert state.target is not None
    state.node_urls, state.node_proxies = mutated_node_urls(
        urls, (state.target.url, str.__str__(state.url)),
        lambda u: IsolatedFaultProxy.for_url(SecretUrl(u), mutation=mutation).start())

