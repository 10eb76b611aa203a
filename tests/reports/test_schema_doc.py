"""reports/SCHEMA.md documents what the suite writes: the result fields as reports/schema.py reads
them, and every key of run.json."""

from __future__ import annotations

import re

from conformance.runner.judged import summary
from reports.schema import RESULT_FIELDS
from tests.conftest import ROOT

DOC = (ROOT / "reports" / "SCHEMA.md").read_text()


def test_the_documented_result_fields_are_the_schema_s() -> None:
    table = {m[1]: (m[2], m[3]) for m in re.finditer(r"^\| `(\w+)` \| (\w+) \| (.*) \|$", DOC, re.MULTILINE)}
    assert {name: (kind, meaning) for name, kind, meaning in RESULT_FIELDS} == table


def test_run_json_s_judged_is_documented() -> None:
    """run.json's ``judged`` (conformance.runner.lifecycle writes judged.summary of the counts): every key named."""
    documented = DOC.split("## Fields of a result record")[0]
    assert "`judged`" in documented
    for key in summary({}):
        assert f"`{key}`" in documented, key
