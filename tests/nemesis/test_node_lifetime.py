"""A launched node never outlives the process that launched it, and listens on loopback only.

Real processes throughout: a runner process launches a private RabbitMQ node, the test kills the
runner with SIGKILL (or lets it die of an exception) and then waits, with a deadline, until no
process, listening port or directory of the node is left. The watchdog itself is also tested on
plain processes, one of which ignores SIGTERM.
"""

from __future__ import annotations

import json
import os
import re
import select
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from adapters.rabbitmq.launcher import launch
from conformance.supervisor import MARKER, Supervisor, marked_pids
from conformance.targets import wait_until
from tests.conftest import ROOT, conformance_cmd

BOOT_DEADLINE_S = 150.0
GONE_DEADLINE_S = 60.0

RUNNER = """
import json, sys
from adapters.rabbitmq.launcher import RabbitMQLocalNode
node = RabbitMQLocalNode(plugins=())
node.start()
print(json.dumps({"dir": str(node.dir)}), flush=True)
if sys.argv[1] == "raise":
    raise RuntimeError("an internal error after the node started")
sys.stdin.read()  # blocks until the test kills this process
"""


def listening() -> list[tuple[str, int, int | None]]:
    """(address, port, pid) of every listening TCP socket on the machine, from ``ss``."""
    out = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout
    rows = []
    for line in out.splitlines():
        local = line.split()[3]
        addr, port = local.rsplit(":", 1)
        pids = [int(p) for p in re.findall(r"pid=(\d+)", line)] or [None]
        rows += [(addr.strip("[]"), int(port), pid) for pid in pids]
    return rows


def is_loopback(addr: str) -> bool:
    return addr.startswith("127.") or addr in ("::1", "::ffff:127.0.0.1")


def process_name(pid: int) -> str | None:
    """The process's name, or None once it has exited (it may between being listed and being read)."""
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return None


def leftovers(token: str, ports: list[int], node_dir: str) -> list[str]:
    """Everything of the node still there: live marked processes, listening ports, the directory."""
    left = [f"process {pid} ({name})" for pid in marked_pids(token) if (name := process_name(pid)) is not None]
    left += [f"port {port} listening on {addr}" for addr, port, _ in listening() if port in ports]
    if os.path.exists(node_dir):
        left.append(f"directory {node_dir}")
    return left


def wait_nothing_left(token: str, ports: list[int], node_dir: str) -> tuple[float, list[str]]:
    start = time.monotonic()
    wait_until(lambda: not leftovers(token, ports, node_dir), GONE_DEADLINE_S, 0.02)
    return time.monotonic() - start, leftovers(token, ports, node_dir)


def read_line(proc: subprocess.Popen[str], deadline_s: float) -> str:
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], deadline_s)
    return proc.stdout.readline() if ready else ""


def start_runner(mode: str) -> tuple[subprocess.Popen[str], dict[str, Any]]:
    proc = subprocess.Popen([sys.executable, "-c", RUNNER, mode], cwd=ROOT, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = read_line(proc, BOOT_DEADLINE_S)
    if not line:
        proc.kill()
        pytest.fail(f"runner did not report a started node: {proc.communicate()[1][-2000:]}")
    node_dir = json.loads(line)["dir"]
    return proc, {"dir": node_dir, **json.loads(Path(node_dir, "node.json").read_text())}


def assert_private_and_loopback(state: dict[str, Any]) -> None:
    node_dir = Path(state["dir"])
    assert stat.S_IMODE(node_dir.stat().st_mode) == 0o700
    for name in ("node.json", "rabbitmq.conf"):
        assert stat.S_IMODE((node_dir / name).stat().st_mode) == 0o600, name
    pids = set(marked_pids(state["token"]))
    sockets = [(addr, port) for addr, port, pid in listening() if pid in pids]
    amqp, dist, epmd = state["ports"]
    assert {amqp, dist, epmd} <= {port for _, port in sockets}, sockets
    assert all(is_loopback(addr) for addr, _ in sockets), sockets


def test_sigkill_of_the_launching_process_leaves_nothing_even_after_an_attached_restart() -> None:
    runner, state = start_runner("block")
    token, ports = state["token"], state["ports"]
    try:
        assert_private_and_loopback(state)
        # another process (as an xdist worker does) kill -9s and restarts the node: new process group
        attached = launch(attach=state["dir"])
        first_pid = state["pid"]
        attached.kill()
        attached.start()
        assert json.loads(Path(state["dir"], "node.json").read_text())["pid"] != first_pid
        assert attached.proc is not None and attached.check_alive() is None
        assert_private_and_loopback(state)
        assert leftovers(token, ports, state["dir"])  # the check below can fail: the node is there
        assert runner.poll() is None
        runner.send_signal(signal.SIGKILL)
        runner.wait(timeout=10)
        elapsed, left = wait_nothing_left(token, ports, state["dir"])
        attached.proc.wait(timeout=10)  # reap our own child (the restarted start script)
    finally:
        if runner.poll() is None:
            runner.kill()
        runner.communicate()
    assert runner.returncode == -signal.SIGKILL
    assert left == [], left
    print(f"runner SIGKILL -> node gone in {elapsed:.2f}s")


def test_an_exception_after_start_without_stop_leaves_nothing() -> None:
    runner, state = start_runner("raise")
    _, err = runner.communicate(timeout=60)
    assert runner.returncode == 1 and "an internal error after the node started" in err
    elapsed, left = wait_nothing_left(state["token"], state["ports"], state["dir"])
    assert left == [], left


def test_sigkill_of_conformance_run_leaves_nothing(tmp_path: Path) -> None:
    """The real command, killed while its persistence cases restart the node."""
    out = tmp_path / "run"
    runner = subprocess.Popen(conformance_cmd("run", "--target", "rabbitmq-local", "--area", "persist", "--out", str(out)),
                              cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        def node_dir() -> str | None:
            try:
                return json.loads((out / "run.json").read_text())["target_facts"]["node_dir"]
            except (OSError, ValueError, KeyError):
                return None

        assert wait_until(lambda: node_dir() is not None or runner.poll() is not None, BOOT_DEADLINE_S, 0.05)
        d = node_dir()
        assert d is not None and runner.poll() is None, "the run ended before it could be killed"
        state = json.loads(Path(d, "node.json").read_text())
        assert leftovers(state["token"], state["ports"], d)
        runner.send_signal(signal.SIGKILL)
        assert runner.wait(timeout=10) == -signal.SIGKILL
        elapsed, left = wait_nothing_left(state["token"], state["ports"], d)
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait()
    assert left == [], left
    assert json.loads((out / "run.json").read_text())["status"] == "running"  # killed: never finished


def test_the_watchdog_kills_what_ignores_sigterm_and_removes_the_directory(tmp_path: Path) -> None:
    """Generic processes: one stops on SIGTERM, one ignores it and needs SIGKILL after the grace."""
    private = tmp_path / "private"
    private.mkdir()
    sup = Supervisor.start("t" + os.urandom(6).hex(), str(private), grace_s=1.0)
    env = {**os.environ, **sup.env()}
    polite = subprocess.Popen(["sleep", "600"], env=env, start_new_session=True)
    stubborn = subprocess.Popen(["sh", "-c", "trap '' TERM; echo armed; exec sleep 600"], env=env,
                                stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert stubborn.stdout is not None and stubborn.stdout.readline() == "armed\n"
    assert {polite.pid, stubborn.pid} <= set(marked_pids(sup.token))
    report = sup.stop()
    assert polite.wait(timeout=5) == -signal.SIGTERM
    assert stubborn.wait(timeout=5) == -signal.SIGKILL
    assert polite.pid in report.terminated and stubborn.pid in report.killed and report.left == []
    assert report.removed_dir and not private.exists()
    assert marked_pids(sup.token) == []
    assert MARKER not in os.environ


def test_the_watchdog_ignores_the_exit_of_the_thread_that_started_it(tmp_path: Path) -> None:
    """PR_SET_PDEATHSIG also fires when the launching *thread* exits: that must not stop the node."""
    private = tmp_path / "private"
    private.mkdir()
    holder: dict[str, Supervisor] = {}
    token = "t" + os.urandom(6).hex()
    starter = threading.Thread(target=lambda: holder.update(sup=Supervisor.start(token, str(private), grace_s=1.0)))
    starter.start()
    starter.join()
    sup = holder["sup"]
    child = subprocess.Popen(["sleep", "600"], env={**os.environ, **sup.env()}, start_new_session=True)
    try:
        sup.proc.send_signal(signal.SIGUSR1)  # what the kernel sends at the thread's exit, made certain
        assert sup.ping()  # a barrier: the watchdog handled that signal before answering
        assert sup.proc.poll() is None and child.poll() is None and private.exists()
    finally:
        report = sup.stop()
    assert child.wait(timeout=5) == -signal.SIGTERM and report.removed_dir
