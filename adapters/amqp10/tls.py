"""TLS for the AMQP 1.0 connections of this adapter and of its queue admin backends."""

from __future__ import annotations

import os

from proton import SSL, SSLDomain

from conformance.errors import AdapterError

#: Where Debian keeps the system's trusted CA certificates (ca-certificates), the default trust for amqps.
SYSTEM_CA_FILE = "/etc/ssl/certs/ca-certificates.crt"


def tls_client(query: dict[str, list[str]]) -> SSLDomain:
    """TLS for an ``amqps://`` URL: the broker's certificate is verified against the system CAs (or
    the ``?cafile=`` given) and must name the host, so SASL credentials only ever travel encrypted.
    A proton built without TLS refuses the URL rather than fall back to a clear-text connection."""
    if not SSL.present():
        raise AdapterError("amqps:// needs TLS, but this python-qpid-proton was built without SSL support; "
                           "install it with OpenSSL headers present, or use amqp://")
    cafile = (query.get("cafile") or [SYSTEM_CA_FILE])[0]
    if not os.path.isfile(cafile):
        raise AdapterError(f"amqps://: no CA file at {cafile} to verify the broker's certificate (give ?cafile=<pem>)")
    domain = SSLDomain(SSLDomain.MODE_CLIENT)
    domain.set_trusted_ca_db(cafile)
    domain.set_peer_authentication(SSLDomain.VERIFY_PEER_NAME, cafile)
    return domain
