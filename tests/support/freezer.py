"""pytest plugin for the hang test: the broker stops answering in the middle of one chosen case.

In the process that runs the case whose node id contains ``FREEZE_CASE``, right after that case's
``FREEZE_AFTER_OP`` operation was answered, every process of the launched node's group gets
SIGSTOP: the broker still accepts TCP connections (the kernel does) and answers nothing, the way a
deadlocked broker behaves. With ``FREEZE_ONCE`` (a file created atomically) once per run: the case's
re-run, if it gets one, meets a working broker; with ``FREEZE_EVERY`` set instead, every time the
case runs (a hang the case causes each time, as a broker bug would). Nothing continues the node:
the run's own restart (kill -9, start) is what ends the freeze.
"""

from __future__ import annotations

import json
import os
import signal
from typing import Any, Iterator

import pytest

from conformance.kit.history import History
from conformance.pytest_plugin.stash import state_of


def _freeze(config: pytest.Config) -> None:
    state = state_of(config)
    assert state is not None and state.target is not None, "the hang test needs a launched target"
    pid = int(json.loads(state.target.state_file.read_text())["pid"])  # type: ignore[attr-defined]
    os.killpg(pid, signal.SIGSTOP)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[Any]:
    if os.environ["FREEZE_CASE"] not in item.nodeid:
        yield
        return
    try:
        os.close(os.open(os.environ["FREEZE_ONCE"], os.O_CREAT | (0 if os.environ.get("FREEZE_EVERY") else os.O_EXCL)))
    except FileExistsError:
        yield
        return
    real_add = History.add

    frozen: list[History] = []  # once per attempt: a rerun of the case has a history of its own

    def add(self: History, actor: str, op: str, detail: str = "", error: str | None = None) -> None:
        real_add(self, actor, op, detail, error)
        if op == os.environ["FREEZE_AFTER_OP"] and error is None and not any(h is self for h in frozen) \
                and (not frozen or os.environ.get("FREEZE_EVERY")):
            frozen.append(self)
            _freeze(item.config)

    History.add = add  # type: ignore[method-assign]
    try:
        yield
    finally:
        History.add = real_add  # type: ignore[method-assign]
