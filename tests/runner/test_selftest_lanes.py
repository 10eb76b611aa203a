"""The self-test's restart lane (conformance.nemesis.spare_node): with a second node, the runs that
restart the broker go there, beside the plain runs, and the kill matrix is the one a serial
self-test builds; without one (or when it does not boot) they go after the others, on the run's node.

The catalogue runs are replaced by a scripted ``execute`` (this is orchestration, not judging: the
judging is tests/cli/test_selftest.py's, and the real lane runs in tests/cli/test_selftest.py's full run
and bench/catalogue.py --selftest). The scripted runs check where each run was sent.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from conformance.runner.selftest import runs as st
from conformance.targets import Target

PLAIN = "ACK-ACKED-NEVER-REDELIVERED"
RESTART = "PERSIST-CONFIRMED-SURVIVES"
MAIN_URL, SPARE_URL = "amqp://main.invalid/", "amqp://spare.invalid/"


def _rec(req: str, verdict: str, qt: str = "classic") -> dict[str, Any]:
    return {"case_id": f"{req}[{qt}]", "requirement": req, "level": "MUST", "area": "x", "verdict": verdict, "observed": "o", "expected": "e"}


class Script:
    """What the scripted runs answer, and where each run went (label -> target URL)."""

    def __init__(self, expect_overlap: bool) -> None:
        self.sent: dict[str, str] = {}
        self.lock = threading.Lock()
        self.expect_overlap = expect_overlap
        self.restart_running = threading.Event()
        self.restart_done = threading.Event()
        self.plain_overlapped = False

    def execute(self, opts: st.Options, run: st.Run) -> st.Run:
        with self.lock:
            self.sent[run.label] = opts.target_url
        if run.mutation == "probe":
            req = RESTART if run.disruptive == "only" else PLAIN
            run.records = [_rec(req, "pass"), _rec(req, "pass", "quorum")]
            conns = [f"conformance {req} consumer"]
            run.meta = {"mutation": {"touches": {"acks-dropped": conns if req == PLAIN else [], "durable-flipped": conns if req == RESTART else []}}}
            return run
        if run.disruptive == "only":
            self.restart_running.set()
            self.restart_done.wait(5)  # held until the plain run has seen it going (bounded)
        elif self.expect_overlap:
            # a plain run sees the restart run going at the same time on the other node (bounded wait:
            # run one after the other, it would never see it and the test fails)
            self.plain_overlapped = self.restart_running.wait(5)
            self.restart_done.set()
        req = run.requirements[0]
        run.records = [_rec(req, "fail"), _rec(req, "fail", "quorum")]
        run.meta = {"mutation": {"rewritten": 2}}
        return run


class FakeNode(Target):
    def __init__(self, url: str, boots: bool = True) -> None:
        super().__init__(name="fake", url=url)
        self.boots, self.started, self.stopped = boots, False, False

    @property
    def can_restart(self) -> bool:
        return True

    def start(self) -> None:
        if not self.boots:
            raise RuntimeError("boot failed: port in use")
        self.started = True

    def stop(self) -> None:
        self.stopped = True

    def handle(self) -> dict[str, str]:
        return {"launcher": "fake", "node_dir": self.url}


def _selftest(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, spare: FakeNode | None) -> tuple[dict[str, Any], Script, list[str]]:
    script = Script(expect_overlap=spare is not None and spare.boots)
    if not script.expect_overlap:
        script.restart_done.set()
    monkeypatch.setattr(st, "execute", script.execute)
    said: list[str] = []
    opts = st.Options(target_url=MAIN_URL, handle={"launcher": "fake", "node_dir": "main"}, protocol="amqp-0-9-1", out=tmp_path,
                      mutations=["acks-dropped", "durable-flipped"], second_target=(lambda: spare) if spare is not None else None)
    matrix = st.selftest(opts, say=said.append)
    return matrix, script, said


def _comparable(m: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in m.items() if k not in ("wall_s", "runs")} | {"runs": [(r["label"], r["cases"]) for r in m["runs"]]}


def test_restart_runs_go_to_the_second_node_beside_the_plain_runs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    spare = FakeNode(SPARE_URL)
    lanes, script, said = _selftest(monkeypatch, tmp_path / "lanes", spare)
    assert script.sent == {"clean": MAIN_URL, "clean-restarts": SPARE_URL, "acks-dropped": MAIN_URL, "durable-flipped+restarts": SPARE_URL}
    assert script.plain_overlapped, "the restart run did not go at the same time as the plain run"
    assert spare.started and spare.stopped
    assert any("on the second node, beside the others" in line for line in said)
    serial, script_serial, _ = _selftest(monkeypatch, tmp_path / "serial", None)
    assert set(script_serial.sent.values()) == {MAIN_URL}
    assert _comparable(lanes) == _comparable(serial)  # the same matrix as the serial self-test's, runs in plan order
    assert lanes["ok"] and lanes["counts"]["kills"] == 4


def test_a_second_node_that_does_not_boot_leaves_the_restart_runs_on_the_run_s_node(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    spare = FakeNode(SPARE_URL, boots=False)
    matrix, script, said = _selftest(monkeypatch, tmp_path, spare)
    assert set(script.sent.values()) == {MAIN_URL}
    assert list(script.sent) == ["clean", "clean-restarts", "acks-dropped", "durable-flipped+restarts"]
    assert any("no second node for the restart runs (RuntimeError: boot failed: port in use)" in line for line in said), said
    assert matrix["ok"] and matrix["counts"]["kills"] == 4


@pytest.mark.timeout(300)
def test_a_launched_self_test_runs_its_restart_cases_on_a_second_real_node(tmp_path: Path) -> None:
    """End to end on two private RabbitMQ nodes: the clean run on the first, the restart cases (and
    the one mutation's restart run) on the second, the kill proven there, both nodes gone after."""
    import json
    import os
    import subprocess

    from tests.conftest import conformance_cmd

    out = tmp_path / "st"
    proc = subprocess.run(conformance_cmd("selftest", "--target", "rabbitmq-local", "--area", "persist", "-m", "persistence-forced", "--out", str(out)),
                          capture_output=True, text=True, timeout=280, stdin=subprocess.DEVNULL)
    assert (out / "killmatrix.json").exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "the restart cases on a second node beside it" in proc.stdout, proc.stdout[-2000:]
    nodes = {label: json.loads((out / "runs" / label / "run.json").read_text())["target_facts"]
             for label in ("clean", "clean-restarts", "persistence-forced+restarts")}
    assert nodes["clean-restarts"]["node"] == nodes["persistence-forced+restarts"]["node"] != nodes["clean"]["node"]
    m = json.loads((out / "killmatrix.json").read_text())
    assert {"case": "persist/test_restart.py::TestTransientFate::test[classic]", "mutation": "persistence-forced"}.items() <= \
        next(k for k in m["kills"] if k["case"].endswith("TestTransientFate::test[classic]")).items()
    # a clean-run failure may only be RabbitMQ 3.10.8's own loss of a queue at kill -9 (tests.support.kill_loss)
    from conformance.runner.results import read_results
    from tests.support.kill_loss import lost_to_kill

    lost = {r["case_id"] for r in read_results(out / "runs" / "clean-restarts") if lost_to_kill(r)}
    assert set(m["false_alarms"]) <= lost and m["clean_errors"] == [], (m["false_alarms"], lost)
    for facts in nodes.values():  # both nodes stopped, their directories removed
        assert not os.path.exists(facts["node_dir"]), facts


def test_no_second_node_when_the_selection_holds_only_restart_cases(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The failover area is restart cases only: a second node (a second three-node cluster there)
    would have nothing to overlap with, so none is made."""
    made: list[str] = []
    monkeypatch.setattr(st, "execute", Script(expect_overlap=False).execute)
    opts = st.Options(target_url=MAIN_URL, handle={"launcher": "fake", "node_dir": "main"}, protocol="amqp-0-9-1", out=tmp_path,
                      areas=["failover"], mutations=["acks-dropped"], second_target=lambda: made.append("spare") or FakeNode(SPARE_URL))
    st.selftest(opts, say=lambda line: None)
    assert made == []
