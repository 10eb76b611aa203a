"""One soak run's history judged from its text: parse, schema check, ``checkers.run_all``.

What ``conformance soak`` does after a run (conformance.soak.execute) and what the Spark job over
many runs (reports.soak) does in each task, as one function of the history's text: the checkers
stay one implementation, and a history the report judges gets the verdicts the run itself gets.

Only the standard library and the checkers are imported here: this module (with
``conformance.soak.history`` and ``conformance.soak.checkers``) is what a Spark executor needs.
"""

from __future__ import annotations

import gc
import json
import time
from typing import Any

from conformance.soak.checkers import CheckOptions, run_all
from conformance.soak.history import problems

try:  # the same values as json.loads (ints, strings, bools, null), three times as fast on 10M ops
    import orjson as _orjson
except ImportError:  # pragma: no cover - orjson is optional
    _orjson = None

#: Anomalies listed per checker in a judged run's record (each kind is counted in full in its counts).
LISTED = 5


def parse(text: str | bytes, source: str = "history") -> list[dict[str, Any]]:
    """The operations of a history's text, as ``history.read_history`` reads the file: blank lines
    skipped, a line that is not a JSON object a ValueError naming it."""
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    lines = text.splitlines()
    if _orjson is not None:
        loads, error = _orjson.loads, _orjson.JSONDecodeError
    else:
        loads, error = json.loads, json.JSONDecodeError
        try:  # one call for the whole file: a third of the per-line calls' time
            ops = json.loads("[" + ",".join(lines) + "]")
            # as many objects as lines: a line holding two values, or one value over two lines, is not a history line
            if len(ops) == len(lines) and all(type(op) is dict for op in ops):
                return ops
        except json.JSONDecodeError:
            pass  # a blank or torn line: the per-line pass below names it
    ops = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            op = loads(line)
        except error as exc:
            raise ValueError(f"{source}:{n}: not JSON ({getattr(exc, 'msg', exc)})") from None
        if not isinstance(op, dict):
            raise ValueError(f"{source}:{n}: not a JSON object")  # noqa: TRY004 -- a malformed line, like the one above
        ops.append(op)
    return ops


def options_of(meta: dict[str, Any] | None) -> CheckOptions:
    """The check options a soak run was judged with (soak.json ``options``: ordered, requeue_counts)."""
    return CheckOptions.from_dict((meta or {}).get("options") or {})


def judge(ops: list[dict[str, Any]], options: CheckOptions, listed: int = LISTED) -> dict[str, Any]:
    """``{"ops": n, "problem": None | str, "verdicts": {checker: {verdict, counts, anomalies, note,
    listed}}}``: each checker's verdict, its counts, its anomaly count and its first ``listed``
    anomalies. A history that breaks the schema is not judged (the run's own breakage, never the
    broker's): ``problem`` says why and ``verdicts`` is empty."""
    shape = problems(ops)
    if shape:
        return {"ops": len(ops), "problem": "the history breaks its schema: " + "; ".join(shape[:3]), "verdicts": {}}
    results = run_all(ops, options)
    return {"ops": len(ops), "problem": None, "verdicts": {
        name: {"verdict": r.verdict, "counts": dict(r.counts), "anomalies": r.counts.get("anomalies", len(r.anomalies)),
               "note": r.note, "listed": [a.to_dict() for a in r.anomalies[:listed]]} for name, r in results.items()}}


def judge_text(text: str | bytes, options: CheckOptions, *, source: str = "history", listed: int = LISTED) -> dict[str, Any]:
    """:func:`judge` of a history's text; a torn line is the run's ``problem``, as a schema break is.
    ``cpu_s``: the CPU seconds the parse and the checks took (what a loaded machine's other
    processes do not add to). The cyclic collector is paused for the parse too: a run's ops are
    acyclic dicts."""
    paused = gc.isenabled()
    gc.disable()
    start = time.process_time()
    try:
        try:
            ops = parse(text, source)
        except ValueError as exc:
            return {"ops": 0, "problem": str(exc), "verdicts": {}, "cpu_s": round(time.process_time() - start, 4)}
        return {**judge(ops, options, listed), "cpu_s": round(time.process_time() - start, 4)}
    finally:
        if paused:
            gc.enable()
