"""The case deadline survives an alarm that lands in a finalizer (conformance.runner.deadline)."""

from __future__ import annotations

import gc
import sys
import time

import pytest

from conformance.runner.deadline import Deadline


class _SlowFinalizer:
    """Busy in __del__ when the alarm fires: Python prints and drops what a finalizer raises."""

    def __del__(self) -> None:
        end = time.monotonic() + 0.03
        while time.monotonic() < end:
            pass


def test_an_alarm_swallowed_by_a_finalizer_fires_again(monkeypatch: pytest.MonkeyPatch) -> None:
    # As in a catalogue run (run_args leaves pytest's unraisableexception plugin out): the dropped
    # exception goes to a plain hook, not to pytest's, which a re-fired alarm would interrupt.
    monkeypatch.setattr(sys, "unraisablehook", lambda unraisable: None)
    deadline = Deadline(0.01, pytest.fail)
    assert deadline.arm()
    started = time.monotonic()
    try:
        with pytest.raises(pytest.fail.Exception, match="Timeout"):
            _SlowFinalizer()  # collected at once: the first alarm fires inside its __del__ and is lost
            gc.collect()
            while time.monotonic() - started < 2:
                pass
    finally:
        deadline.cancel()
    assert time.monotonic() - started < 1.0


def test_a_case_that_returns_past_its_deadline_is_ended_all_the_same() -> None:
    deadline = Deadline(0.01, pytest.fail)
    deadline.overrun(time.monotonic())  # inside: nothing happens
    with pytest.raises(pytest.fail.Exception, match="alarm was lost"):
        deadline.overrun(time.monotonic() - 0.5)
    Deadline(None, pytest.fail).overrun(time.monotonic() - 0.5)  # no deadline: never overrun
    assert not Deadline(None, pytest.fail).arm()


def test_the_plugin_arms_a_case_s_deadline_from_its_timeout_mark() -> None:
    """What the pytest plugin hands the runner: the armed deadline, else the ``timeout`` mark's."""
    from conformance.pytest_plugin.fixtures import deadline_of
    from conformance.pytest_plugin.selection import set_timer

    class Item:
        def __init__(self, timeout: float) -> None:
            self.mark, self.stash = pytest.mark.timeout(timeout).mark, pytest.Stash()

        def get_closest_marker(self, name: str) -> object:
            return self.mark if name == "timeout" else None

    assert deadline_of(Item(7)).seconds == 7.0 and not deadline_of(Item(7)).armed  # type: ignore[arg-type]
    item = Item(30)
    assert set_timer(item, 30)  # type: ignore[arg-type]
    try:
        armed = deadline_of(item)  # type: ignore[arg-type]
        assert armed.armed and armed.seconds == 30 and item.cancel_timeout == armed.cancel  # type: ignore[attr-defined]
    finally:
        item.cancel_timeout()  # type: ignore[attr-defined]
