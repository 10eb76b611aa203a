"""A run that names no target gets the selected adapter's own default target (declared as data on
the adapter, checked at load), or one line saying to give ``--target``."""

from __future__ import annotations

import argparse
import subprocess
from pathlib import Path
from typing import Any

import pytest

from conformance import default_target
from conformance.api import check_declared
from conformance.cli import EXIT_OK
from conformance.errors import UsageError
from conformance.runner.results import read_results, read_run
from tests.conftest import ROOT, conformance_cmd


class _Declares:
    name = "fake"
    schemes = ("fake",)

    def __init__(self, value: Any) -> None:
        self.default_target = value


def test_a_declared_default_target_is_checked_when_the_adapter_loads() -> None:
    for ok in (None, "rabbitmq-local", "process:targets/lavinmq.yaml", "fake://127.0.0.1:1/"):
        check_declared(_Declares(ok))
    for bad, said in ((42, "must be a launcher name or a URL"), ("", "must be a launcher name or a URL"),
                      ("no-such-launcher", "is no installed launcher")):
        with pytest.raises(UsageError, match=said):
            check_declared(_Declares(bad))


def test_the_target_comes_from_the_adapter_or_one_line_says_to_give_one(monkeypatch: pytest.MonkeyPatch) -> None:
    def resolved(**given: Any) -> str:
        args = argparse.Namespace(target=None, **given)
        default_target.resolve(args)
        return str(args.target)

    assert resolved(adapter=None) == "rabbitmq-local"
    assert resolved(adapter="pika") == "rabbitmq-local"
    assert resolved(adapter="stomp") == "rabbitmq-stomp"
    kept = argparse.Namespace(target="amqp://h/", adapter="stomp")
    default_target.resolve(kept)
    assert kept.target == "amqp://h/"

    class Undeclared:
        name, schemes, default_target = "inhouse", ("inhouse",), None

    monkeypatch.setattr("conformance.api.adapter_for", lambda scheme, preferred=None: Undeclared)
    with pytest.raises(UsageError, match=r"adapter 'inhouse' declares no default target: give --target, a inhouse:// URL"):
        resolved(adapter="inhouse")


def test_run_with_the_stomp_adapter_alone_launches_its_own_target(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = subprocess.run(conformance_cmd("run", "--adapter", "stomp", "-r", "STOMP-RECEIPT-ID", "--out", str(out)),
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == EXIT_OK, proc.stdout[-2000:] + proc.stderr[-2000:]
    run = read_run(out)
    assert (run["status"], run["protocol"], run["product"]) == ("finished", "stomp-1.2", "RabbitMQ"), run
    assert {r["verdict"] for r in read_results(out)} == {"pass"}

