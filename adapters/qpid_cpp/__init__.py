"""The Qpid C++ broker (qpidd): its profile."""

from pathlib import Path

#: The profiles this product ships (entry-point group ``conformance.profiles``).
PROFILES_DIR = str(Path(__file__).parent / "profiles")
