"""STOMP 1.2 plugin for the broker conformance suite: adapter (stomp.py), targets (ActiveMQ Classic,
RabbitMQ's STOMP plugin) and their profiles. Registered through entry points only (pyproject.toml)."""

from pathlib import Path

#: Profiles of the STOMP brokers, found by the core through the ``conformance.profiles`` group.
PROFILES_DIR = str(Path(__file__).parent / "profiles")
