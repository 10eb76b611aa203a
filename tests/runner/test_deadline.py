"""The case deadline survives an alarm that lands in a finalizer (conformance.runner.deadline)."""

from __future__ import annotations

import gc
import sys
import time

import pytest

from conformance.runner import deadline


class _Item:
    """The two things deadline needs of a pytest item: its timeout mark, and a cancel slot."""

    def __init__(self, timeout: float) -> None:
        self.mark = pytest.mark.timeout(timeout).mark

    def get_closest_marker(self, name: str):  # noqa: ANN201 - mimics pytest.Item
        return self.mark if name == "timeout" else None


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
    item = _Item(0.01)
    assert deadline.set_timer(item, 0.01)  # type: ignore[arg-type]
    started = time.monotonic()
    try:
        with pytest.raises(pytest.fail.Exception, match="Timeout"):
            _SlowFinalizer()  # collected at once: the first alarm fires inside its __del__ and is lost
            gc.collect()
            while time.monotonic() - started < 2:
                pass
    finally:
        item.cancel_timeout()  # type: ignore[attr-defined]
    assert time.monotonic() - started < 1.0


def test_a_case_that_returns_past_its_deadline_is_ended_all_the_same() -> None:
    item = _Item(0.01)
    deadline.overrun(item, time.monotonic())  # type: ignore[arg-type]  # inside: nothing happens
    with pytest.raises(pytest.fail.Exception, match="alarm was lost"):
        deadline.overrun(item, time.monotonic() - 0.5)  # type: ignore[arg-type]
    assert deadline.of(_Item(7)) == 7.0  # type: ignore[arg-type]
