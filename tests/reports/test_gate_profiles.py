"""The gate across profiles, pure logic on synthetic data: which members two resolved profiles differ
in, which cells each touches, when a moved cell is excused, and how a side's profile is found."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from reports.gate import EXIT_FAILED, EXIT_PASSED, check_runs, classify, judge
from reports.manifest import Known
from reports.profile_diff import compare, differences, side_profile, with_cells
from reports.runs import RunMeta, profile_pairs
from reports.runs import differences as run_differences
from tests.reports.test_reports import rec, run_dir

ROW = {"value": "limit", "source": "docs", "reason": "a bug before 2.4.0"}
BASE: dict[str, Any] = {
    "id": "old", "title": "Old", "product": "Broker", "versions": ">=1,<2", "protocols": ["amqp-0-9-1"], "checked": "1.3.1",
    "queue_types": {"classic": {"name": "classic", "durable": True, "arguments": {}, "source": "docs", "runs": True, "reason": ""}},
    "entries": {"delivery-limit.deliveries": {"": ROW}, "redelivery.signal": {"": {"value": "redelivered-flag", "source": "docs", "reason": ""}}},
    "deviations": [{"requirement": "NACK-REJECT-REQUEUE", "queue_types": ["classic"], "observed": "same-channel", "reason": "r",
                    "source": "s", "versions": ["<1.2"], "kind": "", "refusal": ""}],
    "unsupported": [], "lacks": {},
}


def cell(req: str, verdict: str, *, qt: str | None = "classic", version: str = "2.9.1", spec: str = "none") -> dict[str, Any]:
    config = " ".join(x for x in ("Broker", "amqp-0-9-1", qt) if x)
    return {"config": config, "column": f"Broker {version} amqp-0-9-1 {qt or '-'}", "product": "Broker", "protocol": "amqp-0-9-1",
            "queue_type": qt, "version": version, "requirement": req, "level": "MUST", "area": "x", "verdict": verdict,
            "flaky": False, "spec_verdict": spec, "case_id": f"x/test_x.py::T::test[{qt or 'default'}]", "passes": 0, "decided": 0}


def edited(**changes: Any) -> dict[str, Any]:
    data = copy.deepcopy(BASE)
    data.update(changes)
    return data


def test_only_what_differs_is_listed_each_with_its_change_and_fields() -> None:
    assert differences(BASE, copy.deepcopy(BASE)) == []
    assert differences(BASE, edited(id="new", title="New", checked="2.9.1")) == []  # prose and the id are shown apart
    cur = edited(versions=">=2", entries={"delivery-limit.deliveries": {"": {**ROW, "value": "limit+1", "reason": ""},
                                                                         "quorum": {"value": "limit", "source": "qq", "reason": "r"}}},
                 deviations=[], unsupported=[{"requirement": "TX-X", "queue_types": None, "reason": "r", "source": "s", "kind": "cannot-express"}],
                 lacks={"browse": {"reason": "r", "source": "s"}})
    got = {(d["section"], d["key"]): (d["change"], d["fields"]) for d in differences(BASE, cur)}
    assert got == {
        ("match", "versions"): ("changed", []),
        ("entries", "delivery-limit.deliveries"): ("changed", ["reason", "value"]),
        ("entries", "delivery-limit.deliveries [quorum]"): ("added", []),
        ("entries", "redelivery.signal"): ("removed", []),
        ("deviations", "NACK-REJECT-REQUEUE [classic] observed 'same-channel'"): ("removed", []),
        ("unsupported", "TX-X"): ("added", []),
        ("lacks", "browse"): ("added", []),
    }


def touched_by(base: dict[str, Any], cur: dict[str, Any], base_cells: list[dict[str, Any]], cur_cells: list[dict[str, Any]]) -> dict[str, list[tuple[str, str]]]:
    from reports.profile_diff import SideProfile

    pairs = [("Broker", "amqp-0-9-1", SideProfile("old", "a", base, "run.json of b"), SideProfile("new", "b", cur, "run.json of c"))]
    comparisons, _ = compare(pairs, base_cells, cur_cells)
    return {d["key"]: sorted((r, c.split()[-1]) for c, r in d["touched"]) for d in comparisons[0]["differences"]}


def test_an_entry_row_touches_the_cells_of_the_requirements_reading_its_key_and_that_row() -> None:
    # LIMIT-MAX-DELIVERIES and LIMIT-DEFAULT read delivery-limit.deliveries (profile_keys.yaml read_by)
    cur = edited(entries={**BASE["entries"], "delivery-limit.deliveries": {"": {**ROW, "value": "limit+1"},
                                                                           "quorum": {"value": "limit", "source": "qq", "reason": "r"}}})
    cells = [cell("LIMIT-MAX-DELIVERIES", "deviation"), cell("LIMIT-MAX-DELIVERIES", "deviation", qt="quorum"),
             cell("LIMIT-DEFAULT", "pass"), cell("ACK-A", "pass")]
    got = touched_by(BASE, cur, cells, cells)
    # the default row: the classic cells (the quorum cell reads its own row now, the default row before)
    assert got["delivery-limit.deliveries"] == [("LIMIT-DEFAULT", "classic"), ("LIMIT-MAX-DELIVERIES", "classic"), ("LIMIT-MAX-DELIVERIES", "quorum")]
    assert got["delivery-limit.deliveries [quorum]"] == [("LIMIT-MAX-DELIVERIES", "quorum")]


def test_a_deviation_touches_its_requirement_and_queue_types_on_the_versions_it_affects() -> None:
    cells_old = [cell("NACK-REJECT-REQUEUE", "deviation", version="1.1.0"), cell("NACK-REJECT-REQUEUE", "fail", qt="quorum", version="1.1.0")]
    assert touched_by(BASE, edited(deviations=[]), cells_old, [])[
        "NACK-REJECT-REQUEUE [classic] observed 'same-channel'"] == [("NACK-REJECT-REQUEUE", "classic")]
    # on 1.3.1 the deviation (versions <1.2) never applied: its removal touched no cell
    cells_later = [cell("NACK-REJECT-REQUEUE", "fail", version="1.3.1")]
    assert touched_by(BASE, edited(deviations=[]), cells_later, [])["NACK-REJECT-REQUEUE [classic] observed 'same-channel'"] == []


def gate(base_cells: list[dict[str, Any]], cur_cells: list[dict[str, Any]], cur_profile: dict[str, Any],
         known: list[Known] = ()) -> dict[str, Any]:
    from reports.profile_diff import SideProfile

    pairs = [("Broker", "amqp-0-9-1", SideProfile("old", "a", BASE, "run.json of b"), SideProfile("new", "b", cur_profile, "run.json of c"))]
    comparisons, touched = compare(pairs, base_cells, cur_cells)
    rows = classify(base_cells, cur_cells, list(known), profile_touched=touched)
    with_cells(comparisons, rows)
    return judge(rows, cur_cells, list(known), profiles=comparisons)


NEW_DEVIATION = {"requirement": "PUBLISH-PRIORITY-TWO-LEVELS", "queue_types": None, "observed": "priority-ignored", "reason": "r", "source": "s"}


@pytest.mark.parametrize("was, now, spec, cls, code", [
    ("fail", "deviation", ("fail", "fail"), "excused", EXIT_FAILED),  # the new profile explains what the old one called a failure
    ("fail", "pass", ("none", "none"), "excused", EXIT_FAILED),  # a pass that rests on the profile alone (a vendor-judged key)
    ("fail", "pass", ("fail", "pass"), "fixed", EXIT_PASSED),  # the spec verdict, judged without a profile, passes now: the broker changed
    ("pass", "deviation", ("pass", "fail"), "newly deviation", EXIT_FAILED),
    ("fail", "fail", ("fail", "fail"), "still failing", EXIT_PASSED),
])
def test_a_cell_a_profile_difference_moved_from_failing_is_excused_and_blocks(was: str, now: str, spec: tuple[str, str], cls: str, code: int) -> None:
    base = [cell("PUBLISH-PRIORITY-TWO-LEVELS", was, spec=spec[0])]
    cur = [cell("PUBLISH-PRIORITY-TWO-LEVELS", now, spec=spec[1])]
    g = gate(base, cur, edited(deviations=[*BASE["deviations"], NEW_DEVIATION]))
    [row] = g["table"]
    assert (row["class"], g["exit_code"]) == (cls, code)
    assert row["profile_differences"] == ["deviations PUBLISH-PRIORITY-TWO-LEVELS observed 'priority-ignored' (added; old -> new)"]
    [diff] = g["profiles"][0]["differences"]
    assert [(c["requirement"], c["class"]) for c in diff["cells"]] == [("PUBLISH-PRIORITY-TWO-LEVELS", cls)]


def test_an_untouched_cell_is_never_excused_and_the_manifest_releases_an_excused_one() -> None:
    base, cur = [cell("ACK-A", "fail", spec="fail")], [cell("ACK-A", "deviation", spec="fail")]
    g = gate(base, cur, edited(deviations=[*BASE["deviations"], NEW_DEVIATION]))
    assert g["table"][0]["class"] == "newly deviation" and g["table"][0]["profile_differences"] == []
    base, cur = [cell("PUBLISH-PRIORITY-TWO-LEVELS", "fail", spec="fail")], [cell("PUBLISH-PRIORITY-TWO-LEVELS", "deviation", spec="fail")]
    g = gate(base, cur, edited(deviations=[*BASE["deviations"], NEW_DEVIATION]),
             [Known("PUBLISH-PRIORITY-TWO-LEVELS", "Broker * classic", "documented from 2.0 on", "", None)])
    assert (g["table"][0]["class"], g["table"][0]["change"], g["exit_code"]) == ("known", "excused", EXIT_PASSED)


def meta(folder: str, profile: str, digest: str, **raw: Any) -> RunMeta:
    return RunMeta(folder=folder, run_id="r", status="finished", suite_version="0.1.0", catalogue_digest="c" * 64, profile=profile,
                   profile_digest=digest, product="Broker", protocol="amqp-0-9-1", raw=raw)


def test_another_profile_on_the_other_side_is_comparable_two_on_one_side_are_not() -> None:
    a, b = meta("/a", "old", "a" * 64), meta("/b", "new", "b" * 64)
    assert run_differences([a], [b]) == []
    assert [(p, q, [m.folder for m in x], [m.folder for m in y]) for p, q, x, y in profile_pairs([a], [b])] == [("Broker", "amqp-0-9-1", ["/a"], ["/b"])]
    assert profile_pairs([a], [meta("/c", "old", "a" * 64)]) == []
    assert run_differences([a, b], [b]) == [
        "the baseline judged Broker amqp-0-9-1 by more than one profile: new (bbbbbbbbbbbb), old (aaaaaaaaaaaa); gate one profile per side"]


def test_a_side_profile_comes_from_run_json_else_from_the_installed_profile_said_so() -> None:
    from conformance.catalogue.profiles import bundled_profiles, profile_data, profile_digest

    kept = side_profile([meta("/a", "old", "a" * 64, profile_data={**BASE, "title": None})])
    assert kept.data is not None and "title" not in kept.data and kept.origin == "run.json of /a"  # a null member is an absent one
    shipped = next(p for p in bundled_profiles() if p.id == "rabbitmq-3.10")
    same = side_profile([meta("/b", "rabbitmq-3.10", profile_digest(shipped))])
    assert same.data is not None and same.data["entries"] == json.loads(json.dumps(profile_data(shipped)["entries"]))
    assert same.origin == "/b: run.json keeps no profile data; read from the installed profile 'rabbitmq-3.10'"
    other = side_profile([meta("/c", "rabbitmq-3.10", "e" * 64)])
    assert "whose content is not the run's" in other.origin and "the list may be inexact" in other.origin
    gone = side_profile([meta("/d", "my-broker", "e" * 64)])
    assert gone.data is None and gone.origin == "/d: run.json keeps no profile data and no profile 'my-broker' is installed"


def test_a_profile_whose_content_cannot_be_found_keeps_the_gate_inconclusive(tmp_path: Path) -> None:
    base = run_dir(tmp_path, "base", [rec("ACK-A", "pass")])
    cur = run_dir(tmp_path, "cur", [rec("ACK-A", "pass", version="3.11.0")], profile="my-broker")
    check = check_runs([base + "/results.jsonl"], [cur + "/results.jsonl"])
    assert check.unfinished == [] and len(check.profiles) == 1
    assert check.differences == [(f"profile my-broker of RabbitMQ amqp-0-9-1 (current): {cur}: run.json keeps no profile data and no "
                                  "profile 'my-broker' is installed; which cells it excuses cannot be said")]
