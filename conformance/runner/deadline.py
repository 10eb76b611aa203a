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
from collections.abc import Callable
from typing import NoReturn

#: How often the alarm repeats after the deadline until the runner catches it (see the docstring).
REFIRE_S = 0.05
MESSAGE = "Timeout (>%ss) from pytest-timeout."


class Deadline:
    """One case's deadline: ``seconds`` (None: none), and ``expire``, which raises the exception the
    deadline ends a case with (the pytest plugin hands pytest-timeout's: the runner recognises it by
    its name, ``Failed``, as the adapters' in-flight marks do)."""

    def __init__(self, seconds: float | None, expire: Callable[[str], NoReturn]) -> None:
        self.seconds = seconds
        self.expire = expire
        #: True once :meth:`arm` set the repeating alarm (pytest-timeout's thread method keeps its own).
        self.armed = False

    @property
    def can_arm(self) -> bool:
        """A signal handler is the main thread's only: elsewhere pytest-timeout keeps the deadline."""
        return self.seconds is not None and threading.current_thread() is threading.main_thread()

    def arm(self) -> bool:
        """Arm a repeating SIGALRM (main thread only); False leaves the deadline to pytest-timeout."""
        if not self.can_arm:
            return False
        assert self.seconds is not None
        seconds, expire = self.seconds, self.expire

        def handler(signum: int, frame: object) -> None:
            __tracebackhide__ = True
            expire(MESSAGE % seconds)

        signal.signal(signal.SIGALRM, handler)
        signal.setitimer(signal.ITIMER_REAL, seconds, REFIRE_S)
        self.armed = True
        return True

    def cancel(self) -> None:
        """The case is over: no alarm, and the default SIGALRM handler back."""
        disarm()
        signal.signal(signal.SIGALRM, signal.SIG_DFL)

    def rearm(self) -> None:
        """A fresh deadline for the case's second attempt (after a restart cut its first one short).

        Only a deadline :meth:`arm` armed (pytest-timeout's thread method keeps its own)."""
        if self.armed:
            self.arm()

    def overrun(self, started: float) -> None:
        """End the case the deadline's way if it ran past its deadline without being interrupted."""
        if self.seconds is not None and time.monotonic() - started > self.seconds:
            disarm()
            self.expire(MESSAGE % self.seconds
                        + f" The case ran {time.monotonic() - started:.3f}s: its alarm was lost, the case is ended all the same")


def disarm() -> None:
    """Stop the alarm: the runner caught the deadline and now writes its record undisturbed."""
    if threading.current_thread() is threading.main_thread():
        signal.setitimer(signal.ITIMER_REAL, 0)
