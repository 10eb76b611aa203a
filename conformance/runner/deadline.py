"""The case deadline that cannot be lost.

pytest-timeout's signal method raises ``Failed`` from a one-shot SIGALRM handler in the main thread.
Python runs a signal handler between any two bytecodes, including those of a finalizer (a socket a
previous, interrupted case left unclosed is collected and its ResourceWarning formats its repr), and
an exception raised in a finalizer is printed as "Exception ignored in ..." and dropped. The
deadline then never fires and the case runs on, to a pass: a 1 ms deadline let a 60 ms case pass
about once in six runs on an idle machine.

Two defences, both here:

- the timer re-fires every ``REFIRE_S`` after the deadline until the runner disarms it, so a lost
  alarm is followed by another one;
- a scenario that returns after its deadline is an error all the same (``overrun``): a case never
  passes past its deadline, whatever happened to the alarm.
"""

from __future__ import annotations

import signal
import threading
import time

import pytest

#: How often the alarm repeats after the deadline until the runner catches it (see the docstring).
REFIRE_S = 0.05
MESSAGE = "Timeout (>%ss) from pytest-timeout."


def set_timer(item: pytest.Item, timeout: float) -> bool:
    """Arm a repeating SIGALRM for ``item`` (main thread only); False leaves it to pytest-timeout."""
    if threading.current_thread() is not threading.main_thread():
        return False

    def handler(signum: int, frame: object) -> None:
        __tracebackhide__ = True
        pytest.fail(MESSAGE % timeout)

    def cancel() -> None:
        disarm()
        signal.signal(signal.SIGALRM, signal.SIG_DFL)

    cancel.timeout = timeout  # type: ignore[attr-defined]  # what rearm() arms again
    item.cancel_timeout = cancel  # type: ignore[attr-defined]  # pytest-timeout's cancel hook calls it
    signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, timeout, REFIRE_S)
    return True


def disarm() -> None:
    """Stop the alarm: the runner caught the deadline and now writes its record undisturbed."""
    if threading.current_thread() is threading.main_thread():
        signal.setitimer(signal.ITIMER_REAL, 0)


def rearm(item: pytest.Item) -> None:
    """A fresh deadline for the case's second attempt (after a restart cut its first one short).

    Only a case whose deadline :func:`set_timer` armed (pytest-timeout's thread method keeps its own)."""
    limit = getattr(getattr(item, "cancel_timeout", None), "timeout", None)
    if limit is not None:
        set_timer(item, limit)


def of(item: pytest.Item) -> float | None:
    """The item's deadline in seconds (its ``timeout`` mark), or None."""
    mark = item.get_closest_marker("timeout")
    if mark is None:
        return None
    value = mark.args[0] if mark.args else mark.kwargs.get("timeout")
    return float(value) if value is not None else None


def overrun(item: pytest.Item, started: float) -> None:
    """Raise the deadline's ``Failed`` if the case ran past its deadline without being interrupted."""
    limit = of(item)
    if limit is not None and time.monotonic() - started > limit:
        disarm()
        pytest.fail(MESSAGE % limit + f" The case ran {time.monotonic() - started:.3f}s: its alarm was lost, the case is ended all the same")
