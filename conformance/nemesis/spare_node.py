"""A second launched target for the self-test's restart lane.

The runs whose cases restart or kill the broker take most of a self-test's time (about 130 s of
190 s on RabbitMQ 3.10.8 here), and they cannot share a node with the plain runs: a restart would
cut every other run's connections. Given a second node of the same launcher, booted in the
background while the clean run goes, they run there, beside the plain runs, instead of after them.

Nothing about the verdicts changes: each run is still one child process against one node, the
restart runs still go one after another, and the kill matrix is built from the runs in plan order.
A second node that does not boot is not an error: the restart runs then go on the run's own node
after the plain ones, as before, and the self-test says so in one line.
"""

from __future__ import annotations

import threading
from typing import Callable

from conformance.targets import Target


class SpareNode:
    """Boots ``make()``'s target in a background thread; :meth:`target` waits for the outcome."""

    def __init__(self, make: Callable[[], Target]) -> None:
        self._target: Target | None = None
        self.error: str | None = None
        self._stopped = False
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._boot, args=(make,), name="selftest-spare-node", daemon=True)
        self._thread.start()

    def _boot(self, make: Callable[[], Target]) -> None:
        target: Target | None = None
        try:
            target = make()
            target.start()
        except Exception as exc:  # noqa: BLE001 - any failure means: no restart lane, say why
            self.error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}".rstrip(": ")
            if target is not None:
                _quiet_stop(target)
            return
        with self._lock:
            if self._stopped:  # the self-test ended (an interrupt) while this node booted
                _quiet_stop(target)
                return
            self._target = target

    def target(self, timeout_s: float = 180.0) -> Target | None:
        """The booted node, or None when it did not boot (``error`` says why) within ``timeout_s``
        (the launcher's own boot deadline normally ends the boot first)."""
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            self.error = f"the second node did not boot within {timeout_s:.0f}s"
            return None
        return self._target

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            target, self._target = self._target, None
        if target is not None:
            _quiet_stop(target)


def _quiet_stop(target: Target) -> None:
    try:
        target.stop()
    except Exception:  # noqa: BLE001 - its watchdog (conformance.supervisor) still removes it
        pass
