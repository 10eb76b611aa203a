"""The known-deviation manifest of the gate: which failing cells a release team has accepted, why,
and until when.

Every entry is data (requirement, target pattern, reason, link, expiry). A cell the current run's
profile excuses (failing on the baseline, a deviation or pass now under a profile entry the two runs'
profiles differ in: reports.gate class ``excused``) is accepted the same way, once the new entry is
reviewed: the manifest names its requirement and target, nothing names a profile. The manifest is checked
strictly before anything else runs: a typo such as ``expire:`` would otherwise silently make an
entry permanent, and an impossible date must be one line and exit 2 (bad input), never a traceback
or exit 1 (which a CI reads as a release regression).
"""

from __future__ import annotations

import datetime
import fnmatch
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from conformance import yamlio
from conformance.errors import UsageError

FIELDS = ("requirement", "target", "reason", "link", "expires")


@dataclass(frozen=True)
class Known:
    requirement: str
    target: str  # fnmatch pattern over the target column ("RabbitMQ 3.10.8 amqp-0-9-1 quorum"), "*" for any
    reason: str
    link: str
    expires: datetime.date | None

    def matches(self, requirement: str, column: str) -> bool:
        return self.requirement == requirement and fnmatch.fnmatchcase(column, self.target)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _date(path: Path, i: int, value: Any) -> datetime.date | None:
    if value is None:
        return None
    if isinstance(value, datetime.datetime):
        return value.date()
    if isinstance(value, datetime.date):
        return value
    if isinstance(value, str):
        try:
            return datetime.date.fromisoformat(value)
        except ValueError:
            pass
    raise UsageError(f"{path}: entry {i}: expires {value!r} is not a date (YYYY-MM-DD)")


def load_manifest(path: Path | None) -> list[Known]:
    """The entries of the manifest at ``path`` (none without one); any defect is a UsageError of one line."""
    if path is None:
        return []
    try:
        raw: Any = yamlio.safe_load(Path(path).read_text())
    except OSError as exc:
        raise UsageError(f"{path}: cannot read the known-deviation manifest: {_first_line(exc)}") from None
    except yaml.YAMLError as exc:
        raise UsageError(f"{path}: not valid YAML: {_first_line(exc)}") from None
    except ValueError as exc:  # PyYAML's timestamp resolver: "expires: 2027-13-45" -> month must be in 1..12
        raise UsageError(f"{path}: an impossible date ({_first_line(exc)}); dates are YYYY-MM-DD") from None
    if isinstance(raw, dict):
        extra = sorted(set(map(str, raw)) - {"known"})
        if extra or "known" not in raw:
            raise UsageError(f"{path}: expected one top-level key 'known:' (a list of entries), found {', '.join(map(repr, map(str, raw))) or 'nothing'}")
        entries = raw["known"]
    else:
        entries = raw
    if entries is None:
        entries = []
    if not isinstance(entries, list):
        raise UsageError(f"{path}: expected a list of entries under 'known:', found {type(entries).__name__}")
    out = []
    for i, e in enumerate(entries, 1):
        if not isinstance(e, dict):
            raise UsageError(f"{path}: entry {i} is a {type(e).__name__}, expected a mapping (requirement, target, reason, link, expires)")
        unknown = sorted(set(map(str, e)) - set(FIELDS))
        if unknown:
            raise UsageError(f"{path}: entry {i}: unknown key(s) {', '.join(unknown)} (known keys: {', '.join(FIELDS)})")
        if not e.get("requirement") or not e.get("reason"):
            raise UsageError(f"{path}: entry {i} needs at least 'requirement' and 'reason'")
        for key in ("requirement", "target", "reason", "link"):
            if e.get(key) is not None and not isinstance(e[key], (str, int, float)):
                raise UsageError(f"{path}: entry {i}: {key} must be text, found {type(e[key]).__name__}")
        out.append(Known(str(e["requirement"]), str(e.get("target") or "*"), str(e["reason"]), str(e.get("link") or ""),
                         _date(path, i, e.get("expires"))))
    return out
