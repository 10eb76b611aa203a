"""The catalogue is consistent: every requirement has a case, every case names a known requirement."""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance.cases import all_cases
from conformance.catalogue.requirements import LEVELS, catalogue, load_areas, select
from conformance.errors import UsageError


def test_every_requirement_has_a_case() -> None:
    covered = {c.requirement for c in all_cases()}
    missing = sorted(set(catalogue()) - covered)
    assert not missing, f"requirements without a case: {missing}"


def test_every_case_names_a_known_requirement() -> None:
    unknown = sorted({f"{c.__name__}: {c.requirement}" for c in all_cases() if c.requirement not in catalogue()})
    assert not unknown, f"cases naming unknown requirements: {unknown}"


def test_requirements_are_complete_records() -> None:
    for r in catalogue().values():
        assert r.level in LEVELS
        assert r.text and r.sources, r.id
        assert r.area and r.id.startswith(r.area.upper() + "-"), r.id


def test_select_filters_by_area_and_level() -> None:
    assert {r.level for r in select(level="should")} == {"SHOULD"}
    assert all(r.area == "ack" for r in select(area="ack"))
    with pytest.raises(UsageError):
        select(level="OFTEN")


@pytest.mark.parametrize(
    "text, message",
    [
        ("area: x\nrequirements:\n  - {id: X-ONE, level: MUST, text: t}\n", "missing sources"),
        ("area: x\nrequirements:\n  - {id: x1, level: MUST, text: t, sources: [{kind: spec, ref: r}]}\n", "not of the form"),
        ("area: x\nrequirements:\n  - {id: X-ONE, level: OFTEN, text: t, sources: [{kind: spec, ref: r}]}\n", "level"),
        ("area: x\nrequirements:\n  - {id: X-ONE, level: MUST, text: t, sources: [{kind: blog, ref: r}]}\n", "each source"),
        ("requirements: []\n", "needs 'area'"),
        ("area: [unclosed\n", "cannot read"),
    ],
)
def test_malformed_requirement_files_are_refused(tmp_path: Path, text: str, message: str) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text(text)
    with pytest.raises(UsageError, match=message):
        load_areas([f])
