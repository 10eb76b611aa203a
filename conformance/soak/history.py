"""The soak history: one operation per JSONL line, ``index`` 0, 1, 2, ... in the order recorded.

An operation is a plain dict (the checkers read dicts: a million of them cost less than objects)
with the fields ``index``, ``time_ns``, ``process``, ``type``, ``f`` and ``value``; :class:`Op` is
the same record as a dataclass for code that wants attribute access and a checked shape.
:class:`HistoryWriter` is the single, lock-protected appender the soak runner's threads share.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self, TextIO

#: ``type``: invoke before the operation is sent; ok / fail its outcome; unknown when the outcome
#: cannot be known (a publish whose confirm was lost in a cut). A deliver is always ok.
TYPES = ("invoke", "ok", "fail", "unknown")
#: ``f``: what the operation is.
FS = ("publish", "commit", "rollback", "deliver", "ack", "nack", "consume", "cancel", "fault", "heal", "drain")
FIELDS = ("index", "time_ns", "process", "type", "f", "value")


@dataclass(frozen=True, slots=True)
class Op:
    index: int
    time_ns: int
    process: str
    type: str
    f: str
    value: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        problem = op_problem(self.to_dict())
        if problem:
            raise ValueError(problem)

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "time_ns": self.time_ns, "process": self.process,
                "type": self.type, "f": self.f, "value": self.value}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Op:
        return cls(d["index"], d["time_ns"], d["process"], d["type"], d["f"], dict(d.get("value") or {}))


def make_op(index: int, process: str, type: str, f: str, value: dict[str, Any] | None = None,
            time_ns: int | None = None) -> dict[str, Any]:
    """One operation as the checkers read it (``time_ns`` defaults to the index: tests and models
    that have no clock)."""
    return {"index": index, "time_ns": index if time_ns is None else time_ns, "process": process,
            "type": type, "f": f, "value": value or {}}


def op_problem(op: dict[str, Any]) -> str | None:
    """What is wrong with one operation's shape, or None."""
    missing = [k for k in FIELDS if k not in op]
    if missing:
        return f"op {op.get('index')}: missing {', '.join(missing)}"
    if op["type"] not in TYPES:
        return f"op {op['index']}: type {op['type']!r} is not one of {', '.join(TYPES)}"
    if op["f"] not in FS:
        return f"op {op['index']}: f {op['f']!r} is not one of {', '.join(FS)}"
    if op["f"] == "deliver" and op["type"] != "ok":
        return f"op {op['index']}: a deliver is an observation, type ok, not {op['type']!r}"
    if op["f"] in ("publish", "deliver", "ack", "nack") and "id" not in op["value"]:
        return f"op {op['index']}: a {op['f']} names its message: value.id missing"
    if op["f"] in ("commit", "rollback") and "txn" not in op["value"]:
        return f"op {op['index']}: a {op['f']} names its transaction: value.txn missing"
    return None


def problems(ops: Iterable[dict[str, Any]]) -> list[str]:
    """Every shape problem of a history, the index sequence included (0, 1, 2, ...: one writer)."""
    out = []
    for expected, op in enumerate(ops):
        problem = op_problem(op)
        if problem:
            out.append(problem)
        elif op["index"] != expected:
            out.append(f"op at line {expected + 1}: index {op['index']}, expected {expected}")
    return out


def renumber(ops: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Fresh dicts with indexes 0, 1, 2, ... in list order (after ops were inserted or removed)."""
    return [{**op, "index": i} for i, op in enumerate(ops)]


def read_history(path: str | Path) -> list[dict[str, Any]]:
    """The operations of a history file. A line that is not a JSON object raises ValueError naming
    the line: a torn history is reported, never half read."""
    ops = []
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                op = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{n}: not JSON ({exc.msg})") from None
            if not isinstance(op, dict):
                raise ValueError(f"{path}:{n}: not a JSON object")  # noqa: TRY004 -- a malformed line, like the one above
            ops.append(op)
    return ops


def _line(op: dict[str, Any]) -> str:
    return json.dumps(op, separators=(",", ":"), ensure_ascii=False) + "\n"


def write_history(path: str | Path, ops: Iterable[dict[str, Any]]) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        fh.writelines(_line(op) for op in ops)


class HistoryWriter:
    """The one appender of a run's history: threads call :meth:`record`; the lock makes the index
    and the line order one order, and every line is flushed when written (a killed runner leaves a
    history that ends at its last whole operation).

    ``time_ns`` is monotonic nanoseconds since the writer was opened."""

    def __init__(self, path: str | Path, *, clock: Callable[[], int] = time.monotonic_ns) -> None:
        self.path = Path(path)
        self._clock = clock
        self._start = clock()
        self._lock = threading.Lock()
        self._next = 0
        self._fh: TextIO | None = open(self.path, "w", encoding="utf-8")  # noqa: SIM115 -- held open across record() calls, closed by close()

    def record(self, process: str, type: str, f: str, value: dict[str, Any] | None = None) -> int:
        """Append one operation; returns its index."""
        with self._lock:
            if self._fh is None:
                raise ValueError(f"history {self.path} is closed")
            op = {"index": self._next, "time_ns": self._clock() - self._start, "process": process,
                  "type": type, "f": f, "value": dict(value or {})}
            problem = op_problem(op)
            if problem:
                raise ValueError(problem)
            self._fh.write(_line(op))
            self._fh.flush()
            self._next += 1
            return op["index"]

    def __len__(self) -> int:
        return self._next

    def close(self) -> None:
        with self._lock:
            if self._fh is not None:
                self._fh.close()
                self._fh = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
