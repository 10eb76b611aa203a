"""Queue configurations (data/configurations.yaml): what a case may run under besides its queue
type's default declaration, and how a cell names one ("classic+priority").

A profile documents a broker by queue type; what it says of "classic" holds for every classic
configuration unless it names the configuration itself ("classic+priority"): :func:`base_of`
gives the queue type a configured cell falls back to."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from conformance import yamlio
from conformance.errors import UsageError

DATA = Path(__file__).with_name("data") / "configurations.yaml"
SCHEMA = "conformance.configurations/1"
#: Between a queue type and a configuration in a cell's name.
SEP = "+"
#: Flags of queue.declare a configuration may set (conformance.api.QueueSpec fields).
DECLARE_FLAGS = ("exclusive", "auto_delete")


@dataclass(frozen=True)
class Configuration:
    name: str
    meaning: str
    arguments: dict[str, Any]
    source: str
    #: Flags of the declaration itself (exclusive, auto_delete), besides its arguments.
    declare: dict[str, bool] = field(default_factory=dict)


@cache
def configurations() -> dict[str, Configuration]:
    data = yamlio.safe_load(DATA.read_text())
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise UsageError(f"{DATA.name}: expected schema: {SCHEMA}")
    out = {}
    for name, raw in (data.get("configurations") or {}).items():
        where = f"{DATA.name}: {name}"
        if SEP in name or not isinstance(raw, dict) or not isinstance(raw.get("arguments"), dict) or not raw.get("meaning") or not raw.get("source"):
            raise UsageError(f"{where}: expected meaning, arguments (a mapping) and source, and a name without {SEP!r}")
        declare = raw.get("declare") or {}
        if not isinstance(declare, dict) or set(declare) - set(DECLARE_FLAGS) or not all(isinstance(v, bool) for v in declare.values()):
            raise UsageError(f"{where}: declare: expected flags among {', '.join(DECLARE_FLAGS)}, each true or false")
        out[name] = Configuration(name, " ".join(str(raw["meaning"]).split()), dict(raw["arguments"]), str(raw["source"]), dict(declare))
    return out


def split(queue_type: str | None) -> tuple[str | None, Configuration | None]:
    """``classic+priority`` -> (``classic``, the priority configuration); ``classic`` -> (``classic``, None)."""
    if queue_type is None or SEP not in queue_type:
        return queue_type, None
    base, _, name = queue_type.partition(SEP)
    known = configurations()
    if name not in known:
        raise UsageError(f"unknown queue configuration {name!r} in {queue_type!r}; known: {', '.join(known)}")
    return base, known[name]


def base_of(queue_type: str | None) -> str | None:
    """The queue type of a cell, without its configuration."""
    return queue_type.partition(SEP)[0] if queue_type else queue_type


def cell_types(queue_types: tuple[str | None, ...], names: tuple[str, ...]) -> tuple[str | None, ...]:
    """Each queue type, then each of its configurations ``names`` (a case's), in that order."""
    unknown = [n for n in names if n not in configurations()]
    if unknown:
        raise UsageError(f"unknown queue configuration(s) {', '.join(unknown)}; known: {', '.join(configurations())}")
    out: list[str | None] = list(queue_types)
    out += [f"{qt}{SEP}{n}" for qt in queue_types if qt is not None for n in names]
    return tuple(out)
