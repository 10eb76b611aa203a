"""``conformance gate``: the CI gate of a broker release against its baseline.

The decision is a complete table: every (target configuration, requirement) cell of the baseline
and of the current runs gets exactly one class, and the exit code follows from the classes of the
cells in the gated levels (MUST; SHOULD too with ``--include-should``) and from the runs themselves:

- exit 2, inconclusive: a run on either side did not finish (``run.json`` status), the two sides
  are not comparable (suite version, catalogue digest; old-format runs without digests; one side
  judged by two profiles, or a profile whose content cannot be found), or no decided regression but
  an ``error`` keeps a gated cell from being decided.
- exit 1, failed: a blocking cell (regression, new and failing, flaky, vanished, newly
  unsupported/undocumented/deviation, excused) not named by the manifest, or an expired manifest entry.
- exit 0, passed: none of the above.

Cells are matched by product, protocol and queue type (the "config"), not version: comparing
releases is the point. Known deviations are data (reports.manifest): a known blocking cell does not
fail the gate, a known entry that now passes is XPASS (time to delete it), an expired entry fails.

Flaky cells (a case that both passed and failed across attempts or runs) are never a pass: a
requirement violated in one attempt out of twenty is violated. A flaky gated cell blocks like a
regression when the baseline did not already fail there; it shows its pass rate.

Release N+1 often sits under another profile than release N. That alone leaves the runs comparable:
the gate lists every profile member the two differ in with the cells it touched
(reports.profile_diff), and a cell that failed on the baseline and is a deviation or a pass now under
a profile difference is ``excused``: it blocks until the manifest names it, because the profile, not
the broker, moved it. Every other profile difference is shown and blocks nothing by itself.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reports.manifest import Known, load_manifest  # noqa: F401 - load_manifest is part of this module's API

EXIT_PASSED, EXIT_FAILED, EXIT_INCONCLUSIVE = 0, 1, 2

#: Every class a cell can get, what it means, and whether it blocks in a gated level
#: ("fail": exit 1 unless the manifest names it; "inconclusive": exit 2; None: reported only).
CLASSES: dict[str, tuple[str, str | None]] = {
    "regression": ("did not fail on the baseline, fails now", "fail"),
    "new-and-failing": ("not on the baseline (new requirement or configuration), fails now", "fail"),
    "flaky": ("passed and failed across attempts now, did not fail on the baseline", "fail"),
    "vanished": ("on the baseline, not in the current runs (not run, or dropped)", "fail"),
    "newly unsupported": ("judged unsupported now, something else on the baseline", "fail"),
    "newly undocumented": ("judged undocumented now, something else on the baseline", "fail"),
    "newly deviation": ("a documented deviation now, something else on the baseline", "fail"),
    "excused": ("failed on the baseline, a deviation or pass now under a profile entry the two runs' profiles differ in", "fail"),
    "inconclusive": ("an error (suite or infrastructure) keeps the cell from being decided now", "inconclusive"),
    "known": ("would block, but the known-deviation manifest names it", None),
    "fixed": ("failed (or was flaky) on the baseline, passes now", None),
    "still failing": ("failed or was flaky on the baseline, fails or is flaky now", None),
    "new": ("not on the baseline, does not fail now", None),
    "changed": ("another change that cannot hide a failure (e.g. unsupported -> pass, error -> pass)", None),
    "unchanged": ("same state on both sides", None),
}
FAILING = ("fail", "flaky")
NOT_JUDGED = ("unsupported", "undocumented", "deviation")


def state(cell: dict[str, Any] | None) -> str | None:
    """What a cell shows: ``flaky`` when a case both passed and failed, else its (worst) verdict."""
    if cell is None:
        return None
    return "flaky" if cell.get("flaky") else cell["verdict"]


def rate(cell: dict[str, Any] | None) -> str | None:
    """Pass rate as 'passes/decided' when the cell was decided more than once."""
    if cell is None or not cell.get("decided") or cell["decided"] < 2:
        return None
    return f"{cell['passes']}/{cell['decided']} ({100 * cell['passes'] / cell['decided']:.0f}%)"


def classify_cell(was: str | None, now: str | None) -> str:
    """The class of one cell from its baseline and current state (None: absent on that side)."""
    if now is None:
        return "vanished"
    if now in ("error", "blocked"):  # the suite could not decide the cell (infrastructure, a broken assumption)
        return "inconclusive"
    if was is None:
        return "new-and-failing" if now in FAILING else "new"
    if now in FAILING:
        if was in FAILING:
            return "still failing"
        return "flaky" if now == "flaky" else "regression"
    if now in NOT_JUDGED:
        return "unchanged" if was == now else f"newly {now}"
    if now == "pass":
        if was in FAILING:
            return "fixed"
        return "unchanged" if was == "pass" else "changed"
    return "unchanged" if was == now else "changed"


def excused(b: dict[str, Any] | None, c: dict[str, Any] | None) -> bool:
    """Whether a cell a profile difference touched moved from failing to a deviation or a pass because
    of it. A pass whose spec verdict failed on the baseline and passes now is the broker's own change
    (the spec verdict is judged without the profile): fixed, not excused."""
    if b is None or c is None or state(b) not in FAILING or state(c) not in ("pass", "deviation"):
        return False
    return not (state(c) == "pass" and b.get("spec_verdict") == "fail" and c.get("spec_verdict") == "pass")


def classify(baseline: list[dict[str, Any]], current: list[dict[str, Any]], known: list[Known], *,
             levels: tuple[str, ...] = ("MUST",), fail_on_new_flaky: bool = False,
             profile_touched: dict[tuple[str, str], list[str]] | None = None) -> list[dict[str, Any]]:
    """One row per cell of baseline ∪ current, with its class and whether it blocks the gate.
    ``profile_touched``: (config, requirement) -> the profile differences that apply to the cell."""
    base = {(c["config"], c["requirement"]): c for c in baseline}
    cur = {(c["config"], c["requirement"]): c for c in current}
    profile_touched = profile_touched or {}
    rows = []
    for key in sorted(set(base) | set(cur), key=lambda k: (k[1], k[0])):
        b, c = base.get(key), cur.get(key)
        any_side = c or b
        assert any_side is not None
        cls = classify_cell(state(b), state(c))
        if key in profile_touched and excused(b, c):
            cls = "excused"
        gated = any_side["level"] in levels or (fail_on_new_flaky and cls == "flaky")
        blocking = CLASSES[cls][1] if gated else None
        row: dict[str, Any] = {
            "config": key[0], "requirement": key[1], "level": any_side["level"], "area": any_side["area"],
            "column": (c or b or {}).get("column"), "baseline_column": b["column"] if b else None,
            "baseline": state(b), "current": state(c), "baseline_rate": rate(b), "current_rate": rate(c),
            "class": cls, "change": cls, "gated": gated, "blocking": blocking,
            "expected": (c or b or {}).get("expected"), "observed": c.get("observed") if c else None,
            "reason": c.get("reason") if c else None, "known_reason": None, "link": None,
            "profile_differences": profile_touched.get(key, []), "case_id": any_side.get("case_id"),
            "queue_type": any_side.get("queue_type"),
        }
        if blocking == "fail":
            k = next((k for k in known if k.matches(key[1], row["column"]) or (b is not None and k.matches(key[1], b["column"]))), None)
            if k is not None:
                row.update({"class": "known", "blocking": None, "known_reason": k.reason, "link": k.link})
        rows.append(row)
    order = {name: i for i, name in enumerate(CLASSES)}
    return sorted(rows, key=lambda r: (r["blocking"] is None, not r["gated"], order[r["class"]], r["requirement"], r["config"]))


@dataclass(frozen=True)
class RunCheck:
    """What the run metadata of both sides says before any cell is looked at."""

    unfinished: list[str]  # one cause per run that did not finish
    differences: list[str]  # why the sides are not comparable
    #: (product, protocol, baseline profile, current profile) where the two sides' profiles differ
    profiles: list[tuple[str, str, Any, Any]] = field(default_factory=list)


def judge(rows: list[dict[str, Any]], current: list[dict[str, Any]], known: list[Known], *, runs: RunCheck | None = None,
          today: datetime.date | None = None, profiles: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The gate's decision from the classified table, the manifest and the runs' metadata."""
    today = today or datetime.date.today()
    runs = runs or RunCheck([], [])
    blocking = [r for r in rows if r["blocking"] == "fail"]
    undecided = [r for r in rows if r["blocking"] == "inconclusive"]
    expired = [k for k in known if k.expires is not None and k.expires < today]
    xpass = [{"requirement": c["requirement"], "column": c["column"], "reason": k.reason, "link": k.link}
             for k in known for c in current if k.matches(c["requirement"], c["column"]) and state(c) == "pass"]
    causes: list[str] = []
    if runs.unfinished or runs.differences:
        exit_code, outcome = EXIT_INCONCLUSIVE, "INCONCLUSIVE"
        causes += runs.unfinished + runs.differences
        if blocking:
            causes.append(f"{len(blocking)} blocking cell(s) shown, but not trusted until the runs are comparable and finished")
    elif blocking or expired:
        exit_code, outcome = EXIT_FAILED, "FAILED"
        if undecided:
            causes.append(f"{len(undecided)} gated cell(s) also undecided (error)")
    elif undecided:
        exit_code, outcome = EXIT_INCONCLUSIVE, "INCONCLUSIVE"
        causes.append(f"{len(undecided)} gated cell(s) ended in error (suite or infrastructure), so the gate cannot decide them: "
                      + ", ".join(f"{r['requirement']} on {r['column']}" for r in undecided[:5]) + (" ..." if len(undecided) > 5 else ""))
    else:
        exit_code, outcome = EXIT_PASSED, "PASSED"
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["class"]] = counts.get(r["class"], 0) + 1
    return {
        "schema": "conformance.gate/1", "outcome": outcome, "exit_code": exit_code, "passed": exit_code == EXIT_PASSED,
        "causes": causes, "counts": counts, "table": rows,
        "regressions": [r for r in blocking if r["class"] in ("regression", "new-and-failing")],
        "blocking": blocking, "undecided": undecided,
        "known": [r for r in rows if r["class"] == "known"], "xpass": xpass,
        "expired": [k.__dict__ | {"expires": str(k.expires)} for k in expired],
        "new_flaky": [r for r in blocking if r["class"] == "flaky"],
        "runs": {"unfinished": runs.unfinished, "differences": runs.differences},
        "profiles": profiles or [], "excused": [r for r in rows if r["change"] == "excused"],
    }


def check_runs(baseline_files: list[str], current_files: list[str], spark: Any | None = None,
               run_ids: dict[str, set[str]] | None = None) -> RunCheck:
    """How every run of both sides ended, and whether the two sides can be compared. ``run_ids``
    (results file -> run ids of its records): records of a run that ``run.json`` does not describe
    (an earlier run into the same folder) have no known end state or digests, so they count as
    undescribed, never as part of the finished run."""
    from reports import profile_diff, runs

    b, c = runs.read_metas(baseline_files, spark), runs.read_metas(current_files, spark)
    unfinished = [f"{side} run {m.folder}: {m.ended}" for side, metas in (("baseline", b), ("current", c)) for m in runs.unfinished(metas)]
    for side, files, metas in (("baseline", baseline_files, b), ("current", current_files, c)):
        for f, m in zip(files, metas):
            other = sorted((run_ids or {}).get(f, set()) - {m.run_id}) if m.problem is None else []
            if other:
                unfinished.append(f"{side} run {m.folder}: holds records of run(s) {', '.join(other)} that its run.json "
                                  f"(run {m.run_id}) does not describe; use one folder per run")
    differences = runs.differences(b, c)
    pairs = []
    for product, protocol, mb, mc in runs.profile_pairs(b, c):
        pb, pc = profile_diff.side_profile(mb), profile_diff.side_profile(mc)
        differences += [f"profile {p.id} of {product} {protocol} ({side}): {p.origin}; which cells it excuses cannot be said"
                        for side, p in (("baseline", pb), ("current", pc)) if p.data is None]
        pairs.append((product, protocol, pb, pc))
    return RunCheck(unfinished, differences, pairs)


def run_gate(baseline: list[str], current: list[str], *, manifest: Path | None = None, include_should: bool = False,
             fail_on_new_flaky: bool = False, master: str | None = None, today: datetime.date | None = None) -> dict[str, Any]:
    """Read both sides, classify every cell, decide. Bad input (manifest, run folders) is a UsageError
    raised before Spark starts."""
    from reports import profile_diff
    from reports.ingest import result_files
    from reports.report import cells
    from reports.runs import is_local
    from reports.session import spark_run

    known = load_manifest(manifest)
    base_files, cur_files = result_files(baseline), result_files(current)
    levels = ("MUST", "SHOULD") if include_should else ("MUST",)
    with spark_run(master) as spark:
        (base, base_ids), (now, now_ids) = cells(spark, baseline), cells(spark, current)
        remote = not all(is_local(f) for f in base_files + cur_files)
        runs = check_runs(base_files, cur_files, spark if remote else None, {**base_ids, **now_ids})
    profiles, touched = profile_diff.compare(runs.profiles, base, now)
    rows = classify(base, now, known, levels=levels, fail_on_new_flaky=fail_on_new_flaky, profile_touched=touched)
    profile_diff.with_cells(profiles, rows)
    result = judge(rows, now, known, runs=runs, today=today, profiles=profiles)
    result["levels"] = list(levels)
    result["baseline_paths"], result["current_paths"] = list(baseline), list(current)
    return result
