"""Entry-point discovery: the core knows adapters and target launchers only through these groups."""

from __future__ import annotations

from functools import cache
from importlib.metadata import entry_points
from typing import Any

from conformance.errors import UsageError


@cache
def load_group(group: str) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for ep in entry_points(group=group):
        try:
            found[ep.name] = ep.load()
        except Exception as exc:  # a broken third-party plugin must not take the suite down
            raise UsageError(f"plugin {ep.name!r} in {group} failed to load: {exc}") from exc
    return found


def load_one(group: str, name: str) -> Any | None:
    """Only the named plugin of ``group`` (None if none is installed under that name): selecting one
    adapter must not import, or fail on, every other plugin installed."""
    for ep in entry_points(group=group, name=name):
        try:
            return ep.load()
        except Exception as exc:  # the selected plugin is broken: one line naming it
            raise UsageError(f"plugin {ep.name!r} in {group} failed to load: {exc}") from exc
    return None
