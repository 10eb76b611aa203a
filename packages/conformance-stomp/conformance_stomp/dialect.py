"""The broker dialect of STOMP: data from ``dialects.yaml`` keyed on the CONNECTED ``server`` header,
overridden by URL query options (``stomp://u:p@h:61613/?prefetch-header=...``).

Why data: STOMP 1.2 leaves destinations, prefetch, redelivery marking and NACK's meaning to the
server. Encoding each broker's choice as a cited entry keeps the adapter free of branches on a
broker's name, and lets a team point the adapter at a new STOMP broker with a URL option.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from conformance import yamlio

KEYS = ("queue-destination", "message-id-header", "redelivered-header", "prefetch-header", "nack-discard-headers",
        "expiration-header", "stats")


@cache
def _table() -> dict[str, dict[str, dict[str, Any]]]:
    data: dict[str, dict[str, dict[str, Any]]] = yamlio.safe_load((Path(__file__).parent / "dialects.yaml").read_text())
    return data


@dataclass(frozen=True)
class Dialect:
    product: str
    values: dict[str, Any]
    sources: dict[str, str]

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def destination(self, queue: str) -> str:
        return str(self.values["queue-destination"]).format(name=queue)


def dialect_for(product: str, options: dict[str, str]) -> Dialect:
    """The default entries, then the product's, then URL options (their source says so)."""
    table = _table()
    values = {k: v["value"] for k, v in table["default"].items()}
    sources = {k: v["source"] for k, v in table["default"].items()}
    for k, v in table.get(product, {}).items():
        values[k], sources[k] = v["value"], v["source"]
    for k in KEYS:
        if k in options:
            values[k], sources[k] = options[k], "URL option"
    return Dialect(product, values, sources)
