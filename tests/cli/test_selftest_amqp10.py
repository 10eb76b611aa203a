"""The self-test over AMQP 1.0 on RabbitMQ's plugin (the link area), killing every provable case with
only the reviewed fails left on the clean run; the helpers the qpidd self-test shares
(tests/cli/test_selftest_qpidd.py). A file of its own, so that it runs beside the 0-9-1 self-test
(tests/cli/test_selftest.py) on another worker rather than after it."""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance import yamlio
from tests.cli.test_selftest import _explain, _selftest
from tests.e2e.seed_brokers import ROOT, cell_of


def _kept(m: dict, kept: set[str]) -> list[str]:
    """The clean run's fails that are not fails the review kept on this broker (cells of ``kept``)."""
    cases = {c["case"]: c for c in m["cases"]}
    return [c for c in m["false_alarms"] if cell_of(cases[c]) not in kept]


def _only_kept_fails_left(m: dict, kept: set[str]) -> None:
    """What a self-test on a broker with kept fails must show: every other problem absent."""
    assert _kept(m, kept) == [] and m["clean_errors"] == [], _explain(m)
    assert m["unproven_must"] == [], _explain(m)
    assert m["blind_spots"] == [] and m["misattributed"] == [] and m["missed"] == [], _explain(m)
    others = [p for p in m["problems"] if "failed without any mutation" not in p]
    assert others == [], _explain(m)


@pytest.mark.timeout(900)
def test_selftest_amqp10_through_proton(rabbit, tmp_path: Path) -> None:
    """RabbitMQ's AMQP 1.0 plugin, the link area (the whole catalogue over 1.0 is the qpidd test's
    below, where a run is seconds, not minutes): the plugin's kept fails are the only clean fails."""
    kept = set(yamlio.safe_load((ROOT / "tests/e2e/kept_fails/rabbitmq-3.10.8-amqp10.yaml").read_text())["cells"])
    proc, m = _selftest(rabbit, tmp_path, "--adapter", "proton", "--area", "link", "--parallel", "4")
    assert m["protocol"] == "amqp-1.0"
    _only_kept_fails_left(m, kept)
