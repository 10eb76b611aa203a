"""The proton adapter's errors against a real broker: one line with the cause, never a hang."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest

from adapters.amqp10.proton_adapter import ProtonAdapter
from adapters.rabbitmq.launcher import RabbitMQLocalNode
from conformance.api import AckMode, QueueSpec
from conformance.errors import ChannelClosed, ConnectionLost, SettlementRefused, TargetCannot
from tests.e2e.test_e2e_rabbitmq import run_cli


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_connection_refused_is_one_line() -> None:
    start = time.monotonic()
    with pytest.raises(ConnectionLost) as exc:
        ProtonAdapter().connect(f"amqp://u:p@127.0.0.1:{closed_port()}/")
    assert "Connection refused" in str(exc.value) and "\n" not in str(exc.value)
    assert time.monotonic() - start < 10


def test_bad_credentials_name_the_condition(rabbit: RabbitMQLocalNode) -> None:
    with pytest.raises(ConnectionLost) as exc:
        ProtonAdapter().connect(rabbit.url.replace(f":{rabbit.password}@", ":wrong@"))
    assert "amqp:unauthorized-access" in str(exc.value)
    assert rabbit.password not in str(exc.value)


def test_a_missing_address_is_refused_with_404(rabbit: RabbitMQLocalNode) -> None:
    session = ProtonAdapter().connect(rabbit.url).session()
    with pytest.raises(ChannelClosed) as exc:
        session.consume("conformance.no-such-queue")
    assert exc.value.code == 404 and "amqp:not-found" in exc.value.text


def test_a_refused_coordinator_is_target_unsupported(rabbit: RabbitMQLocalNode) -> None:
    session = ProtonAdapter().connect(rabbit.url).session()
    with pytest.raises(TargetCannot) as exc:
        session.select_tx()
    assert "amqp:not-implemented" in str(exc.value)


def test_settling_a_presettled_delivery_is_refused_by_the_client(rabbit: RabbitMQLocalNode) -> None:
    conn = ProtonAdapter().connect(rabbit.url)
    s = conn.session()
    s.enable_confirms()
    q = f"conformance.adapter.{time.monotonic_ns()}"
    s.declare_queue(QueueSpec(name=q))
    try:
        s.publish(q, b"x", message_id="m1")
        c = s.consume(q, ack_mode=AckMode.AUTO)
        d = c.next(10)
        assert d.presettled is True and c.granted["snd-settle-mode"] == "settled"
        with pytest.raises(SettlementRefused, match="no release or rejection"):
            s.reject(d.tag, requeue=True)
    finally:
        s.delete_queue(q)
        conn.close()


def test_receiver_modes_outcomes_and_a_refused_second_mode(rabbit: RabbitMQLocalNode) -> None:
    conn = ProtonAdapter().connect(rabbit.url)
    s = conn.session()
    s.enable_confirms()
    q = f"conformance.adapter.{time.monotonic_ns()}"
    s.declare_queue(QueueSpec(name=q))
    try:
        s.publish(q, b"x", message_id="m1")
        r = s.receiver(q, snd_settle_mode="settled", credit=1)
        assert r.granted["snd-settle-mode"] == "settled" and r.granted["outcomes"]  # RabbitMQ 3.x lists its outcomes
        assert "amqp:modified:list" not in r.granted["outcomes"]
        assert r.next(10).presettled is True and r.credit == 0
        assert r.detach(5).startswith("answered")
        assert s.transfer(q, b"y", message_id="m2", timeout=5) == "accepted"
        with pytest.raises(TargetCannot, match="amqp:not-implemented"):
            conn.session().receiver(q, rcv_settle_mode="second")
    finally:
        s.delete_queue(q)
        conn.close()


def test_a_session_window_counts_frames_of_the_max_frame_size_asked(rabbit: RabbitMQLocalNode) -> None:
    conn = ProtonAdapter().connect(rabbit.url + ("&" if "?" in rabbit.url else "?") + "max-frame-size=4096")
    try:
        s = conn.session(incoming_window=2)
        assert conn._loop.conn.transport.max_frame_size == 4096
        assert s._ssn.incoming_capacity == 2 * 4096
    finally:
        conn.close()


def test_cli_with_the_proton_adapter_and_no_broker_exits_2_in_one_line(tmp_path: Path) -> None:
    proc = run_cli("run", "--target", f"amqp://u:secret@127.0.0.1:{closed_port()}/", "--adapter", "proton", "--area", "link",
                   "--out", str(tmp_path / "r"))
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "unreachable" in lines[0] and "Connection refused" in lines[0] and "secret" not in proc.stderr


@pytest.mark.parametrize("target", ["qpid-broker-j", "activemq-artemis"])
def test_container_targets_without_docker_fail_in_one_line(target: str, tmp_path: Path) -> None:
    """No Docker engine on this machine: the container target says so in one line and exits 2."""
    import shutil

    if shutil.which("dockerd") or Path("/var/run/docker.sock").exists():
        pytest.skip("a Docker engine is present here: the container target would start")
    proc = run_cli("run", "--target", target, "--adapter", "proton", "--area", "link", "--out", str(tmp_path / "r"))
    assert proc.returncode == 2, proc.stdout[-1500:] + proc.stderr[-1500:]
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "needs a Docker engine" in lines[0] and "external URL" in lines[0]
