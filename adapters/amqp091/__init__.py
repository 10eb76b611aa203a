"""AMQP 0-9-1 through pika: the client, its wire codec and mutations, the protocol's baseline profile."""

from pathlib import Path

#: The profiles this product ships (entry-point group ``conformance.profiles``).
PROFILES_DIR = str(Path(__file__).parent / "profiles")
