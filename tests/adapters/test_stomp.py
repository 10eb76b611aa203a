"""A plugin package end to end: the shared catalogue through the STOMP plugin package on two real STOMP
brokers launched privately on loopback (ActiveMQ Classic from Debian, RabbitMQ's rabbitmq_stomp
plugin), with no STOMP name anywhere in the core. The two runs go at once (each in its own
``conformance run`` process) to keep the file within its share of CI's time."""

from __future__ import annotations

import os
import subprocess
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Iterator

import pytest

from conformance.api import AckMode
from conformance.cli import EXIT_OK
from conformance.runner.results import read_results, read_run
from tests.conftest import ROOT, conformance_cmd

AREAS = ("ack", "nack")
#: The package's requirement pack (conformance_stomp/pack), loaded with its adapter: its area runs too
#: where the installed package registers it (an install older than the pack does not).
PACK_INSTALLED = "stomp" in {e.name for e in entry_points(group="conformance.packs")}

pytestmark = pytest.mark.skipif(
    "stomp" not in {e.name for e in entry_points(group="conformance.adapters")},
    reason="the STOMP plugin is not installed (scripts/install.sh installs packages/conformance-stomp)",
)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[subprocess.CompletedProcess[str], Path]]:
    """One run per broker, both at once; each launches and stops its own private broker."""
    if not Path("/usr/share/activemq/bin/activemq.jar").exists():
        pytest.skip("ActiveMQ is not installed (scripts/install.sh installs the Debian package)")
    # a broken pack is installed too; nobody selects it, so it must not stop either run
    from tests.catalogue.test_packs import install_pack

    site = tmp_path_factory.mktemp("site")
    install_pack(site, "broken-pack", "broken", "no_such_pack_module", broken=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT), os.environ.get("PYTHONPATH", "")])}
    started = {}
    for target in ("activemq-local", "rabbitmq-stomp"):
        out = tmp_path_factory.mktemp(target)
        args = ["run", "--adapter", "stomp", "--target", target, "--out", str(out), "--case-timeout", "30"]
        for area in AREAS + (("stomp",) if PACK_INSTALLED else ()):
            args += ["--area", area]
        started[target] = (subprocess.Popen(conformance_cmd(*args), cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True), out)
    done = {}
    for target, (proc, out) in started.items():
        stdout, _ = proc.communicate(timeout=240)
        done[target] = (subprocess.CompletedProcess(proc.args, proc.returncode, stdout, ""), out)
    return done


def _by_case(out: Path) -> dict[tuple[str, str | None, str | None], dict]:
    return {(r["requirement"], r["queue_type"], r["variant"]): r for r in read_results(out)}


@pytest.mark.parametrize("target, product, profile", [("activemq-local", "ActiveMQ", "activemq-5-stomp"),
                                                      ("rabbitmq-stomp", "RabbitMQ", "rabbitmq-3.10-stomp")])
def test_the_catalogue_runs_over_stomp_with_verdicts(runs: dict, target: str, product: str, profile: str) -> None:
    proc, out = runs[target]
    assert proc.returncode == EXIT_OK, proc.stdout[-4000:]
    run = read_run(out)
    assert (run["product"], run["protocol"], run["adapter"], run["profile"], run["status"]) == (product, "stomp-1.2", "stomp", profile, "finished")
    recs = list(read_results(out))
    assert recs and all(r["protocol"] == "stomp-1.2" for r in recs)
    got = _by_case(out)
    # The shared requirements apply by capability and really ran over STOMP (pass, not skipped).
    for rid in ("ACK-REDELIVER-ON-CONNECTION-LOSS", "ACK-REDELIVER-ON-CHANNEL-CLOSE", "ACK-ACKED-NEVER-REDELIVERED",
                "ACK-AUTO-REMOVED-ON-DELIVERY", "ACK-CLIENT-INDIVIDUAL", "ACK-CLIENT-CUMULATIVE", "NACK-REJECT-DISCARD"):
        cells = [r for (req, _, _), r in got.items() if req == rid]
        assert cells and all(r["verdict"] == "pass" for r in cells), (rid, [(r["verdict"], r["observed"]) for r in cells])
    # What STOMP cannot express is unsupported with the capability named, never a pass.
    multiple = got[("ACK-MULTIPLE-UP-TO-TAG", "classic", None)]
    assert multiple["verdict"] == "unsupported" and "ack.range" in multiple["reason"] and "stomp" in multiple["reason"]


def test_nack_is_the_brokers_choice_and_the_profile_documents_it(runs: dict) -> None:
    """STOMP 1.2 leaves NACK to the server: RabbitMQ requeues, ActiveMQ dead-letters (a documented
    deviation with its citation, shown beside the spec verdict, never a silent pass)."""
    rabbit = _by_case(runs["rabbitmq-stomp"][1])
    assert rabbit[("NACK-SINGLE-REQUEUE", "classic", None)]["verdict"] == "pass"
    assert rabbit[("NACK-SINGLE-REQUEUE", "quorum", None)]["verdict"] == "pass"
    amq = _by_case(runs["activemq-local"][1])[("NACK-SINGLE-REQUEUE", "classic", None)]
    assert amq["verdict"] == "deviation" and "came back []" in amq["observed"], amq
    assert "ARTEMIS-1983" in amq["citation"] and "NACK" in amq["reason"]


@pytest.mark.parametrize("target, rows", [("activemq-local", {None, "classic"}), ("rabbitmq-stomp", {None, "classic", "quorum"})])
def test_the_stomp_requirement_pack_runs_beside_the_catalogue(runs: dict, target: str, rows: set) -> None:
    """The pack's requirements (STOMP 1.2's own keywords) ran through their raw-frame cases and hold
    on both brokers; the broken pack installed beside it was never loaded (the run finished)."""
    if not PACK_INSTALLED:
        pytest.skip("this install of the STOMP package predates its requirement pack (pip install -e packages/conformance-stomp)")
    _, out = runs[target]
    recs = [r for r in read_results(out) if r["area"] == "stomp"]
    got = {(r["requirement"], r["queue_type"]): (r["verdict"], r["level"]) for r in recs}
    want = {("STOMP-RECEIPT-ID", "MUST"), ("STOMP-INDIVIDUAL-ACK-NOT-CUMULATIVE", "MUST"),
            ("STOMP-SEND-ERROR-THEN-CLOSE", "MUST"), ("STOMP-CLIENT-ACK-REDELIVER-ON-CONNECTION-FAILURE", "MAY")}
    assert {(rid, level) for (rid, _), (_, level) in got.items()} == want
    assert {qt for _, qt in got} == rows
    assert all(v == "pass" for v, _ in got.values()), got
    assert all(r["case_id"].startswith("stomp/test_frames.py::") for r in recs)


def test_no_broker_process_outlives_the_runs(runs: dict) -> None:
    leftovers = subprocess.run(["pgrep", "-f", "conformance-activemq-"], capture_output=True, text=True).stdout.split()
    assert not leftovers, f"ActiveMQ processes left running: {leftovers}"


# --- the adapter kit: conformance adapter-check ---------------------------------------------------

@pytest.fixture(scope="module")
def activemq() -> Iterator[Any]:
    if not Path("/usr/share/activemq/bin/activemq.jar").exists():
        pytest.skip("ActiveMQ is not installed (scripts/install.sh installs the Debian package)")
    from conformance.targets import make_target

    target = make_target("activemq-local")
    target.start()
    try:
        yield target
    finally:
        target.stop()


def _broken_adapter() -> Any:
    """The STOMP adapter with two contract breaks a third party could make: a consumer that waits
    past its deadline, and a client library error leaking out of ack."""
    from conformance_stomp.adapter import StompAdapter, StompConnection, StompConsumer, StompSession

    class SlowConsumer(StompConsumer):
        def next(self, timeout: float) -> Any:
            return super().next(timeout * 8)

    class LeakySession(StompSession):
        def consume(self, queue: str, **kw: Any) -> Any:
            return SlowConsumer(self, queue, kw.get("ack_mode", AckMode.MANUAL), kw.get("prefetch"))

        def ack(self, tag: int, *, multiple: bool = False) -> None:
            if tag not in self._tags:
                raise KeyError(tag)  # the library's own error, not SettlementRefused / ChannelClosed
            super().ack(tag, multiple=multiple)

    class BrokenConnection(StompConnection):
        def session(self) -> Any:
            return LeakySession(self)

    class BrokenAdapter(StompAdapter):
        name = "broken-stomp"

        def connect(self, url: str, *, timeout: float = 10.0, name: str | None = None, op_timeout: float | None = None) -> Any:
            return BrokenConnection(url, timeout=timeout, name=name, op_timeout=op_timeout or 10.0)

    return BrokenAdapter()


def test_adapter_check_passes_for_stomp(activemq: Any) -> None:
    from conformance.api import adapters
    from conformance.cli.adapter_check import check

    results = check(adapters()["stomp"](), activemq.url)
    assert [r.line() for r in results if r.outcome == "broken"] == []
    assert {r.operation for r in results} >= {"connect", "publish + sync", "consume/next", "next deadline", "cut", "transactions"}


def test_adapter_check_catches_a_broken_adapter_precisely(activemq: Any) -> None:
    from conformance.cli.adapter_check import check

    broken = {r.operation: r.detail for r in check(_broken_adapter(), activemq.url) if r.outcome == "broken"}
    assert set(broken) == {"next deadline", "ack unknown tag"}, broken
    assert "called next(0.3)" in broken["next deadline"] and "expected OperationTimeout within" in broken["next deadline"]
    assert "raised builtins.KeyError" in broken["ack unknown tag"] and "expected the neutral errors" in broken["ack unknown tag"]


def test_a_frame_exact_fault_over_stomp(activemq: Any) -> None:
    """The STOMP framer lets the fault proxy cut at a named frame: the connection is reset on its
    COMMIT before the broker sees it, so the transaction's SENDs are never delivered."""
    from conformance.api import QueueSpec, adapters
    from conformance.errors import ConnectionLost, OperationTimeout
    from conformance.nemesis.faults import cut
    from conformance.nemesis.proxy_isolated import IsolatedFaultProxy

    stomp = adapters()["stomp"]()
    proxy = IsolatedFaultProxy.for_url(activemq.url).start()
    try:
        fault = proxy.arm(cut("COMMIT"))
        conn = stomp.connect(proxy.url(activemq.url), name="conformance fault test")
        s = conn.session()
        q = f"conformance.fault.{conn.server.version}.{id(conn)}"
        s.declare_queue(QueueSpec(name=q))
        s.select_tx()
        s.publish(q, b"x", message_id="t1")
        with pytest.raises(ConnectionLost):
            s.commit()
        assert fault.wait(5.0) and "COMMIT" in (fault.hit or ""), fault.hit
        other = stomp.connect(activemq.url, name="conformance fault test check").session()
        consumer = other.consume(q)
        with pytest.raises(OperationTimeout, match="no MESSAGE"):
            consumer.next(1.0)
        other.close()
        assert "SEND" in proxy.trace.render() and "COMMIT" in proxy.trace.render()
    finally:
        proxy.close()
