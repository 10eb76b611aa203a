"""RabbitMQ: its launchers (a private node, a three-node cluster), profiles and process-target definition."""

from pathlib import Path

#: The profiles this product ships (entry-point group ``conformance.profiles``).
PROFILES_DIR = str(Path(__file__).parent / "profiles")
