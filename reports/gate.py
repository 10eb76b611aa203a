"""``conformance gate``: the CI gate of a broker release against its baseline.

The gate fails when a MUST requirement that passed on the baseline fails now (optionally SHOULD
too, and new flakiness). Known deviations are data (a manifest: requirement, target, reason, link,
expiry): a known failure does not fail the gate, a known entry that now passes is reported as
XPASS (time to delete it), and an entry past its expiry date fails the gate, so that "known" never
becomes "forever".
"""

from __future__ import annotations

import datetime
import fnmatch
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from conformance.errors import UsageError


@dataclass(frozen=True)
class Known:
    requirement: str
    target: str  # fnmatch pattern over the target column ("RabbitMQ 3.10.8 amqp-0-9-1 quorum"), "*" for any
    reason: str
    link: str
    expires: datetime.date | None

    def matches(self, requirement: str, column: str) -> bool:
        return self.requirement == requirement and fnmatch.fnmatchcase(column, self.target)


def load_manifest(path: Path | None) -> list[Known]:
    if path is None:
        return []
    try:
        raw: Any = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise UsageError(f"{path}: cannot read the known-deviation manifest: {exc}".splitlines()[0]) from None
    entries = raw.get("known") if isinstance(raw, dict) else raw
    if not isinstance(entries, list):
        raise UsageError(f"{path}: expected a list of entries under 'known:'")
    out = []
    for i, e in enumerate(entries, 1):
        if not isinstance(e, dict) or not e.get("requirement") or not e.get("reason"):
            raise UsageError(f"{path}: entry {i} needs at least 'requirement' and 'reason'")
        expires = e.get("expires")
        if expires is not None and not isinstance(expires, datetime.date):
            try:
                expires = datetime.date.fromisoformat(str(expires))
            except ValueError:
                raise UsageError(f"{path}: entry {i}: expires {expires!r} is not a date (YYYY-MM-DD)") from None
        out.append(Known(str(e["requirement"]), str(e.get("target", "*")), str(e["reason"]), str(e.get("link", "")), expires))
    return out


def judge(diff: list[dict[str, Any]], current: list[dict[str, Any]], known: list[Known], *, include_should: bool = False,
          flaky_new: list[dict[str, Any]] | None = None, fail_on_new_flaky: bool = False,
          today: datetime.date | None = None) -> dict[str, Any]:
    """The gate's decision and its reasons, from the baseline diff and the current cells."""
    today = today or datetime.date.today()
    levels = ("MUST", "SHOULD") if include_should else ("MUST",)
    regressions, known_hits, xpass, expired = [], [], [], []
    for d in diff:
        if d["change"] != "newly failing" or d["level"] not in levels:
            continue
        k = next((k for k in known if k.matches(d["requirement"], d["column"])), None)
        if k is None:
            regressions.append(d)
        else:
            known_hits.append({**d, "known_reason": k.reason, "link": k.link})
    for k in known:
        if k.expires is not None and k.expires < today:
            expired.append(k)
        for c in current:
            if k.matches(c["requirement"], c["column"]) and c["verdict"] == "pass":
                xpass.append({"requirement": c["requirement"], "column": c["column"], "reason": k.reason, "link": k.link})
    new_flaky = list(flaky_new or []) if fail_on_new_flaky else []
    failed = bool(regressions or expired or new_flaky)
    return {"passed": not failed, "regressions": regressions, "known": known_hits, "xpass": xpass,
            "expired": [k.__dict__ | {"expires": str(k.expires)} for k in expired], "new_flaky": new_flaky}


def run_gate(baseline: list[str], current: list[str], *, manifest: Path | None = None, include_should: bool = False,
             fail_on_new_flaky: bool = False, master: str | None = None) -> dict[str, Any]:
    from reports import analysis
    from reports.report import figures
    from reports.session import spark_run

    from reports.ingest import result_files

    known = load_manifest(manifest)  # bad input fails before Spark starts
    result_files(baseline), result_files(current)
    with spark_run(master) as spark:
        base, _ = figures(spark, baseline)
        now, _ = figures(spark, current)
    diff = analysis.compare(base["cells"], now["cells"])
    was_flaky = {(f["column"], f["case_id"]) for f in base["flakiness"] if f["flaky"]}
    new_flaky = [f for f in now["flakiness"] if f["flaky"] and (f["column"], f["case_id"]) not in was_flaky]
    return judge(diff, now["cells"], known, include_should=include_should, flaky_new=new_flaky, fail_on_new_flaky=fail_on_new_flaky)
