"""Decoded AMQP 1.0 values (python-qpid-proton's codec) as plain JSON-able data, for observations
and traces: binary as hex, described values by their descriptor, maps as [key, value] pairs."""

from __future__ import annotations

from typing import Any


def plain(value: Any) -> Any:
    """A decoded AMQP value as JSON-able data: binary as hex, described values by their descriptor."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    if isinstance(value, bool) or value is None or isinstance(value, (int, float, str)):
        return value if not isinstance(value, int) or isinstance(value, bool) else int(value)
    if hasattr(value, "descriptor") and hasattr(value, "value"):
        d = value.descriptor
        return {"descriptor": int(d) if isinstance(d, int) else str(d), "value": plain(value.value)}
    if hasattr(value, "elements"):
        return [plain(e) for e in value.elements]
    if isinstance(value, dict):
        return [[plain(k), plain(v)] for k, v in value.items()]
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return str(value)
