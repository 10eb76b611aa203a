"""amqps:// through the proton adapter: TLS from the first byte, the broker's certificate verified by
default, and a real AMQP 1.0 exchange over it (a TLS terminator in front of the Proton example broker,
which speaks no TLS itself)."""

from __future__ import annotations

import socket
import ssl
import subprocess
import threading
from pathlib import Path
from typing import Iterator

import pytest

from adapters.amqp10.proton_adapter import ProtonAdapter
from adapters.proton_example.launcher import DEFAULT_SCRIPT, ProtonExampleBroker
from conformance.api import AckMode
from conformance.errors import AdapterError, ConnectionLost

SECRET = "s3cr3t-pw"


@pytest.fixture(scope="module")
def cert(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (IP SAN), made with the openssl CLI."""
    d = tmp_path_factory.mktemp("tls")
    key, crt = d / "key.pem", d / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(crt)],
                   check=True, capture_output=True, timeout=60)
    return crt, key


def _listener() -> socket.socket:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    return srv


def test_amqps_starts_with_a_tls_handshake_and_never_sends_the_password_in_clear() -> None:
    srv = _listener()
    first: list[bytes] = []

    def accept() -> None:
        conn, _ = srv.accept()
        with conn:
            conn.settimeout(5)
            try:
                first.append(conn.recv(4096))
            except OSError:
                first.append(b"")

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    port = srv.getsockname()[1]
    with pytest.raises((ConnectionLost, AdapterError)) as err:
        ProtonAdapter().connect(f"amqps://user:{SECRET}@127.0.0.1:{port}", timeout=5, op_timeout=5)
    t.join(5)
    srv.close()
    assert first and first[0][:1] == b"\x16", first  # a TLS handshake record, not "AMQP"
    assert SECRET.encode() not in first[0] and SECRET not in str(err.value)


def test_an_untrusted_certificate_is_refused_by_default(cert: tuple[Path, Path]) -> None:
    crt, key = cert
    srv = _listener()
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(crt, key)

    def accept() -> None:
        conn, _ = srv.accept()
        try:
            with ctx.wrap_socket(conn, server_side=True):
                pass
        except (ssl.SSLError, OSError):
            pass  # the client aborts the handshake: that is the point

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    with pytest.raises(ConnectionLost, match="(?i)certificate|verify|handshake"):
        ProtonAdapter().connect(f"amqps://127.0.0.1:{srv.getsockname()[1]}", timeout=5, op_timeout=5)
    t.join(5)
    srv.close()


@pytest.fixture()
def tls_broker(cert: tuple[Path, Path]) -> Iterator[int]:
    """The Proton example broker behind a TLS terminator on its own port."""
    if not Path(DEFAULT_SCRIPT).is_file():
        pytest.skip(f"{DEFAULT_SCRIPT} missing: apt-get install libqpid-proton11-dev-examples")
    crt, key = cert
    broker = ProtonExampleBroker()
    broker.start()
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(crt, key)
    srv = _listener()
    stop = threading.Event()

    def pipe(a: socket.socket, b: socket.socket) -> None:
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass
        finally:
            for s in (a, b):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def serve() -> None:
        srv.settimeout(0.5)
        while not stop.is_set():
            try:
                raw, _ = srv.accept()
            except (TimeoutError, OSError):
                continue
            try:
                tls = ctx.wrap_socket(raw, server_side=True)
            except (ssl.SSLError, OSError):
                raw.close()
                continue
            up = socket.create_connection(("127.0.0.1", broker.port))
            threading.Thread(target=pipe, args=(tls, up), daemon=True).start()
            threading.Thread(target=pipe, args=(up, tls), daemon=True).start()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        yield srv.getsockname()[1]
    finally:
        stop.set()
        t.join(5)
        srv.close()
        broker.stop()


def test_a_message_round_trip_over_amqps(tls_broker: int, cert: tuple[Path, Path]) -> None:
    crt, _ = cert
    conn = ProtonAdapter().connect(f"amqps://127.0.0.1:{tls_broker}?cafile={crt}", timeout=10, op_timeout=10)
    try:
        session = conn.session()
        session.enable_confirms()
        session.publish("tls-q", b"over tls", message_id="t1")
        got = session.consume("tls-q", ack_mode=AckMode.MANUAL, prefetch=1).next(10)
        assert (got.message_id, got.body) == ("t1", b"over tls")
        session.ack(got.tag)
    finally:
        conn.close()


def test_a_missing_ca_file_is_a_one_line_error(tmp_path: Path) -> None:
    with pytest.raises(AdapterError, match="no CA file"):
        ProtonAdapter().connect(f"amqps://127.0.0.1:1?cafile={tmp_path / 'none.pem'}", timeout=2)
