"""The whole catalogue on each seed server the machine keeps in ../shared/brokers (LavinMQ 1.3.1 and
2.9.1, qpidd 1.39.0), the way a user runs it: ``conformance run --target process:<definition>`` with
the binary in the definition's environment variable, default workers, an existing --out folder.

Each run is compared cell by cell with the reviewed expectation file of that broker version
(tests/e2e/expected/); a changed verdict fails and names the cell. A server that is absent skips
with one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.seed_brokers import EXPECTED, differences, load

NAMES = sorted(p.stem for p in EXPECTED.glob("*.yaml"))


def test_each_seed_server_has_an_expectation_file() -> None:
    assert set(NAMES) >= {"lavinmq-1.3.1", "lavinmq-2.9.1", "qpid-cpp-1.39.0"}


@pytest.mark.parametrize("name", NAMES)
def test_the_expectation_file_is_reviewed_and_well_formed(name: str) -> None:
    """Loading checks the file: a verdict per cell, a why for each fail and deviation, a kind for
    each unsupported, nothing left UNREVIEWED; and it covers the whole catalogue, not a selection."""
    assert len(load(EXPECTED / f"{name}.yaml").cells) > 100


def test_each_expectation_file_has_its_run() -> None:
    """The runs sit in one test file per server (tests/e2e/test_seed_run_*.py), so the workers take the
    three catalogue runs at once instead of one after the other."""
    from tests.e2e import test_seed_run_lavinmq_1, test_seed_run_lavinmq_2, test_seed_run_qpid_cpp

    ran = [n for m in (test_seed_run_lavinmq_1, test_seed_run_lavinmq_2, test_seed_run_qpid_cpp) for n in m.NAMES]
    assert sorted(ran) == NAMES


def test_a_changed_verdict_fails_and_names_the_cell(tmp_path: Path) -> None:
    head = "product: X\nversion: '1.0'\ntarget: process:x\nadapter: pika\nenv: X\nbinary: x\ncells:\n"
    path = tmp_path / "x-1.0.yaml"
    path.write_text(head + '  "A-REQ [classic]": pass\n'
                           '  "B-REQ [classic nack]": {"verdict": "fail", "why": "broker bug: kept"}\n'
                           '  "C-REQ [-]": {"verdict": "unsupported", "kind": "refused"}\n')
    records = [{"requirement": "A-REQ", "queue_type": "classic", "variant": None, "verdict": "fail"},
               {"requirement": "B-REQ", "queue_type": "classic", "variant": "nack", "verdict": "fail"},
               {"requirement": "D-REQ", "queue_type": None, "variant": None, "verdict": "pass"}]
    assert differences(load(path), records) == [
        "A-REQ [classic]: expected pass, observed fail",
        "C-REQ [-]: expected unsupported (refused), the run has no such cell",
        "D-REQ [-]: new cell, pass; review it and add it to x-1.0.yaml"]
    for bad, message in (('{"verdict": "fail"}', "needs a one-line why"), ('{"verdict": "deviation", "why": "UNREVIEWED: x"}', "not reviewed yet"),
                         ('{"verdict": "unsupported"}', "names its kind"), ("passed", "expected a verdict")):
        path.write_text(head + f'  "A-REQ [classic]": {bad}\n')
        with pytest.raises(ValueError, match=message):
            load(path)
