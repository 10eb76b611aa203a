"""YAML loading for the suite's data files, through libyaml when PyYAML was built with it.

Every ``conformance`` process (each self-test run is one) reads about thirty YAML files at start:
catalogue, rules, profiles, capabilities, mutation expectations. The pure-Python SafeLoader took
most of a run's configure time on a loaded machine; the C loader parses the same documents into the
same objects several times faster.
"""

from __future__ import annotations

from typing import Any

import yaml

_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def safe_load(text: str) -> Any:
    """``yaml.safe_load`` with the C loader when available (same tags, same objects)."""
    return yaml.load(text, Loader=_Loader)  # noqa: S506 - a safe loader
