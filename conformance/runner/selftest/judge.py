"""Judging the self-test's runs: the kill matrix (kills, blind spots, unproven cases, false alarms,
known failures, declared expectations met or missed)."""

from __future__ import annotations

from typing import Any

from conformance.nemesis.kinds import NO_STORE_NOTE
from conformance.nemesis.mutations import Expectation, Mutation
from conformance.runner.selftest.plan import PROVABLE, Run, case_of

SCHEMA = "conformance.killmatrix/1"


def kill_matrix(clean: list[Run], runs: list[Run], mutations: dict[str, Mutation], declared: dict[str, Expectation],
                reach: dict[str, set[str]], wall_s: float) -> dict[str, Any]:
    """Judge the runs: kills, blind spots, unproven cases, false alarms, expectations met or missed."""
    meta = clean[0].meta if clean else {}
    cases: dict[str, dict[str, Any]] = {}
    for run in clean:
        for rec in run.records:
            case = case_of(rec)
            cases[case] = {"case": case, "requirement": rec["requirement"], "level": rec["level"], "area": rec["area"],
                           "queue_type": rec.get("queue_type"), "variant": rec.get("variant"), "clean": rec["verdict"],
                           "clean_observed": rec.get("observed", "") if rec["verdict"] not in PROVABLE else "",
                           "known_bug": rec.get("known_bug") or None,
                           "no_store": NO_STORE_NOTE in str(rec.get("reason") or "")}
    provable = {c for c, info in cases.items() if info["clean"] in PROVABLE}
    # A clean fail the profile names as a known bug (open upstream) is the broker's, not the suite's:
    # reported, never a problem, and not provable (no mutation can make the broker fail it more). A
    # mutation reproducing that very bug cannot be held to break its requirement on those cells. The
    # exemption is per cell: a known bug of the quorum cell says nothing about the classic one.
    known_failures = sorted(c for c, info in cases.items() if info["clean"] == "fail" and info["known_bug"])
    known_reqs = {cases[c]["requirement"] for c in known_failures}
    kills: list[dict[str, Any]] = []
    cells: list[dict[str, Any]] = []
    by_mutation: dict[str, dict[str, Any]] = {}
    for spec, m in mutations.items():
        mine = [r for r in runs if r.mutation == spec]
        rewritten = sum(int((r.meta.get("mutation") or {}).get("rewritten") or 0) for r in mine)
        ran = [rec for r in mine for rec in r.records]
        killed = []
        for rec in ran:
            c = case_of(rec)
            cells.append({"case": c, "mutation": spec, "verdict": rec["verdict"]})
            if rec["verdict"] == "fail" and c in provable:
                killed.append(c)
                kills.append({"case": c, "mutation": spec, "requirement": rec["requirement"], "verdict": "fail",
                              "observed": str(rec.get("observed", ""))[:400], "expected": str(rec.get("expected", ""))[:400]})
        exp = declared.get(spec) or declared.get(m.name)
        killed_reqs = sorted({cases[c]["requirement"] for c in killed})
        ran_reqs = {rec["requirement"] for rec in ran if case_of(rec) in provable}
        # a requirement whose cells that ran are all documented deviations here: the broker never
        # reaches the state the mutation changes, so a declared kill there is not owed (as unproven_deviation)
        judged_reqs = {rec["requirement"] for rec in ran if case_of(rec) in provable and cases[case_of(rec)]["clean"] != "deviation"}
        breaks = list(exp.breaks) if exp else []
        by_mutation[spec] = {
            "name": spec, "description": m.description, "protocol": m.protocol, "breaks": breaks,
            "may_break": list(exp.may_break) if exp else [], "why": exp.why if exp else "",
            "frames_rewritten": rewritten, "cases_run": len(ran), "wall_s": round(sum(r.wall_s for r in mine), 2),
            "killed_requirements": killed_reqs,
            "errors": sorted({case_of(rec) for rec in ran if rec["verdict"] == "error"}),
            "missed": sorted(set(breaks) & judged_reqs - set(killed_reqs)),
            # every declared requirement that ran is a documented deviation here: nothing it must kill
            "deviation_only": bool(set(breaks) & ran_reqs) and not set(breaks) & judged_reqs,
            # a cell of it fails with a known bug and none of its provable cells ran under this mutation
            "known_failure": sorted(set(breaks) & known_reqs - ran_reqs),
            "not_run": sorted(set(breaks) - ran_reqs - known_reqs),
            "collateral": sorted(set(killed_reqs) - set(breaks) - set(exp.may_break if exp else ())),
            "declared": exp is not None,
            "exercised": bool(ran) and rewritten > 0,
        }
    killers: dict[str, list[str]] = {}
    for k in kills:
        killers.setdefault(k["case"], []).append(k["mutation"])
    for c, info in cases.items():
        info["killed_by"] = sorted(killers.get(c, []))
    mut = by_mutation.values()
    blind = sorted(m["name"] for m in mut if m["exercised"] and not m["killed_requirements"] and not m["known_failure"]
                   and not m["deviation_only"])
    unexercised = sorted(m["name"] for m in mut if not m["exercised"])
    unproven = sorted(c for c in provable if c not in killers)
    # A documented deviation that no mutation changed: the broker never reaches the state the
    # requirement is about (e.g. a queue unavailable after kill -9), so nothing there can be proven.
    unproven_deviation = [c for c in unproven if cases[c]["clean"] == "deviation"]
    # A pass after the case's own restart or kill on a target that keeps nothing across them (a qpidd
    # without its store module): what the requirement says is gone is gone whatever the wire carried,
    # so no mutation can fail it there; a target with a store proves it (the 0-9-1 self-test).
    unproven_no_store = [c for c in unproven if cases[c]["clean"] == "pass" and cases[c]["no_store"]]
    false_alarms = sorted(c for c, info in cases.items() if info["clean"] == "fail" and not info["known_bug"])
    clean_errors = sorted(c for c, info in cases.items() if info["clean"] == "error")
    misattributed = [{"mutation": m["name"], "expected": m["breaks"], "caught_by": m["killed_requirements"]}
                     for m in mut if m["killed_requirements"] and m["breaks"] and not set(m["breaks"]) & set(m["killed_requirements"])
                     and not m["known_failure"] and not m["deviation_only"]]
    missed = [{"mutation": m["name"], "requirements": m["missed"]} for m in mut if m["missed"]]
    undeclared = sorted(m["name"] for m in mut if not m["declared"])
    unproven_must = [c for c in unproven if cases[c]["level"] == "MUST" and c not in unproven_deviation and c not in unproven_no_store]
    checks: list[tuple[object, str]] = [
        (unproven_must, f"{len(unproven_must)} MUST case(s) no mutation failed"),
        (blind, f"{len(blind)} mutation(s) no case caught: {', '.join(blind)}"),
        (misattributed, f"{len(misattributed)} mutation(s) caught only by requirements they were not declared to break"),
        (missed, "declared expectations not met: " + "; ".join(f"{m['mutation']} did not break {', '.join(m['requirements'])}" for m in missed)),
        (false_alarms, f"{len(false_alarms)} case(s) failed without any mutation"),
        (clean_errors, f"{len(clean_errors)} case(s) errored on the clean run"),
        (undeclared, f"mutation(s) without a declared expectation: {', '.join(undeclared)}"),
    ]
    problems = [text for found, text in checks if found]
    return {
        "schema": SCHEMA,
        "target": meta.get("target", ""), "product": meta.get("product", ""), "version": meta.get("version", ""),
        "protocol": meta.get("protocol", ""), "profile": meta.get("profile", ""), "adapter": meta.get("adapter", ""),
        "wall_s": round(wall_s, 1),
        "runs": [{"label": r.label, "mutation": r.mutation, "cases": len(r.records), "wall_s": round(r.wall_s, 2), "returncode": r.returncode}
                 for r in [*clean, *runs]],
        "mutations": list(by_mutation.values()),
        "cases": sorted(cases.values(), key=lambda c: c["case"]),
        "cells": cells,
        "kills": kills,
        "blind_spots": blind,
        "unexercised": unexercised,
        "unproven": unproven,
        "unproven_must": unproven_must,
        "unproven_deviation": unproven_deviation,
        "unproven_no_store": unproven_no_store,
        "false_alarms": false_alarms,
        "known_failures": [{"case": c, "requirement": cases[c]["requirement"], "known_bug": cases[c]["known_bug"]}
                           for c in known_failures],
        "clean_errors": clean_errors,
        "misattributed": misattributed,
        "missed": missed,
        "counts": {"cases": len(cases), "provable": len(provable), "mutations": len(by_mutation), "kills": len(kills),
                   "killed_cases": len(killers), "blind_spots": len(blind), "unexercised": len(unexercised),
                   "unproven": len(unproven), "unproven_must": len(unproven_must), "unproven_deviation": len(unproven_deviation),
                   "unproven_no_store": len(unproven_no_store), "false_alarms": len(false_alarms), "known_failures": len(known_failures)},
        "problems": problems,
        "ok": not problems,
        "reach": {k: sorted(v) for k, v in reach.items()},
    }
