"""LavinMQ: its profiles and process-target definitions (its container target is docker/lavinmq)."""

from pathlib import Path

#: The profiles this product ships (entry-point group ``conformance.profiles``).
PROFILES_DIR = str(Path(__file__).parent / "profiles")
