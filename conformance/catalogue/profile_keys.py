"""The documented schema of profile keys (conformance/catalogue/data/profile_keys.yaml) and the check of one value.

Why a schema: verdicts read profile entries by name; a misspelt key or value in a profile used to
make the case silently `undocumented` (or raise mid-run). The loader checks every entry against
this table so a bad profile is refused in one line before anything runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from conformance import yamlio

KINDS = ("choice", "list", "choice-or-int", "choice-or-map")
#: How a key's value enters a verdict (see the head of conformance/catalogue/data/profile_keys.yaml).
JUDGED = ("reference", "vendor", "promise")


@dataclass(frozen=True)
class KeySpec:
    """One profile key: what it means, who reads it and which values it accepts."""

    name: str
    meaning: str
    kind: str
    values: dict[str, str]
    read_by: tuple[str, ...]
    map_keys: tuple[str, ...] = ()
    judged: str = "reference"

    def problem(self, value: Any) -> str | None:
        """None when ``value`` is allowed, else why not (for a one-line error)."""
        allowed = ", ".join(self.values)
        if self.kind == "list":
            if not isinstance(value, list) or not value:
                return f"expected a non-empty list of {allowed}"
            bad = [v for v in value if v not in self.values]
            return f"unknown item(s) {bad}; allowed: {allowed}" if bad else None
        if self.kind == "choice-or-int" and isinstance(value, int) and not isinstance(value, bool):
            return None if value >= 0 else "expected a non-negative integer"
        if self.kind == "choice-or-map" and isinstance(value, dict):
            if set(value) != set(self.map_keys):
                return f"a mapping needs exactly the keys {', '.join(self.map_keys)}"
            bad = [v for v in value.values() if v not in self.values]
            return f"unknown value(s) {bad}; allowed: {allowed}" if bad else None
        if isinstance(value, str) and value in self.values:
            return None
        extra = {"choice-or-int": " or a non-negative integer", "choice-or-map": f" or a mapping of {', '.join(self.map_keys)}"}
        return f"unknown value {value!r}; allowed: {allowed}{extra.get(self.kind, '')}"


def parse_schema(data: Any) -> dict[str, KeySpec]:
    """The key table from its YAML form; a malformed table is a programming error (ValueError)."""
    if not isinstance(data, dict) or not isinstance(data.get("keys"), dict):
        raise ValueError("profile key schema: expected a mapping with 'keys'")
    out = {}
    for name, raw in data["keys"].items():
        if raw.get("kind") not in KINDS or not isinstance(raw.get("values"), dict) or not raw.get("meaning"):
            raise ValueError(f"profile key schema: {name}: needs meaning, kind (one of {KINDS}) and values")
        if raw.get("judged") not in JUDGED:
            raise ValueError(f"profile key schema: {name}: judged must be one of {JUDGED}")
        out[name] = KeySpec(
            name=name,
            meaning=str(raw["meaning"]),
            kind=raw["kind"],
            values={str(k): str(v) for k, v in raw["values"].items()},
            read_by=tuple(raw.get("read_by") or ()),
            map_keys=tuple(raw.get("map_keys") or ()),
            judged=raw["judged"],
        )
    return out


@cache
def profile_keys() -> dict[str, KeySpec]:
    """The bundled key table."""
    text = (resources.files("conformance.catalogue") / "data" / "profile_keys.yaml").read_text()
    return parse_schema(yamlio.safe_load(text))


def fmt(value: Any) -> str:
    """A value as a profile entry, a reference or an observation is shown in a message: lowercase
    booleans, ``none``, ``[a, b]``, ``{k: v}``."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(fmt(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {fmt(v)}" for k, v in value.items()) + "}"
    if value is None:
        return "none"
    return str(value)


def entry_problem(key: str, value: Any) -> str | None:
    """Why ``key: value`` is not a valid profile entry, or None."""
    spec = profile_keys().get(key)
    if spec is None:
        return f"unknown key {key!r} (see `conformance list --profile-keys`)"
    return spec.problem(value)


def render_keys() -> str:
    """The table as plain text (for `conformance list --profile-keys` and docs)."""
    lines = []
    for spec in profile_keys().values():
        lines.append(f"{spec.name}  [{spec.kind}, judged by {spec.judged}]  read by {', '.join(spec.read_by) or '-'}")
        lines.append(f"    {spec.meaning}")
        if spec.map_keys:
            lines.append(f"    value may be a mapping of {', '.join(spec.map_keys)} to one of:")
        for value, meaning in spec.values.items():
            lines.append(f"    {value:<22} {meaning}")
        if spec.kind == "choice-or-int":
            lines.append(f"    {'<integer>':<22} that many")
    return "\n".join(lines)
