"""The result record: one module sets its fields (conformance.runner.records), and a record has the
same fields it always had. Synthetic facts, no broker: the end-to-end runs check real records."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from conformance.cases import all_cases
from conformance.catalogue.profiles import select_profile
from conformance.catalogue.requirements import requirement
from conformance.kit.history import History
from conformance.kit.verdicts import Outcome, Verdict
from conformance.runner import records
from conformance.runner.shared_faults import GROUP, PlannedCase

ROOT = Path(__file__).resolve().parents[2]

#: Every field of a decided case's record (results.jsonl; the writer adds ``schema``).
DECIDED = {"adapter", "adapter_library", "area", "attempt", "case_id", "catalogue_digest", "citation", "duration_s", "expected",
           "finished_at", "history", "known_bug", "level", "lock_wait_s", "observations", "observed", "product", "profile", "profile_digest",
           "protocol", "pytest_outcome", "queue_type", "reason", "requirement", "run_id", "spec_verdict", "suite_version", "target",
           "target_url", "unsupported_kind", "variant", "vendor_verdict", "verdict", "version", "wire_trace", "worker"}
#: A case interrupted before a verdict has no verdict details, no time and nothing it saw.
UNDECIDED = DECIDED - {"citation", "duration_s", "history", "known_bug", "lock_wait_s", "observations", "unsupported_kind", "variant", "wire_trace"}


def _item(nodeid: str = "ack/test_basic_ack.py::TestX::test[classic]", attempt: int | None = None) -> PlannedCase:
    return PlannedCase(nodeid, all_cases()[0], "classic", None, attempt)


def _state(**kw: Any) -> Any:
    adapter = SimpleNamespace(protocol="amqp-0-9-1", name="pika", library_version=lambda: "pika 1.4.4")
    return SimpleNamespace(run_id="r1", target=None, target_label="amqp://u:***@127.0.0.1:5672/%2F", url="amqp://u:pw@127.0.0.1:5672/%2F", server={"product": "RabbitMQ", "version": "3.10.8"},
                           adapter=adapter, profile=select_profile("RabbitMQ", "3.10.8", "amqp-0-9-1"), mutation=None, **kw)


def _decided(item: Any, v: Verdict, **kw: Any) -> records.Result:
    req = requirement(item.cls.requirement)
    return records.decided(req, "amqp-0-9-1", "classic", None, v, duration_s=0.123456, lock_wait_s=0.0001, **kw)


def test_a_decided_case_s_record_has_every_field_it_always_had() -> None:
    item = _item()
    result = _decided(item, Verdict(Outcome.FAIL, "e", "o", spec="fail", reason="r", citation="c"), observations={"x": 1})
    rec = records.record(item, _state(), result, outcome="failed", longrepr="", worker="main")
    assert set(rec) == DECIDED
    assert (rec["verdict"], rec["spec_verdict"], rec["vendor_verdict"], rec["unsupported_kind"]) == ("fail", "fail", "fail", None)
    assert (rec["duration_s"], rec["lock_wait_s"], rec["observations"], rec["attempt"]) == (0.1235, 0.0001, {"x": 1}, 1)
    assert rec["target"] == rec["target_url"] == "amqp://u:***@127.0.0.1:5672/%2F"
    assert rec["level"] == requirement(item.cls.requirement).level_for("amqp-0-9-1") and rec["worker"] == "main"


def test_an_interrupted_case_s_record_has_only_what_its_report_says() -> None:
    item = _item()
    result = records.undecided(item, "amqp-0-9-1", "Timeout: case deadline 30s reached in basic.get: no basic.get-ok after 30.0s")
    rec = records.record(item, _state(), result, outcome="failed", longrepr="Traceback ...\nFailed: Timeout", worker="gw1")
    assert set(rec) == UNDECIDED | {"traceback"}
    assert (rec["verdict"], rec["spec_verdict"], rec["vendor_verdict"], rec["reason"]) == ("error", "n/a", "n/a", "case did not reach a verdict")
    assert records.sections(result)[0] == ("expected vs observed", f"Expected: {rec['expected']}\nActual:   {rec['observed']}")


def test_history_and_trace_are_kept_for_a_case_that_did_not_pass_and_a_rerun_is_named() -> None:
    history = History()
    history.add("client", "publish", "m1")
    item = _item()
    passed = records.case_fields(_decided(item, Verdict(Outcome.PASS, "e", "o"), history=history, trace="a\nb"))
    assert passed["history"] is None and passed["wire_trace"] is None and "rerun" not in passed
    kept = records.case_fields(_decided(item, Verdict(Outcome.PASS, "e", "o"), history=history, trace="a\nb", keep_history=True))
    assert kept["history"] == history.as_records() and kept["wire_trace"] == ["a", "b"]
    failed = _decided(item, Verdict(Outcome.FAIL, "e", "o"), history=history, trace="a\nb", rerun="restarted after y hung it")
    assert records.case_fields(failed)["rerun"] == "restarted after y hung it" and records.case_fields(failed)["history"]
    titles = [t for t, _ in records.sections(failed)]
    assert titles == ["expected vs observed", "history", "Captured stdout wire trace"]
    assert records.sections(_decided(item, Verdict(Outcome.ERROR, "e", "o"), brief=True)) == []


def test_the_case_id_is_the_same_for_every_repetition_and_any_number_of_workers() -> None:
    item = _item(f"ack/test_basic_ack.py::TestX::test[classic-{records.ATTEMPT_ID}2]@{GROUP}", attempt=2)
    result = _decided(item, Verdict(Outcome.PASS, "e", "o"))
    rec = records.record(item, _state(), result, outcome="passed", longrepr="", worker="main")
    assert (rec["case_id"], rec["attempt"]) == ("ack/test_basic_ack.py::TestX::test[classic]", 2)
    in_a_pack = dataclasses.replace(result.requirement, pack="stomp")  # its file is named relative to the pack's folder
    assert records.case_id(item, in_a_pack) == "stomp/ack/test_basic_ack.py::TestX::test[classic]"


def test_only_the_record_builder_sets_a_record_s_fields() -> None:
    """Fields only a result record has, set as a dict key or a keyword anywhere else in the suite,
    would be a second place that builds records."""
    own = re.compile(r"""["'](spec_verdict|vendor_verdict|lock_wait_s|pytest_outcome|unsupported_kind|wire_trace|adapter_library)["']\s*:"""
                     r"|\b(spec_verdict|vendor_verdict|pytest_outcome|wire_trace|adapter_library)\s*=")
    found = [f"{p.relative_to(ROOT)}:{n}" for folder in ("conformance", "adapters") for p in sorted((ROOT / folder).rglob("*.py"))
             if p != ROOT / "conformance" / "runner" / "records.py"
             for n, line in enumerate(p.read_text().splitlines(), 1) if own.search(line)]
    assert found == []
