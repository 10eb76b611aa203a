"""The options of a run come from one table (conformance.runner.options): ``conformance run``'s
argparse options, the ones ``conformance selftest`` shares, the pytest plugin's options and the pytest
command line a run starts are all generated from it, and one check refuses a bad value on the CLI
path and in a direct pytest run alike."""

from __future__ import annotations

import argparse
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from conformance.cli import EXIT_USAGE, build_parser, main, pytest_args
from conformance.cli.selftest import _command_options
from conformance.errors import UsageError
from conformance.runner.options import CLI_OPTIONS, OPTIONS, PYTEST_OPTIONS, TABLE, check
from tests.conftest import ROOT


def _subparser(name: str) -> argparse.ArgumentParser:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[name]


def _pytest_parser() -> object:
    from conformance.pytest_plugin.options import pytest_addoption

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Parser is pytest's private class; pytest_addoption is all it is used for
        from _pytest.config.argparsing import Parser

        parser = Parser()
    pytest_addoption(parser)
    return parser


def test_every_table_entry_is_an_option_of_conformance_run_or_of_pytest_with_its_flags_and_help() -> None:
    run = {a.dest: a for a in _subparser("run")._actions if a.dest != "help"}
    assert list(run) == [o.name for o in CLI_OPTIONS]
    for o in CLI_OPTIONS:
        assert tuple(run[o.name].option_strings) == o.flags and run[o.name].help == o.help, o.name
        assert run[o.name].default == (False if o.switch else o.default), o.name
    group = _pytest_parser().getgroup("conformance")  # type: ignore[attr-defined]
    declared = {arg.attrs()["dest"]: arg for arg in group.options}
    assert list(declared) == [o.name for o in PYTEST_OPTIONS]
    for o in PYTEST_OPTIONS:
        assert declared[o.name].names() == [o.long], o.name  # pytest's own -r, -n, -v stay pytest's
        assert declared[o.name].attrs()["help"] == (o.pytest_help or o.help), o.name
    assert {o.name for o in TABLE} == {o.name for o in CLI_OPTIONS} | {o.name for o in PYTEST_OPTIONS}


def test_the_selftest_shares_the_tables_entries() -> None:
    selftest = {a.dest: a for a in _subparser("selftest")._actions if a.dest != "help"}
    for name in ("target", "adapter", "profile", "area", "pack"):
        assert tuple(selftest[name].option_strings) == OPTIONS[name].flags and selftest[name].help == OPTIONS[name].help
    assert [o.name for o in _command_options()] == list(selftest)
    assert selftest["workers"].default == 2 and selftest["case_timeout"].default == 30.0


def test_the_pytest_command_line_of_a_run_parses_back_to_the_values_the_run_was_given(tmp_path: Path) -> None:
    args = build_parser().parse_args(["run", "--target", "rabbitmq-local", "--out", str(tmp_path), "--area", "ack", "--area", "nack",
                                      "--exclude-area", "dlx", "--level", "must", "--queue-type", "classic", "--repeat", "3",
                                      "--case-timeout", "12.5", "--keep-history", "--profile", "rabbitmq-3.10", "--workers", "1"])
    argv = pytest_args(args, tmp_path)
    parsed = _pytest_parser().parse_known_args(argv)  # type: ignore[attr-defined]
    for o in PYTEST_OPTIONS:
        if o.cli:
            assert getattr(parsed, o.name) == getattr(args, o.name), o.name
    assert parsed.results_dir == str(tmp_path)


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--repeat", "0", "--repeat must be at least 1"),
        ("--case-timeout", "0", "--case-timeout must be a positive number of seconds"),
        ("--area", "nope", "unknown area 'nope'"),
        ("--profile", "no-such-profile", "unknown profile 'no-such-profile'"),
    ],
)
def test_a_bad_value_is_refused_by_the_one_check_on_the_cli_and_in_a_direct_pytest_run(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str, value: str, message: str) -> None:
    name = option.lstrip("-").replace("-", "_")
    with pytest.raises(UsageError) as refused:
        check({name: [value] if OPTIONS[name].repeatable else OPTIONS[name].type(value)})
    assert message in str(refused.value)
    # conformance run: refused before the results folder is touched
    out = tmp_path / "cli"
    assert main(["run", "--target", "rabbitmq-local", "--out", str(out), option, value]) == EXIT_USAGE
    assert capsys.readouterr().err.strip() == f"conformance: error: {refused.value}"
    assert not out.exists()
    # a direct pytest run with the plugin: the same words, before any node boots
    cases = ROOT / "conformance" / "cases"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "conformance.pytest_plugin", "-p", "no:cacheprovider", "-c", str(cases / "pytest.ini"),
                           "--rootdir", str(cases), str(cases), "--target", "rabbitmq-local", "--results-dir", str(tmp_path / "pytest"),
                           option, value, "-q"], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == pytest.ExitCode.USAGE_ERROR
    assert f"ERROR: {refused.value}" in proc.stderr, proc.stderr[-2000:]


def test_requirement_packs_are_activated_in_one_place_the_option_check() -> None:
    """The packs an option set selects are part of the catalogue it names: loaded where it is checked."""
    import ast

    def calls(path: Path) -> list[str]:
        return [node.func.attr for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name) and node.func.value.id == "packs"
                and node.func.attr in ("activate", "selection")]

    callers = {str(p.relative_to(ROOT)): calls(p) for p in (ROOT / "conformance").rglob("*.py") if calls(p)}
    assert callers == {"conformance/runner/options.py": ["activate", "selection"]}
