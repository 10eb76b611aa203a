"""The blocking operation under way in each thread, so a case deadline that interrupts it is named.

Adapters wrap each blocking wait in :func:`inflight`; when the case deadline (pytest-timeout) fires
inside one, the case's error says "<operation>: no <reply> after Ns" (:func:`deadline_text`) instead
of pointing at a client library's source line.
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Iterator

_inflight = threading.local()


@contextlib.contextmanager
def inflight(operation: str, reply: str) -> Iterator[None]:
    """Mark the blocking operation under way in this thread, so a case deadline that fires during
    it is reported as "<operation>: no <reply>" instead of a client library's source line."""
    previous = getattr(_inflight, "op", None)
    _inflight.op = (operation, reply, time.monotonic())
    try:
        yield
    except BaseException as exc:
        if type(exc).__name__ == "Failed":  # the case deadline (pytest-timeout) raised mid-wait
            _inflight.interrupted = (operation, reply, time.monotonic() - _inflight.op[2])
        raise
    finally:
        _inflight.op = previous


def deadline_text(case_timeout: float) -> str | None:
    """The one-line error of a case its deadline interrupted inside a blocking operation, or None.
    Reads (and forgets) the operation the deadline interrupted, else the one still under way."""
    hit = getattr(_inflight, "interrupted", None)
    _inflight.interrupted = None
    if hit is None:
        op = getattr(_inflight, "op", None)
        if op is None:
            return None
        hit = (op[0], op[1], time.monotonic() - op[2])
    operation, reply, waited = hit
    return f"Timeout: case deadline {case_timeout:g}s reached in {operation}: no {reply} after {waited:.1f}s"


def clear_interrupted() -> None:
    """Forget a previous case's interrupted operation (called when a case starts)."""
    _inflight.interrupted = None
