"""AMQP 1.0 through python-qpid-proton: the client, its admin backends, wire codec, mutations and baseline profile."""

from pathlib import Path

#: The profiles this product ships (entry-point group ``conformance.profiles``).
PROFILES_DIR = str(Path(__file__).parent / "profiles")
