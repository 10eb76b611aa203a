"""The process target: definitions validated in one line, a missing binary named with what to install,
and end to end against real brokers here (the Debian RabbitMQ through a persist-area run with restart
and kill -9, the Qpid Proton example broker through the lifecycle), leaving no process behind."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import yaml

from adapters.process.definition import load_definition, parse_definition
from adapters.process.handshake import amqp10_ready
from conformance.catalogue.configurations import base_of
from conformance.errors import TargetError, UsageError
from conformance.runner.results import read_results, read_run
from conformance.supervisor import marked_pids
from conformance.targets import available_launchers, make_target
from tests.e2e.test_e2e_rabbitmq import run_cli
from tests.support.kill_loss import unexplained

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted((ROOT / "adapters").glob("*/targets/*.yaml"))

needs_entry_points = pytest.mark.skipif(
    "process" not in available_launchers(),
    reason="the 'process' launcher entry point is not installed (pip install -e . in this checkout)",
)


def test_every_shipped_definition_parses() -> None:
    names = {p.stem for p in SHIPPED}
    assert {"lavinmq", "lavinmq-1", "rabbitmq", "proton-example"} <= names
    for path in SHIPPED:
        d = load_definition(str(path.relative_to(ROOT)))
        assert d.ready_port in d.ports and d.start[0] in ("{binary}", "python3")


MINIMAL = {"name": "x", "binary": "x-broker", "ports": ["amqp"], "start": ["{binary}"], "url": "amqp://127.0.0.1:{port[amqp]}",
           "ready": {"protocol": "amqp-0-9-1", "port": "amqp"}}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"stat": ["{binary}"]}, "unknown key(s) stat"),
        ({"ready": {"protocol": "stomp", "port": "amqp"}}, "ready: expected protocol"),
        ({"ready": {"protocol": "amqp-1.0", "port": "web"}}, "ready: expected protocol"),
        ({"stop": {"signal": "SIGSTOPP"}}, "unknown signal 'SIGSTOPP'"),
        ({"files": {"../etc/x": "y"}}, "must be a path inside the run directory"),
        ({"links": {"/abs": "y"}}, "links: '/abs' must be a path inside the run directory"),
        ({"fixed_paths": {"tmp/x.sock": "y"}}, "must be an absolute path"),
        ({"no_store": {"why": "x", "unless": []}}, "no_store: expected why and unless_present"),
        ({"url": None}, "missing 'url'"),
    ],
)
def test_a_bad_definition_is_refused_in_one_line(change: dict, message: str) -> None:
    with pytest.raises(UsageError) as exc:
        parse_definition({**MINIMAL, **change}, "t.yaml")
    assert message in str(exc.value) and "\n" not in str(exc.value)


def without_local_builds(tmp_path: Path, name: str = "lavinmq") -> Path:
    """A copy of a shipped definition that looks only where nothing is (this machine may keep the
    broker's build in ../shared/brokers, which the shipped definition finds)."""
    data = yaml.safe_load((ROOT / "adapters" / "lavinmq" / "targets" / f"{name}.yaml").read_text())
    data["binary"]["search"] = ["/nonexistent"]
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@needs_entry_points
def test_a_missing_binary_names_what_to_install_and_the_env_var(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("CONFORMANCE_LAVINMQ", raising=False)
    assert make_target("process:lavinmq").d.binary.search[0] == "../shared/brokers/lavinmq-2.9.1"  # found by its name, as the docs spell it
    target = make_target(f"process:{without_local_builds(tmp_path)}")
    with pytest.raises(TargetError) as exc:
        target.start()
    text = str(exc.value)
    assert "'lavinmq' not found" in text and "$CONFORMANCE_LAVINMQ" in text and "packagecloud" in text and "\n" not in text
    assert target.dir is None  # nothing was created
    monkeypatch.setenv("CONFORMANCE_LAVINMQ", "/nonexistent/lavinmq")
    with pytest.raises(TargetError, match=r"\$CONFORMANCE_LAVINMQ=/nonexistent/lavinmq is not a file"):
        make_target("process:targets/lavinmq.yaml").start()  # the older spelling finds the same file


def test_a_relative_env_binary_is_made_absolute(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The broker starts in its run directory: a path relative to the user's cwd must not reach it."""
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "lavinmq").write_text("#!/bin/sh\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CONFORMANCE_LAVINMQ", "bin/lavinmq")
    assert load_definition("lavinmq").binary.resolve("t") == str(tmp_path.resolve() / "bin" / "lavinmq")


def test_a_start_failure_line_never_holds_part_of_the_password(tmp_path: Path) -> None:
    """The log is scrubbed before the error line is cut at 400 characters: a cut through the
    password would otherwise leave its first characters in the message."""
    target = make_target("process:lavinmq")
    target.dir, target.password = tmp_path, "s3cretPassw0rdXYZ"
    target.log_file.write_text("Unhandled exception: failed " + "x" * 367 + target.password + "\n")
    line = target._log_tail()
    assert "s3cre" not in line and len(line) <= 400


@needs_entry_points
def test_process_without_a_definition_names_both_ways_to_give_one() -> None:
    with pytest.raises(TargetError, match=r"--target process:lavinmq\) or a file \(process:FILE\.yaml\)$"):
        make_target("process").start()


@needs_entry_points
def test_cli_with_a_missing_binary_exits_2_in_one_line(tmp_path: Path) -> None:
    # run_cli inherits PATH; lavinmq is not installed system-wide on this machine, which is the case to test.
    if shutil.which("lavinmq") or os.environ.get("CONFORMANCE_LAVINMQ"):
        pytest.skip("lavinmq is installed here")
    proc = run_cli("run", "--target", f"process:{without_local_builds(tmp_path)}", "--area", "persist", "--out", str(tmp_path / "r"), timeout=60)
    assert proc.returncode == 2, proc.stdout[-1500:] + proc.stderr[-1500:]
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "'lavinmq' not found" in lines[0], lines
    proc = run_cli("run", "--target", "process:targets/nope.yaml", "--area", "persist", "--out", str(tmp_path / "r2"), timeout=60)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and "not found" in lines[0], proc.stderr


@needs_entry_points
def test_proton_example_broker_lifecycle_restart_kill_and_nothing_left() -> None:
    if not Path("/usr/share/proton/examples/python/broker.py").exists():
        pytest.skip("the Proton example broker is not installed (apt-get install libqpid-proton11-dev-examples)")
    target = make_target("process:proton-example")
    target.start()
    try:
        port = target.ports["amqp"]
        run_dir = target.dir
        assert amqp10_ready(port) and target.check_alive() is None
        first = target._pid()
        target.restart()
        assert amqp10_ready(port) and target._pid() != first and target.ports["amqp"] == port
        target.kill()
        assert target.check_alive() is not None and not amqp10_ready(port)
        target.start()
        assert amqp10_ready(port)
        log = target.log_file.read_text()
        assert log.count("==== conformance") == 5 and "kill -9" in log and "stop (SIGTERM)" in log
    finally:
        token = target.token
        target.stop()
    assert marked_pids(token) == [] and not run_dir.exists()


@needs_entry_points
def test_persist_area_against_the_debian_rabbitmq_process_target(tmp_path: Path) -> None:
    """The restart and kill -9 cases run (not `unsupported`), and no process of the node survives the run."""
    if not Path("/usr/lib/rabbitmq/bin/rabbitmq-server").exists():
        pytest.skip("rabbitmq-server is not installed (apt-get install -y --no-install-recommends rabbitmq-server)")
    out = tmp_path / "run"
    proc = run_cli("run", "--target", "process:rabbitmq", "--area", "persist", "--queue-type", "classic",
                   "--out", str(out), timeout=150)
    assert proc.returncode in (0, 1), proc.stdout[-2000:] + proc.stderr[-2000:]
    run = read_run(out)
    assert (run["product"], run["profile"], run["status"]) == ("RabbitMQ", "rabbitmq-3.10", "finished")
    facts = run["target_facts"]
    assert facts["launcher"] == "process" and facts["definition"].endswith("targets/rabbitmq.yaml")
    recs = [r for r in read_results(out) if r["run_id"] == run["run_id"]]
    verdicts = {(r["requirement"], r.get("variant")): r["verdict"] for r in recs}
    # nothing unsupported for want of a fault: only the classic queue's clean refusal of x-delivery-limit (406)
    refused = [r for r in recs if r["verdict"] == "unsupported"]
    assert all(r["unsupported_kind"] == "refused" and "406" in r["observed"] for r in refused), refused
    assert len(recs) >= 3 and "error" not in verdicts.values(), verdicts
    # classic queues on 3.10.8 keep what the profile says, but for RabbitMQ's own loss of a queue
    # declared just before kill -9 (tests.support.kill_loss), which must be said as such
    assert not unexplained(recs), unexplained(recs)
    log = Path(facts["log"])
    assert log.parent == out and "kill -9" in log.read_text() and "stop (SIGTERM)" in log.read_text()
    # The watchdog stopped every process of the node (beam, epmd, helpers) and removed its directory.
    assert marked_pids(facts["token"]) == [], "processes of the launched node survived the run"
    assert not Path(facts["run_dir"]).exists()
    # The node's random password never reaches the run record: the URL is shown redacted.
    assert "***" in run["target_url"] and ":***@" in run["target_url"], run["target_url"]


def test_lavinmq_container_target_without_docker_fails_in_one_line(tmp_path: Path) -> None:
    if shutil.which("dockerd") or Path("/var/run/docker.sock").exists():
        pytest.skip("a Docker engine is present here: the container target would start")
    if "lavinmq" not in available_launchers():
        pytest.skip("the 'lavinmq' launcher entry point is not installed (pip install -e . in this checkout)")
    proc = run_cli("run", "--target", "lavinmq:2.4.3", "--area", "ack", "--out", str(tmp_path / "r"), timeout=60)
    assert proc.returncode == 2, proc.stdout[-1500:] + proc.stderr[-1500:]
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "lavinmq:2.4.3 needs a Docker engine" in lines[0] and "external URL" in lines[0], lines


def test_lavinmq_container_definition_pins_the_official_image() -> None:
    d = yaml.safe_load((ROOT / "docker" / "lavinmq" / "target.yaml").read_text())
    assert d["image"] == "cloudamqp/lavinmq" and d["amqp_port"] == 5672 and d["version"]
    if "lavinmq" in available_launchers():
        assert make_target("lavinmq:1.3.1").definition["version"] == "1.3.1"
        with pytest.raises(TargetError, match="not an image tag"):
            make_target("lavinmq:../../x")
    assert os.sep not in d["version"]


@needs_entry_points
def test_a_queue_type_with_catalogue_false_is_not_run(tmp_path: Path) -> None:
    """The LavinMQ profiles document stream queues but run the catalogue on classic only (judged here
    against the local RabbitMQ under --profile lavinmq-2.4: the mechanism, not LavinMQ's verdicts)."""
    if not Path("/usr/lib/rabbitmq/bin/rabbitmq-server").exists():
        pytest.skip("rabbitmq-server is not installed")
    out = tmp_path / "run"
    proc = run_cli("run", "--target", "process:rabbitmq", "--profile", "lavinmq-2.4", "-r", "ACK-MULTIPLE-UP-TO-TAG",
                   "--area", "ack", "--out", str(out), timeout=90)
    assert proc.returncode in (0, 1), proc.stdout[-1500:] + proc.stderr[-1500:]
    recs = list(read_results(out))
    # None: the queue-type-independent cases (basic.get-empty, delivery tags, ...) run once per target
    # (and the classic queue's configurations, classic+priority ...: a configuration of a queue type that does not run never runs)
    assert recs and {base_of(r["queue_type"]) for r in recs} == {"classic", None} and read_run(out)["profile"] == "lavinmq-2.4"


@needs_entry_points
def test_an_attached_process_target_restarts_and_kills_and_the_launcher_still_cleans_up() -> None:
    """xdist workers control the target through its handle; whatever they start, the watchdog stops."""
    if not Path("/usr/share/proton/examples/python/broker.py").exists():
        pytest.skip("the Proton example broker is not installed")
    from conformance.targets import attach_target

    target = make_target("process:proton-example")
    target.start()
    try:
        port, run_dir, token = target.ports["amqp"], target.dir, target.token
        other = attach_target(target.handle())
        assert other.url == target.url and other.can_restart
        other.kill()
        assert not amqp10_ready(port) and target.check_alive() is not None
        other.start()
        assert amqp10_ready(port) and target.check_alive() is None  # the launcher sees the worker's process
        other.stop()  # an attached controller leaves the broker running
        assert amqp10_ready(port)
    finally:
        target.stop()
    assert marked_pids(token) == [] and not run_dir.exists() and not amqp10_ready(port)
