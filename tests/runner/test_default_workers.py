"""The default worker count: one more than the cores for the whole catalogue (at most four), one
for a selection or a single core, and --workers always wins (conformance.runner.pytest_argv)."""

from __future__ import annotations

import argparse

import pytest

from conformance.runner import pytest_argv
from conformance.runner.options import FILTERS
from conformance.runner.pytest_argv import MAX_DEFAULT_WORKERS, default_workers


def ns(**kw: object) -> argparse.Namespace:
    return argparse.Namespace(**{"workers": None, **{name: None for name in FILTERS}, **kw})


@pytest.mark.parametrize(("cores", "want"), [(1, 1), (2, 3), (3, 4), (16, MAX_DEFAULT_WORKERS), (None, 1)])
def test_whole_catalogue_gets_one_more_worker_than_cores(monkeypatch: pytest.MonkeyPatch, cores: int | None, want: int) -> None:
    monkeypatch.setattr(pytest_argv.os, "cpu_count", lambda: cores)
    assert default_workers(ns()) == want


def test_a_selection_stays_in_one_process_and_an_explicit_count_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pytest_argv.os, "cpu_count", lambda: 2)
    name = FILTERS[0]
    assert default_workers(ns(**{name: ["x"]})) == 1
    assert default_workers(ns(workers=2)) == 2 and default_workers(ns(workers=1, **{name: ["x"]})) == 1
