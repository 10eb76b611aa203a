"""Result records, secret redaction, and target construction errors (no broker needed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from adapters.rabbitmq.launcher import RabbitMQLocalNode
from conformance.errors import TargetError, UsageError
from conformance.runner.results import ResultsWriter, read_results, read_run
from conformance.targets import ExternalTarget, make_target, redact


def test_records_append_one_line_each_and_read_back(tmp_path: Path) -> None:
    w = ResultsWriter(tmp_path)
    w.append({"requirement": "ACK-X", "verdict": "pass"})
    w.append({"requirement": "ACK-Y", "verdict": "fail"})
    w.write_run({"run_id": "r1"})
    recs = list(read_results(tmp_path))
    assert [r["requirement"] for r in recs] == ["ACK-X", "ACK-Y"]
    assert all(r["schema"] == "conformance.result/1" for r in recs)
    assert read_run(tmp_path)["run_id"] == "r1"


def test_malformed_results_file_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "results.jsonl").write_text('{"schema": "conformance.result/1"}\n{not json\n')
    with pytest.raises(UsageError, match=r"results.jsonl:2: malformed"):
        list(read_results(tmp_path))
    (tmp_path / "results.jsonl").write_text(json.dumps({"schema": "other/9"}) + "\n")
    with pytest.raises(UsageError, match="unknown result schema"):
        list(read_results(tmp_path))


def test_redact_hides_passwords_only() -> None:
    assert redact("amqp://u:s3cret@h:5672/%2F") == "amqp://u:***@h:5672/%2F"
    assert redact("amqp://h:5672/") == "amqp://h:5672/"


def test_target_spec_resolution() -> None:
    t = make_target("amqp://u:pw@127.0.0.1:5672/")
    assert isinstance(t, ExternalTarget) and "pw" not in t.name
    assert isinstance(make_target("rabbitmq-local"), RabbitMQLocalNode)
    with pytest.raises(TargetError, match="unknown target 'nosuch'.*rabbitmq-local"):
        make_target("nosuch")


def test_unreachable_external_target_says_so() -> None:
    with pytest.raises(TargetError, match="unreachable") as exc:
        make_target("amqp://u:topsecret@127.0.0.1:1/").start()
    assert "topsecret" not in str(exc.value)


def test_launching_without_rabbitmq_installed_says_how_to_install(tmp_path: Path) -> None:
    node = RabbitMQLocalNode(home=str(tmp_path / "nowhere"))
    with pytest.raises(TargetError) as exc:
        node.start()
    message = str(exc.value)
    assert "not installed" in message and "apt-get install" in message and "\n" not in message


def test_target_from_the_environment_keeps_the_url_out_of_argv(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """``--target env:NAME``: a missing variable is one line and exit 2; a set one becomes the target."""
    import argparse

    from conformance.cli import _target_from_env, main
    from conformance.secrets import scrub

    monkeypatch.delenv("NO_SUCH_TARGET_VAR", raising=False)
    assert main(["selftest", "--target", "env:NO_SUCH_TARGET_VAR", "--list"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["conformance: error: --target env:NO_SUCH_TARGET_VAR: environment variable NO_SUCH_TARGET_VAR is not set"]
    monkeypatch.setenv("A_TARGET_VAR", "amqp://user:envpassw0rd@127.0.0.1:5672/%2F")
    args = argparse.Namespace(target="env:A_TARGET_VAR")
    _target_from_env(args)
    assert args.target == "amqp://user:envpassw0rd@127.0.0.1:5672/%2F"
    assert "envpassw0rd" not in scrub(f"failed on {args.target}")  # registered as a secret
