"""History: the timestamped record of what a case did and what came back.

Every connection a case opens through its context is wrapped in :class:`Recorded`, so the history is
complete without cases logging by hand. A failing case prints it; results keep it for the report.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from conformance.api import Consumer, Delivery, Session


@dataclass
class Event:
    t_ms: float
    actor: str
    op: str
    detail: str
    error: str | None = None

    def line(self) -> str:
        tail = f" !! {self.error}" if self.error else ""
        return f"{self.t_ms:9.1f}ms  {self.actor:<10} {self.op}({self.detail}){tail}"


@dataclass
class History:
    started: float = field(default_factory=time.monotonic)
    events: list[Event] = field(default_factory=list)

    def add(self, actor: str, op: str, detail: str = "", error: str | None = None) -> None:
        self.events.append(Event(round((time.monotonic() - self.started) * 1000, 1), actor, op, detail, error))

    def render(self, limit: int = 200) -> str:
        lines = [e.line() for e in self.events[-limit:]]
        if len(self.events) > limit:
            lines.insert(0, f"... {len(self.events) - limit} earlier events omitted")
        return "\n".join(lines)

    def as_records(self) -> list[dict[str, Any]]:
        return [e.__dict__ for e in self.events]


#: Longer lists are shown by their ends in the history.
LONG = 20


def summarize(value: Any) -> str:
    if isinstance(value, Delivery):
        return value.brief()
    if hasattr(value, "brief") and callable(value.brief):  # PublisherEvent
        return str(value.brief())
    if isinstance(value, (list, tuple)) and len(value) > LONG:  # a burst: its ends and its length
        return "[" + ", ".join(summarize(v) for v in value[:3]) + f", ... {len(value)} in all, ..., {summarize(value[-1])}]"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(summarize(v) for v in value) + "]"
    if isinstance(value, bytes):
        return f"<{len(value)} bytes>"
    if hasattr(value, "name") and hasattr(value, "queue_type"):  # QueueSpec
        return f"{value.name} ({value.queue_type})"
    return repr(value)


class Recorded:
    """A transparent proxy that logs each call of the wrapped neutral-API object into a history."""

    def __init__(self, target: Any, history: History, actor: str) -> None:
        self._target = target
        self._history = history
        self._actor = actor

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._target, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            detail = ", ".join([summarize(a) for a in args] + [f"{k}={summarize(v)}" for k, v in kwargs.items()])
            try:
                result = attr(*args, **kwargs)
            except Exception as exc:
                self._history.add(self._actor, name, detail, error=f"{type(exc).__name__}: {exc}")
                raise
            shown = "" if result is None or isinstance(result, (Session, Consumer)) else f" -> {summarize(result)}"
            self._history.add(self._actor, name, detail + shown)
            if isinstance(result, (Session, Consumer)):
                return Recorded(result, self._history, self._actor)
            return result

        return call

    def __repr__(self) -> str:
        return f"Recorded({self._target!r})"
