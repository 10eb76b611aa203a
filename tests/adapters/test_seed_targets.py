"""The seed servers' process targets (LavinMQ 1.x and 2.x, qpidd) on the builds this machine keeps in
../shared/brokers: every fault that needs a launched broker works on each (restart, kill -9, pause),
two servers of one kind run side by side (private in everything they bind), a broker that cannot
start is quoted in its own words, and nothing is left behind. A server that is absent skips with
one line."""

from __future__ import annotations

import signal
import socket
import threading
from pathlib import Path
from typing import Iterator

import pytest
import yaml

from adapters.process.definition import REPO_ROOT, load_definition
from adapters.process.handshake import PROBES
from adapters.process.launcher import ProcessTarget, broker_error_line
from conformance.errors import TargetError
from conformance.nemesis.kinds import KILL, PAUSE, RESTART, fault_applicability, fault_notes, strike
from conformance.supervisor import marked_pids

SHARED = REPO_ROOT.parent / "shared" / "brokers"
#: definition name -> the build beside the checkout it runs here
SEEDS = {
    "lavinmq": SHARED / "lavinmq-2.9.1" / "lavinmq",
    "lavinmq-1": SHARED / "lavinmq-1.3.1" / "lavinmq",
    "qpidd": SHARED / "qpid-cpp-1.39.0" / "sbin" / "qpidd",
}


def seed(name: str) -> ProcessTarget:
    binary = SEEDS[name]
    if not binary.is_file():
        pytest.skip(f"{binary} absent (the seed brokers live in ../shared/brokers beside the checkout)")
    return ProcessTarget(load_definition(name))


@pytest.fixture(params=sorted(SEEDS))
def target(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[ProcessTarget]:
    for env in ("CONFORMANCE_LAVINMQ", "CONFORMANCE_QPIDD"):
        monkeypatch.delenv(env, raising=False)  # the definition finds the build on its own
    t = seed(request.param)
    yield t
    token = t.token
    t.stop()
    assert marked_pids(token) == [], f"processes of {t.name} survived its stop"


def answers(t: ProcessTarget) -> bool:
    return PROBES[t.d.ready_protocol](t.ports[t.d.ready_port])


def test_restart_kill_and_pause_on_each_seed_server(target: ProcessTarget) -> None:
    target.start()
    assert target.binary == str(SEEDS[Path(target.d.path).stem].resolve()) and answers(target)
    first = target._pid()
    target.restart()
    assert answers(target) and target._pid() != first
    target.kill()
    assert not target.running() and not answers(target)
    target.start()
    assert answers(target)
    # A paused broker keeps its sockets and answers nothing; SIGCONT brings it back on its own.
    with socket.create_connection(("127.0.0.1", target.ports[target.d.ready_port]), timeout=2):
        target.pause()
        assert target.running() and not answers(target)
        target.resume()
    assert answers(target)
    log = target.log_file.read_text()
    assert all(word in log for word in ("kill -9", "stop (SIGTERM)", "pause (SIGSTOP)", "resume (SIGCONT)"))
    assert fault_applicability([PAUSE], target) is None
    # A paused broker still takes its stop signal (SIGCONT follows it), not the SIGKILL fallback.
    proc = target.proc
    target.pause()
    target.shutdown()
    assert proc is not None and proc.returncode is not None and proc.returncode != -signal.SIGKILL


def test_the_pause_kind_holds_the_broker_stopped_then_resumes_it() -> None:
    target = seed("lavinmq")
    said: list[tuple[str, str]] = []
    try:
        target.start()
        took = strike(PAUSE, target, lambda op, detail: said.append((op, detail)))
        assert [op for op, _ in said] == ["SIGSTOP", "SIGCONT"] and took >= PAUSE.hold_s and answers(target)
    finally:
        target.stop()


def test_restart_and_kill_run_on_every_launched_server_and_a_missing_store_is_noted(target: ProcessTarget) -> None:
    """The suite launched each of them, so each takes restart and kill; qpidd here has no store
    module, which every case the fault serves is told (what the broker keeps is then judged); the
    LavinMQ servers keep their data directory, with nothing to note."""
    assert fault_applicability([RESTART, KILL], target) is None
    note = fault_notes([RESTART, KILL], target)
    if target.d.no_store:
        assert "has no store" in note and "store module" in note
    else:
        assert note == ""


def test_two_servers_of_one_kind_run_side_by_side() -> None:
    """Every listener and socket is private: the second server starts while the first runs (LavinMQ
    2.x once died here on the shared control socket)."""
    first, second = seed("lavinmq"), seed("lavinmq")
    try:
        first.start()
        second.start()
        assert answers(first) and answers(second)
        assert (first.dir / "ctl.sock").exists() and (second.dir / "ctl.sock").exists()
    finally:
        first.stop()
        second.stop()


def test_a_start_failure_quotes_the_brokers_own_error_line(tmp_path: Path) -> None:
    """Two LavinMQ 2.x on one control socket: the second exits, and the one line says why in the
    broker's words, not with the last frames of its stack trace."""
    seed("lavinmq")
    data = yaml.safe_load((REPO_ROOT / "adapters" / "lavinmq" / "targets" / "lavinmq.yaml").read_text())
    data["env"] = {"LAVINMQ_CONTROL_UNIX_PATH": str(tmp_path / "shared-ctl.sock")}
    data["binary"]["search"] = [str(SEEDS["lavinmq"].parent)]
    definition = tmp_path / "clash.yaml"
    definition.write_text(yaml.safe_dump(data))
    first, second = ProcessTarget(load_definition(str(definition))), ProcessTarget(load_definition(str(definition)))
    try:
        first.start()
        with pytest.raises(TargetError) as exc:
            second.start()
        text = str(exc.value)
        assert "exited during start" in text and "is already in use" in text and "\n" not in text
        assert " from " not in text.split(":", 1)[1]  # no stack frame
    finally:
        first.stop()
        second.stop()


def test_the_error_line_is_the_last_stated_error_since_the_last_start() -> None:
    log = "\n".join([
        "==== conformance 2026-11-25T10:00:00Z: start lavinmq",
        "Unhandled exception: an older failure (Foo)",
        "==== conformance 2026-11-25T10:00:05Z: start lavinmq",
        "2026-11-25T10:00:05Z  INFO lmq.launcher LavinMQ 2.9.1",
        "Unhandled exception in spawn(name: AMQP listening on 1): Channel is closed (Channel::ClosedError)",
        "  from /x/lavinmq in 'Exception::CallStack::unwind:Array(Pointer(Void))'",
        "Unhandled exception: Control socket /tmp/x.sock is already in use (LavinMQ::HTTP::ControlSocketInUseError)",
        "  from /x/lavinmq in 'main'",
        "  from ???",
    ])
    assert broker_error_line(log) == "Unhandled exception: Control socket /tmp/x.sock is already in use (LavinMQ::HTTP::ControlSocketInUseError)"
    qpidd = "2026-11-25 13:50:40 [Broker] notice Broker (pid=1) start-up\n2026-11-25 13:50:40 [Broker] critical Unexpected error: Cannot bind to 127.0.0.1:5672\n"
    assert broker_error_line(qpidd).endswith("critical Unexpected error: Cannot bind to 127.0.0.1:5672")
    assert broker_error_line("one\ntwo\nthree\nfour\n") == "two | three | four"


def test_a_target_that_speaks_amqp_1_0_gets_the_1_0_adapter_unless_one_is_named() -> None:
    from conformance.api import adapter_for

    qpidd = ProcessTarget(load_definition("qpidd"))
    assert qpidd.protocol == "amqp-1.0"
    assert adapter_for("amqp", None, qpidd.protocol).protocol == "amqp-1.0"
    assert adapter_for("amqp", None, None).protocol == "amqp-0-9-1"  # an amqp:// URL alone stays 0-9-1
    assert adapter_for("amqp", "pika", qpidd.protocol).protocol == "amqp-0-9-1"  # the user's choice wins


def test_a_target_whose_protocol_no_installed_adapter_speaks_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    import conformance.api as api
    from conformance.errors import UsageError

    only_pika = {k: v for k, v in api.adapters().items() if v.protocol == "amqp-0-9-1"}
    monkeypatch.setattr(api, "adapters", lambda: only_pika)
    with pytest.raises(UsageError, match=r"the target speaks amqp-1.0, and no installed adapter for 'amqp' does"):
        api.adapter_for("amqp", None, "amqp-1.0")


def test_lavinmq_1_targets_take_their_fixed_control_socket_one_at_a_time() -> None:
    """1.x binds /tmp/lavinmqctl.sock whatever its options: a second target of the suite waits for
    the first to stop instead of taking the socket over."""
    first, second = seed("lavinmq-1"), seed("lavinmq-1")
    started = threading.Event()
    errors: list[BaseException] = []

    def start_second() -> None:
        try:
            second.start()
            started.set()
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    try:
        first.start()
        waiter = threading.Thread(target=start_second, daemon=True)
        waiter.start()
        assert not started.wait(1.5) and not second.running()  # held back while the first lives
        first.stop()
        assert started.wait(60) and not errors and answers(second)
    finally:
        first.stop()
        second.stop()


def test_a_fixed_path_a_server_the_suite_did_not_start_answers_on_is_refused(tmp_path: Path) -> None:
    seed("lavinmq-1")
    sock_path = str(tmp_path / "ctl.sock")
    data = yaml.safe_load((REPO_ROOT / "adapters" / "lavinmq" / "targets" / "lavinmq-1.yaml").read_text())
    data["fixed_paths"] = {sock_path: "the control socket"}
    definition = tmp_path / "foreign.yaml"
    definition.write_text(yaml.safe_dump(data))
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(sock_path)
        server.listen()
        target = ProcessTarget(load_definition(str(definition)))
        with pytest.raises(TargetError, match=r"ctl.sock is in use by a server the suite did not start.*stop that server first$"):
            target.start()
        target.stop()
        assert not target.running()
    # a stale socket file (nobody answers) is the broker's to replace
    again = ProcessTarget(load_definition(str(definition)))
    try:
        again.start()
        assert answers(again)
    finally:
        again.stop()


def test_a_store_module_beside_qpidd_means_it_persists(tmp_path: Path) -> None:
    seed("qpidd")
    data = yaml.safe_load((REPO_ROOT / "adapters" / "qpid_cpp" / "targets" / "qpidd.yaml").read_text())
    store = tmp_path / "linearstore.so"
    data["no_store"]["unless_present"] = [str(store)]
    definition = tmp_path / "qpidd-store.yaml"
    definition.write_text(yaml.safe_dump(data))
    target = ProcessTarget(load_definition(str(definition)))
    try:
        target._prepare()
        assert target.no_store and "store module" in target.no_store
        store.write_bytes(b"")
        assert target.no_store is None and fault_applicability([RESTART, KILL], target) is None
    finally:
        target.stop()
