"""Known bugs: a profile explains, it never excuses. A failure whose observation matches a bug reported
upstream and still open stays a fail (verdict, vendor verdict, exit code, gate), and carries the
report beside its Expected/Actual lines; a deviation (a bug fixed in a later release, on the versions
it affects) wins over a known bug; nothing else is touched."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from conformance.catalogue.explain import sections as explain_sections
from conformance.catalogue.profiles import bundled_profiles, load_profile_file, parse_profile
from conformance.catalogue.requirements import requirement
from conformance.errors import UsageError
from conformance.kit.verdicts import KNOWN_BUG_REASON, Outcome, Verdict, apply_profile
from conformance.runner import records
from conformance.runner.progress import case_block

REQ = "ACK-UNKNOWN-TAG-406"
BUG = "https://github.com/example/broker/issues/1 (open)"
FIX = "https://github.com/example/broker/pull/2, fixed in 2.0.0"


def _profile(known: list[dict], deviations: list[dict] | None = None, version: str = ""):  # type: ignore[no-untyped-def]
    data = {"id": "p", "match": {"product": "P", "protocols": ["amqp-0-9-1"]}, "known_bugs": known, "deviations": deviations or []}
    return replace(parse_profile(data, "test"), server_version=version)


def _bug(**kw: object) -> dict:
    return {"requirement": REQ, "queue_types": ["classic"], "observed": "no-error", "reason": "the broker ignores it",
            "source": BUG, **kw}


FAILED = Verdict(Outcome.FAIL, "channel closed with 406", "channel stayed open", key="no-error", spec="fail")


def test_a_matching_fail_stays_a_fail_and_carries_the_report() -> None:
    v = apply_profile(FAILED, REQ, "classic", _profile([_bug()]))
    assert (v.outcome, v.vendor, v.spec) == (Outcome.FAIL, "fail", "fail")
    assert v.known_bug == BUG and v.citation == BUG
    assert v.reason == KNOWN_BUG_REASON + "the broker ignores it"
    text = v.render(REQ, "MUST")
    assert "FAIL" in text.splitlines()[0] and f"  Known bug: {BUG}" in text and "Actual:" in text


def test_a_known_bug_applies_only_to_its_requirement_queue_type_key_and_versions() -> None:
    p = _profile([_bug(versions=">=1.0,<2.0")], version="1.5.0")
    assert apply_profile(FAILED, REQ, "classic+priority", p).known_bug == BUG  # a configuration of classic
    assert not apply_profile(FAILED, REQ, "quorum", p).known_bug
    assert not apply_profile(replace(FAILED, key="connection-541"), REQ, "classic", p).known_bug
    assert not apply_profile(FAILED, REQ, "classic", replace(p, server_version="2.0.0")).known_bug
    passed = Verdict(Outcome.PASS, "e", "o", key="no-error")
    assert apply_profile(passed, REQ, "classic", p) == passed


def test_a_deviation_wins_over_a_known_bug() -> None:
    """A bug fixed in a later release is a deviation on the versions it affects, citing the fix."""
    dev = {"requirement": REQ, "observed": "no-error", "reason": "fixed in 2.0.0", "source": FIX, "versions": "<2.0.0"}
    p = _profile([_bug()], [dev], version="1.0.0")
    v = apply_profile(FAILED, REQ, "classic", p)
    assert v.outcome is Outcome.DEVIATION and v.citation == FIX and not v.known_bug
    after = apply_profile(FAILED, REQ, "classic", replace(p, server_version="2.1.0"))
    assert after.outcome is Outcome.FAIL and after.known_bug == BUG


@pytest.mark.parametrize(("source", "message"), [
    ("rabbitmq-server#10070, open", "cite the upstream report by its URL"),
    ("https://github.com/example/broker/issues/1, fixed in 2.0.0", "say that the upstream report is open"),
])
def test_a_known_bug_cites_the_open_upstream_report(tmp_path: Path, source: str, message: str) -> None:
    f = tmp_path / "p.yaml"
    f.write_text(f"id: x\nmatch: {{product: P, protocols: [amqp-0-9-1]}}\nknown_bugs:\n"
                 f"  - {{requirement: {REQ}, observed: no-error, reason: r, source: '{source}'}}\n")
    with pytest.raises(UsageError, match=message):
        load_profile_file(f)
    f.write_text(f"id: x\nmatch: {{product: P, protocols: [amqp-0-9-1]}}\nknown_bugs: [{{requirement: {REQ}, reason: r, source: '{BUG}'}}]\n")
    with pytest.raises(UsageError, match="missing 'observed'"):
        load_profile_file(f)


def test_known_bugs_merge_through_extends_by_identity(tmp_path: Path) -> None:
    f = tmp_path / "child.yaml"
    f.write_text("id: child\nextends: rabbitmq-3.10\nmatch: {versions: '>=9.0'}\nknown_bugs:\n"
                 "  - {requirement: PREFETCH-ZERO-UNLIMITED, queue_types: [quorum], observed: held-back-at-2000, remove: true}\n")
    child = load_profile_file(f)
    parent = next(p for p in bundled_profiles() if p.id == "rabbitmq-3.10")
    assert {d.requirement for d in parent.known_bugs} - {d.requirement for d in child.known_bugs} == {"PREFETCH-ZERO-UNLIMITED"}


def test_every_bundled_known_bug_is_an_open_upstream_report_and_no_deviation_rests_on_one() -> None:
    for p in bundled_profiles():
        for d in p.known_bugs:
            assert "https://" in d.source and "open" in d.source and d.observed, (p.id, d.requirement)
        for d in p.deviations:
            # an open upstream bug is a known bug (a fail), never a deviation
            assert "open)" not in d.source and ", open" not in d.source, (p.id, d.requirement, d.source)


def test_the_record_and_every_text_output_show_the_report() -> None:
    v = apply_profile(FAILED, REQ, "classic", _profile([_bug()]))
    result = records.decided(requirement(REQ), "amqp-0-9-1", "classic", None, v, duration_s=0.1, lock_wait_s=0.0)
    fields = records.case_fields(result)
    assert (fields["verdict"], fields["vendor_verdict"], fields["known_bug"]) == ("fail", "fail", BUG)
    assert records.case_fields(records.decided(requirement(REQ), "amqp-0-9-1", "classic", None, FAILED,
                                               duration_s=0.1, lock_wait_s=0.0))["known_bug"] is None
    # the JUnit failure message and the Allure text are the rendered verdict
    assert f"Known bug: {BUG}" in records.sections(result)[0][1]
    block = case_block({**fields, "case_id": "c"}, None)
    assert block[1].startswith("  Expected:") and f"  Known bug: {BUG}" in block
    explained = "\n".join(line for s in explain_sections({}, {**fields, "case_id": "c"}, requirement(REQ)) for line in s.lines)
    assert BUG in explained and "still a fail" in explained
