"""pytest integration: target and profile options, the case runner fixture, result records, Allure.

Load with ``-p conformance.pytest_plugin`` (``conformance run`` does). The controller process
launches the target (if a launcher was named) and hands its URL to xdist workers; every process
probes the server once to learn product and version and pick the profile.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import platform
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator
from urllib.parse import urlsplit

import pytest

import conformance
from conformance import allure_results
from conformance.api import Adapter, adapter_for
from conformance.case import Case, CaseContext
from conformance.capabilities import applicability  # issue 19
from conformance.catalogue import LEVELS, Requirement, catalogue_digest, check_selection, requirement
from conformance.errors import ConformanceError, ConnectionLost, DeliveriesMissing, NoReply, OperationTimeout, TargetError, Unsupported, UsageError
from conformance.history import History
from conformance import deadline, liveness, preflight  # issue 16: preflight, health probe, missing deliveries
from conformance import packs  # issue 19 §2: requirement packs
from conformance import shared_fault  # issue 20: one broker fault shared by the disruptive cases
from conformance.cluster import merge_mutation_stats, mutated_node_urls
from conformance.mutations import alters, make as make_mutation
from conformance.profile import Profile, check_profile_option, profile_digest, select_profile
from conformance.proxy_isolated import IsolatedFaultProxy
from conformance.results import ResultsWriter, read_results, read_run
from conformance.secrets import SecretUrl, register_url, scrub
from conformance.targets import Target, attach_target, make_target, probe_tcp, redact
from conformance.verdict import Outcome, Verdict, apply_profile

STASH_RESULT = pytest.StashKey[dict[str, Any]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("conformance")
    g.addoption("--target", help="broker URL (amqp://user:pass@host:port/vhost) or a launcher name (e.g. rabbitmq-local)")
    g.addoption("--target-env", help="name of an environment variable holding the target URL (keeps a password out of the process list)")
    g.addoption("--adapter", help="adapter plugin to use (default: the one that speaks the URL's scheme)")
    g.addoption("--profile", help="profile id or YAML file (default: chosen from the server's product and version)")
    g.addoption("--results-dir", default=None, help="folder for run.json and results.jsonl")
    g.addoption("--case-timeout", type=float, default=60.0, help="deadline of each case in seconds (default 60)")
    g.addoption("--keep-history", action="store_true", help="keep the operation history and wire trace of passing cases too")
    g.addoption("--requirement", action="append", help="run only the cases of this requirement id (repeatable)")
    g.addoption("--area", action="append", help="run only the cases of this area (repeatable)")
    g.addoption("--exclude-area", action="append", help="leave out the cases of this area (repeatable)")
    g.addoption("--level", action="append", help="run only requirements of this level: MUST, SHOULD, MAY, EXTENSION (repeatable)")
    g.addoption("--queue-type", action="append", help="run only the cases of this queue type (repeatable; as the profile names them)")
    g.addoption("--repeat", type=int, default=1, help="run every selected case N times, each repetition its own record (attempt 1..N)")
    g.addoption("--mutation", help="run through a proxy that applies this protocol mutation (conformance.mutations), making the target faulty on purpose")
    g.addoption("--disruptive", choices=("include", "exclude", "only"), default="include",
                help="cases that restart or kill the broker: run them too (default), leave them out, or run only them")
    g.addoption("--pack", action="append", help="also load this requirement pack (conformance.packs); no:NAME leaves out one the adapter's package ships (repeatable)")
    g.addoption("--attach-target", help="JSON handle of a target launched by another process (conformance selftest); it is neither started nor stopped")


@dataclass
class RunState:
    target: Target | None
    #: A :class:`SecretUrl`: its repr never shows the password (tracebacks print this dataclass).
    url: SecretUrl
    adapter: Adapter
    profile: Profile
    server: dict[str, Any]
    run_id: str
    writer: ResultsWriter | None
    keep_history: bool
    dead_cause: str | None = None
    counts: dict[str, int] = field(default_factory=dict)
    #: The proxy applying ``--mutation`` (controller only) and whether the target is someone else's.
    mutation_proxy: IsolatedFaultProxy | None = None
    attached: bool = False
    #: A run through a mutation is a self-test of the suite, never a result about the broker.
    mutation: str | None = None
    #: Why the run ended early (an internal error, an interrupt); None while it goes on or finished.
    abort_cause: str | None = None
    #: The suite's assumptions checked before the catalogue (conformance.preflight).
    preflight: list[preflight.Check] = field(default_factory=list)
    #: Issue 21: every node's URL on a cluster target (through a mutation proxy each when mutating).
    node_urls: dict[str, str] | None = None
    node_proxies: list[IsolatedFaultProxy] = field(default_factory=list)

    @property
    def lock_path(self) -> str:
        return os.path.join(tempfile.gettempdir(), f"conformance-{self.run_id}.lock")

    def meta(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "target": redact(self.url) if self.target is None else self.target.name,
            "target_url": redact(self.url),
            "product": self.server["product"],
            "version": self.server["version"],
            "protocol": self.adapter.protocol,
            "adapter": self.adapter.name,
            "adapter_library": self.adapter.library_version(),
            "profile": self.profile.id,
            "profile_digest": profile_digest(self.profile),
            "catalogue_digest": catalogue_digest(),
            "suite_version": conformance.__version__,
            # a probing or plain relay changes nothing: only a real mutation marks the records
            **({"mutation": self.mutation} if alters(self.mutation) else {}),
        }


STATE_KEY = pytest.StashKey[RunState]()


def _state(config: pytest.Config) -> RunState | None:
    return config.stash.get(STATE_KEY, None)


def _check_options(config: pytest.Config) -> None:
    """Every option is validated before anything is launched: bad input costs no node boot."""
    try:
        check_selection(config.getoption("--requirement") or [], (config.getoption("--area") or []) + (config.getoption("--exclude-area") or []))
        levels = [lv.upper() for lv in config.getoption("--level") or []]
        bad = [lv for lv in levels if lv not in LEVELS]
        if bad:
            raise UsageError(f"unknown level {bad[0]!r}: one of {', '.join(LEVELS)}")
        if config.getoption("--repeat") < 1:
            raise UsageError("--repeat must be at least 1")
        if config.getoption("--case-timeout") <= 0:
            raise UsageError("--case-timeout must be a positive number of seconds")
        check_profile_option(config.getoption("--profile"))
        mutation = config.getoption("--mutation")
        if mutation and alters(mutation):
            make_mutation(mutation)  # an unknown name is a usage error here, not a dead proxy process
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
    allure_results.install_scrubbing_writer()
    try:  # issue 19 §2: the selected requirement packs are part of the catalogue the options name
        packs.activate(packs.selection(config.getoption("--pack") or [], config.getoption("--adapter")))
    except UsageError as exc:
        _abort_record(config, str(exc))
        raise pytest.UsageError(str(exc)) from None
    _check_options(config)
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
        loaded = packs.activate(packs.selection(config.getoption("--pack") or [], packs.adapter_entry_name(type(adapter))))
        config.args.extend(str(p.cases_dir) for p in loaded if str(p.cases_dir) not in config.args)  # issue 19 §2
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
    # --- issue 16: preflight (controller runs it once; workers get its records) -------------------
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
    # --- end issue 16 ---------------------------------------------------------------------------
    _cluster_urls(state, config, worker)  # issue 21
    config.stash[STATE_KEY] = state
    if worker is None:
        allure_results.environment(getattr(config.option, "allure_report_dir", None), state.meta())
    if worker is None and state.writer:
        state.writer.write_run(
            {
                **state.meta(),
                "started_at": time.time(),
                "host": platform.node(),
                "python": platform.python_version(),
                "target_facts": target.facts if target else {},
                "profile_path": profile.path,
                "repeat": config.getoption("--repeat"),
                # "running" until the run ends: a run.json that still says so belongs to a killed run
                "status": "running",
                "preflight": [c.as_record() for c in state.preflight],  # issue 16
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
    state = _state(node.config)
    if state:
        node.workerinput["conformance_url"] = str.__str__(state.url)  # execnet sends plain str only; the worker wraps it again
        node.workerinput["conformance_run_id"] = state.run_id
        handle = state.target.handle() if state.target is not None else None
        node.workerinput["conformance_target"] = json.dumps(handle) if handle else ""
        node.workerinput["conformance_preflight"] = json.dumps([c.as_record() for c in state.preflight])  # issue 16
        node.workerinput["conformance_node_urls"] = json.dumps(state.node_urls or {})  # issue 21


def pytest_unconfigure(config: pytest.Config) -> None:
    state = _state(config)
    if state is None or getattr(config, "workerinput", None) is not None:
        return
    try:
        if state.writer:
            counts: dict[str, int] = {}
            for rec in read_results(state.writer.dir):
                if rec.get("run_id") == state.run_id:
                    counts[rec["verdict"]] = counts.get(rec["verdict"], 0) + 1
            status = f"aborted: {state.abort_cause}" if state.abort_cause else "finished"
            meta = {**state.meta(), "finished_at": time.time(), "counts": counts, "status": status}
            if state.dead_cause:
                meta["target_dead"] = state.dead_cause
            if state.mutation_proxy is not None:
                meta["mutation"] = merge_mutation_stats([p.mutation_stats() for p in [state.mutation_proxy, *state.node_proxies]])
            state.writer.write_run({**read_run(state.writer.dir), **meta})
    finally:
        with contextlib.suppress(OSError):
            os.unlink(state.lock_path)  # the broker lock of this run (workers are gone by now)
        if state.mutation_proxy is not None:
            state.mutation_proxy.close()
        for p in state.node_proxies:
            p.close()
        if state.target is not None and not state.attached:
            state.target.stop()


def pytest_internalerror(excrepr: Any, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
    """An error in the suite itself ends the run: run.json says ``aborted`` with the cause."""
    config = _CONFIG.get("config")
    state = _state(config) if config is not None else None
    if state is not None and state.abort_cause is None:
        state.abort_cause = scrub(f"internal error: {_one_line(excinfo.value)}")


def pytest_keyboard_interrupt(excinfo: pytest.ExceptionInfo[BaseException]) -> None:
    config = _CONFIG.get("config")
    state = _state(config) if config is not None else None
    if state is not None and state.abort_cause is None:
        state.abort_cause = "interrupted"


def pytest_sessionstart(session: pytest.Session) -> None:
    _CONFIG["config"] = session.config


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    state = _state(session.config)
    if state is not None and state.abort_cause is None and exitstatus in (pytest.ExitCode.INTERRUPTED, pytest.ExitCode.INTERNAL_ERROR):
        state.abort_cause = "interrupted" if exitstatus == pytest.ExitCode.INTERRUPTED else "internal error"


#: The hooks above that pytest calls without a config (internal error, interrupt) find it here.
_CONFIG: dict[str, pytest.Config] = {}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    cls = metafunc.cls
    if cls is None or not issubclass(cls, Case) or "conformance_case" not in metafunc.fixturenames:
        return
    state = _state(metafunc.config)
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


#: The id pytest gives a repetition (``[classic-attempt2]``); the record's case_id leaves it out.
ATTEMPT_ID = "attempt"


@pytest.fixture
def conformance_attempt() -> int:
    return 1


@pytest.fixture
def conformance_case(request: pytest.FixtureRequest, queue_type: str | None, variant: str | None,
                     conformance_attempt: int) -> Iterator[Callable[[Case], None]]:
    state = _state(request.config)
    if state is None:
        pytest.skip("no --target given: conformance cases need a broker")

    def run(case: Case) -> None:
        __tracebackhide__ = True
        _run_case(request.node, state, case, queue_type, variant)

    yield run


def _decide(item: pytest.Item, result: dict[str, Any]) -> None:
    item.stash[STASH_RESULT] = result


def _run_case(item: pytest.Item, state: RunState, case: Case, queue_type: str | None, variant: str | None) -> None:
    """Scenario, verdict, record. Its frames are the suite's, not the broker's: hidden from tracebacks."""
    __tracebackhide__ = True
    req = requirement(case.requirement)
    base = {"requirement": req.id, "level": req.level_for(state.adapter.protocol), "area": req.area, "queue_type": queue_type, "variant": variant}
    target_label = f"{state.server['product']} {state.server['version']} {state.adapter.protocol}"
    allure_results.labels(req, queue_type, variant, target_label, state.adapter.protocol, state.profile.id)
    started = time.monotonic()

    def finish(v: Verdict, history: History | None = None, obs: Any = None, trace: str = "") -> None:
        allure_results.verdict_label(v.outcome.value)
        if v.outcome not in (Outcome.PASS, Outcome.UNSUPPORTED, Outcome.UNDOCUMENTED):
            allure_results.attach(v.render(req.id, req.level_for(state.adapter.protocol)), history, trace)
        keep = history is not None and (state.keep_history or v.outcome not in (Outcome.PASS,))
        _decide(
            item,
            {
                **base,
                "verdict": v.outcome.value,
                "spec_verdict": v.spec,
                "vendor_verdict": v.vendor,
                "expected": v.expected,
                "observed": v.observed,
                "reason": v.reason,
                "citation": v.citation,
                "duration_s": round(time.monotonic() - started, 4),
                "observations": obs,
                "history": history.as_records() if keep and history else None,
                "wire_trace": trace.splitlines() if keep and trace else None,
                "rendered": v.render(req.id, req.level_for(state.adapter.protocol)),
                "history_text": history.render() if history else "",
                "trace_text": trace,
            },
        )

    if state.dead_cause:
        # a silent target's cause names itself ("target stopped answering ..."); a gone one is "down"
        said = state.dead_cause if state.dead_cause.startswith("target ") else f"target is down: {state.dead_cause}"
        finish(Verdict(Outcome.ERROR, "a reachable target", said))
        item.stash[STASH_RESULT]["brief"] = True  # one line per remaining case: the cause was shown once
        pytest.fail(f"error: target is down since an earlier case: {state.dead_cause}", pytrace=False)
    why = _not_applicable(req, state, queue_type)
    if why:
        finish(why)
        pytest.skip(f"{why.outcome.value}: {why.reason}")
    blocked = preflight.blocking(state.preflight, req)  # issue 16: at once, never at the deadline
    if blocked is not None:
        finish(blocked)
        raise TargetError(blocked.observed)
    liveness.clear_interrupted()  # issue 16
    history = History()
    ctx = CaseContext(adapter=state.adapter, url=state.url, profile=state.profile, requirement=req, queue_type=queue_type,
                      variant=variant, history=history, target=state.target)
    ctx.node_urls = state.node_urls
    interrupted = True
    try:
        with _broker_lock(state, exclusive=case.disrupts_broker, history=history):
            obs = shared_fault.scenario(item, case, ctx, lambda other: _context_for(other, state))  # issue 20
            deadline.overrun(item, started)  # a lost alarm never lets a case pass past its deadline
        interrupted = False
    except Unsupported as exc:
        ctx.close(True)
        who = f"adapter {state.adapter.name}" if exc.by == "adapter" else f"target {state.target.name if state.target else redact(state.url)}"
        v = Verdict(Outcome.UNSUPPORTED, req.text, "not run", reason=f"{who}: {exc}")
        finish(v, history, trace=ctx.wire_trace())
        pytest.skip(f"unsupported: {v.reason}")
    except BaseException as exc:
        if type(exc).__name__ == "Failed":
            deadline.disarm()  # the deadline is caught: the record below is written undisturbed
        cause = None
        if isinstance(exc, (ConnectionLost, OSError, ConformanceError)):
            cause = probe_tcp(state.url) if state.target is None else (state.target.check_alive())
            if cause:
                state.dead_cause = cause
        # --- issue 16: a protocol-level health probe after a timeout; a missing delivery is a verdict
        judged = liveness.Judgement(None, None) if cause else liveness.after_scenario_exception(
            exc, adapter=state.adapter, url=state.url, case_id=item.nodeid, requirement_text=req.text)
        if judged.dead_cause:
            state.dead_cause = cause = judged.dead_cause
        ctx.skip_cleanup = bool(cause)  # a target that stopped answering would stall the cleanup too
        if judged.verdict is not None and judged.verdict.outcome is not Outcome.ERROR:
            ctx.close(True)
            v = apply_profile(judged.verdict, req.id, queue_type, state.profile)
            finish(v, history, {"missing": liveness.missing_obs(exc)} if isinstance(exc, DeliveriesMissing) else None, ctx.wire_trace())
            if v.outcome is Outcome.FAIL:
                pytest.fail(v.render(req.id, req.level_for(state.adapter.protocol)), pytrace=False)
            pytest.xfail(f"deviation: {v.reason} [{v.citation}]")
        # --- end issue 16 ---------------------------------------------------------------------------
        detail = f"{type(exc).__name__}: {exc}" + (f" (target down: {cause})" if cause else "")
        if type(exc).__name__ == "Failed":  # the case deadline (pytest-timeout): name the operation
            detail = liveness.deadline_text(item.config.getoption("--case-timeout")) or detail
        if judged.verdict is not None:
            detail = judged.verdict.observed
        ctx.close(True)
        finish(Verdict(Outcome.ERROR, req.text, detail, reason="scenario did not complete"), history, trace=ctx.wire_trace())
        if type(exc).__name__ == "Failed":
            # the deadline's alarm can interrupt a frame that has no line number, and pytest then
            # fails to format the traceback (INTERNALERROR): the deadline speaks in one line instead
            pytest.fail(f"error: {detail}", pytrace=False)
        raise
    finally:
        ctx.close(interrupted)
    v = apply_profile(case.verdict(obs, state.profile, queue_type), req.id, queue_type, state.profile)
    finish(v, history, obs, ctx.wire_trace())
    if v.outcome is Outcome.UNDOCUMENTED:
        pytest.skip(f"undocumented: {v.reason}")
    if v.outcome is Outcome.UNSUPPORTED:  # issue 17: the verdict found the broker untested (e.g. a client-side refusal)
        pytest.skip(f"unsupported: {v.reason}")
    if v.outcome is Outcome.FAIL:
        # the verdict is the whole story: no traceback of the runner's frames before it
        pytest.fail(v.render(req.id, req.level_for(state.adapter.protocol)), pytrace=False)
    if v.outcome is Outcome.DEVIATION:
        pytest.xfail(f"deviation: {v.reason} [{v.citation}]")


# --- issue 21: a cluster target's nodes, each behind the run's mutation when there is one -------
def _cluster_urls(state: RunState, config: pytest.Config, worker: Any) -> None:
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
# --- end issue 21 -----------------------------------------------------------------------------


# --- issue 20: one broker fault shared by the disruptive cases (conformance.shared_fault) --------
def _context_for(item: pytest.Item, state: RunState) -> CaseContext | None:
    """A fresh context for another case of the run, or None if that case will not run its scenario."""
    req = requirement(item.cls.requirement)  # type: ignore[union-attr]
    params = item.callspec.params if hasattr(item, "callspec") else {}
    qt = params.get("queue_type")
    if state.dead_cause or _not_applicable(req, state, qt) or preflight.blocking(state.preflight, req) is not None:
        return None
    ctx = CaseContext(adapter=state.adapter, url=state.url, profile=state.profile, requirement=req, queue_type=qt,
                      variant=params.get("variant"), history=History(), target=state.target)
    ctx.node_urls = state.node_urls
    return ctx
# --- end issue 20 -----------------------------------------------------------------------------


@contextlib.contextmanager
def _broker_lock(state: RunState, *, exclusive: bool, history: History) -> Iterator[None]:
    """Cases share the broker (shared lock); a case that restarts or kills it holds it alone.

    A file lock, so it spans xdist workers; the case deadline bounds the wait for it."""
    if state.target is None or not state.target.can_restart:
        yield
        return
    with open(state.lock_path, "a+") as fh:
        started = time.monotonic()
        fcntl.flock(fh, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        if exclusive:
            history.add("suite", "lock", f"broker held exclusively after {(time.monotonic() - started) * 1000:.0f}ms")
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _not_applicable(req: Requirement, state: RunState, queue_type: str | None) -> Verdict | None:
    # --- issue 19: applicability by capability (conformance.capabilities) -------------------------
    why = applicability(req, state.adapter, state.profile)
    if why:
        return Verdict(Outcome.UNSUPPORTED, req.text, "not run", reason=why)
    # --- end issue 19 ---------------------------------------------------------------------------
    if queue_type is not None and queue_type not in state.profile.queue_types:
        return Verdict(Outcome.UNSUPPORTED, req.text, "not run", reason=f"profile {state.profile.id} has no queue type {queue_type!r}")
    doc = state.profile.unsupported_reason(req.id, queue_type)
    if doc:
        return Verdict(Outcome.UNSUPPORTED, req.text, "not run", reason=doc.reason, citation=doc.source)
    return None


@pytest.hookimpl(hookwrapper=True, trylast=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Record the case and scrub the report before anything prints or writes it.

    ``trylast`` makes this the innermost wrapper: the console, JUnit and Allure all see the report
    only after it went through the redaction point."""
    outcome = yield
    state = _state(item.config)
    if state is not None and outcome.excinfo is not None:
        # pytest could not even describe the failure (e.g. a traceback frame without a line number):
        # a one-line report instead of an INTERNALERROR that would end the whole run
        exc = outcome.excinfo[1]
        outcome.force_result(pytest.TestReport(
            item.nodeid, item.location, {k: 1 for k in item.keywords}, "failed",
            f"error: the case's failure could not be formatted ({type(exc).__name__}: {exc})",
            call.when, [], call.duration, call.start, call.stop, list(item.user_properties)))
    report: pytest.TestReport = outcome.get_result()
    if state is None:
        return
    if isinstance(getattr(item, "instance", None), Case) and (report.when == "call" or (report.when == "setup" and not report.passed)):
        result = item.stash.get(STASH_RESULT, None)
        if result is None:  # interrupted before a verdict: deadline, or a crash outside the scenario
            req = requirement(type(item.instance).requirement)  # type: ignore[attr-defined]
            text = report.longreprtext.strip().splitlines()[-1] if report.longreprtext else report.outcome
            text = liveness.deadline_text(item.config.getoption("--case-timeout")) or text  # issue 16
            result = {"requirement": req.id, "level": req.level_for(state.adapter.protocol), "area": req.area, "verdict": Outcome.ERROR.value,
                      "spec_verdict": "n/a", "vendor_verdict": "n/a", "expected": req.text, "observed": text,
                      "reason": "case did not reach a verdict", "queue_type": item.callspec.params.get("queue_type") if hasattr(item, "callspec") else None}
        _attach(result, report)
        _write(item, state, result, report)
    _scrub_report(report)


def _scrub_report(report: pytest.TestReport) -> None:
    """The report's text through the redaction point (console, junit.xml and Allure read it)."""
    if report.longrepr is not None:
        text = report.longreprtext
        clean = scrub(text)
        if clean != text:
            report.longrepr = clean
    report.sections = [(scrub(title), scrub(body)) for title, body in report.sections]


def _attach(result: dict[str, Any], report: pytest.TestReport) -> None:
    if result["verdict"] in ("pass", "unsupported", "undocumented") or result.get("brief"):
        return
    text = result.get("rendered") or f"Expected: {result['expected']}\nActual:   {result['observed']}"
    report.sections.append(("expected vs observed", text))
    if result.get("history_text"):
        report.sections.append(("history", result["history_text"]))
    if result.get("trace_text"):
        # "Captured stdout ..." sections are what junitxml writes to <system-out> (junit_logging).
        # junitxml titles it only "Captured Out", so the text names itself.
        report.sections.append(("Captured stdout wire trace", "Wire trace (every frame both ways, decoded):\n" + result["trace_text"]))


def case_id(item: pytest.Item) -> str:
    """The case's id, the same for every repetition (``--repeat``): the attempt is a field of its own."""
    node = shared_fault.plain_nodeid(item.nodeid)  # issue 20: without xdist's "@group" suffix
    node = packs.qualified_nodeid(item, node)  # issue 19 §2: a pack's case ids start with the pack's name
    attempt = getattr(item, "callspec", None) and item.callspec.params.get("conformance_attempt")
    if not attempt:
        return node
    return node.replace(f"-{ATTEMPT_ID}{attempt}]", "]").replace(f"[{ATTEMPT_ID}{attempt}]", "")


def _write(item: pytest.Item, state: RunState, result: dict[str, Any], report: pytest.TestReport) -> None:
    if state.writer is None:
        return
    record = {k: v for k, v in result.items() if k not in ("rendered", "history_text", "trace_text", "brief")}
    record.update(state.meta())
    record.update(
        case_id=case_id(item),
        attempt=(item.callspec.params.get("conformance_attempt", 1) if hasattr(item, "callspec") else 1),
        pytest_outcome=report.outcome,
        worker=os.environ.get("PYTEST_XDIST_WORKER", "main"),
        finished_at=time.time(),
    )
    if record.get("verdict") == "error" and report.longreprtext:
        record["traceback"] = report.longreprtext[-2000:]
    state.writer.append(record)  # the writer scrubs


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_timeout_set_timer(item: pytest.Item, settings: Any) -> bool | None:
    """A case's deadline re-fires until caught (conformance.deadline); other items keep pytest-timeout's."""
    if settings.method == "signal" and isinstance(getattr(item, "instance", None), Case):
        return deadline.set_timer(item, settings.timeout) or None
    return None


@pytest.hookimpl(tryfirst=True)  # issue 20: before xdist reads the xdist_group marks it sets (loadgroup)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Give every case its deadline; keep only the cases asked for.

    The deadline covers the case's scenario and verdict only (``func_only``): a deadline that fired
    inside pytest's own reporting would end the whole run with an internal error.
    """
    deadline = config.getoption("--case-timeout")
    for item in items:
        if isinstance(getattr(item, "instance", None), Case) and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(deadline, func_only=True))
    wanted_reqs = set(config.getoption("--requirement") or [])
    wanted_areas = set(config.getoption("--area") or [])
    excluded_areas = set(config.getoption("--exclude-area") or [])
    levels = {lv.upper() for lv in config.getoption("--level") or []}
    queue_types = set(config.getoption("--queue-type") or [])
    disruptive = config.getoption("--disruptive")
    keep, drop = [], []
    for item in items:
        cls = getattr(item, "cls", None)
        rid = getattr(cls, "requirement", None)
        req = requirement(rid) if rid else None
        params = item.callspec.params if hasattr(item, "callspec") else {}
        disrupts = bool(getattr(cls, "disrupts_broker", False))
        wanted = (
            (disruptive == "include" or disrupts == (disruptive == "only"))
            and ((not wanted_reqs and not wanted_areas) or rid in wanted_reqs or (req is not None and req.area in wanted_areas))
            and (req is None or req.area not in excluded_areas)
            and (not levels or (req is not None and req.level in levels))
            and (not queue_types or params.get("queue_type") in queue_types)
        )
        (keep if wanted else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
    items[:] = keep
    shared_fault.order(items)  # issue 20: the cases of one broker fault together, last
