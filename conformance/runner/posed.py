"""Which cells a run poses at all.

A cell is one requirement under one queue type or queue configuration ("classic+priority"). A run
poses the cells its broker can have: a queue type its profile does not name (quorum on qpidd) or a
configuration its admin cannot declare (qpidd has no delivery limit: qmf-arguments.yaml) is not a
queue of that broker, so the cells on it are not cases of the run, as a protocol without queue
arguments gets no configured cells (conformance.pytest_plugin.fixtures.configurable). The feature's
own requirements still run on the broker's plain queues and say `unsupported (cannot-express)` with
the reason, once (LIMIT-MAX-DELIVERIES on qpidd); only its repetition across every other requirement
goes. What is not posed, and why, is in run.json (``not_posed``) and the run's summary.
"""

from __future__ import annotations

from typing import Any

from conformance.api import QueueSpec
from conformance.catalogue.configurations import SEP, base_of, configurations


def queue_type_missing(profile: Any, queue_type: str | None) -> str | None:
    """Why ``profile`` has no queue of ``queue_type``'s type (None: it has, or the cell names none)."""
    if queue_type is None or base_of(queue_type) in profile.queue_types:
        return None
    return f"profile {profile.id} has no queue type {base_of(queue_type)!r}"


def undeclarable(adapter: Any, server: Any, profile: Any) -> dict[str, str]:
    """``{"classic+delivery-limit": why}``: each configuration of each queue type the profile runs
    that the adapter knows, before anything is sent, it cannot declare on ``server``."""
    ask = getattr(adapter, "declarable", None)
    if not callable(ask):
        return {}
    out: dict[str, str] = {}
    for qt, q in profile.queue_types.items():
        if not q.runs:
            continue
        for name, conf in configurations().items():
            spec = QueueSpec(name="conformance.posed-probe", queue_type=qt, durable=q.durable,
                             arguments={**q.arguments, **conf.arguments}, **conf.declare)
            why = ask(server, spec)
            if why:
                out[f"{qt}{SEP}{name}"] = why
    return out


def why_not_posed(state: Any, queue_type: str | None) -> str | None:
    """Why the run poses no cell on ``queue_type`` (None: it does)."""
    missing = queue_type_missing(state.profile, queue_type)
    if missing:
        return missing
    return (getattr(state, "not_posed", None) or {}).get(queue_type or "")


def summary(not_posed: dict[str, str]) -> str:
    """One line for the run's summary ("" when every configuration is posed)."""
    if not not_posed:
        return ""
    return (f"not posed: cells on {', '.join(sorted(not_posed))} (queues this broker's admin cannot declare; "
            "run.json not_posed says why), and on queue types its profile lacks")
