"""The options of a catalogue run, declared once, and their one check.

``conformance run`` (argparse, conformance.cli.run), the options ``conformance selftest`` shares with
it (conformance.cli.selftest) and the pytest options of a run (conformance.pytest_plugin.options) are
all generated from :data:`TABLE`; the pytest command line a run starts is built from it too. Every
path checks the values with :func:`check`, before anything is launched: bad input costs no node boot.

:func:`check` is also the one place that activates requirement packs: a pack's requirement ids and
areas are part of the catalogue the options name, so they must be loaded before the selection is
checked, and nothing else needs them earlier.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from conformance.catalogue.requirements import LEVELS
from conformance.errors import UsageError

if TYPE_CHECKING:
    from conformance.catalogue.packs import Pack


@dataclass(frozen=True)
class Option:
    """One option: its declaration for argparse and pytest, and the bounds :func:`check` enforces."""

    name: str  # the attribute it lands in (argparse's dest, pytest's getoption name)
    flags: tuple[str, ...]  # the long flag first; pytest gets only that one (-r, -n, -v are pytest's own)
    help: str
    type: Callable[[str], Any] = str
    repeatable: bool = False
    default: Any = None
    choices: tuple[str, ...] = ()
    switch: bool = False  # present or not (store_true)
    cli: bool = True  # ``conformance run`` declares it
    pytest: bool = True  # the pytest plugin declares it, and a run passes it on
    narrows: bool = False  # a selection filter: with none set, the run is the whole catalogue
    at_least: int | None = None
    positive: str | None = None  # a positive number of this unit
    pytest_help: str | None = None  # where a direct pytest run reads the option otherwise

    @property
    def long(self) -> str:
        return self.flags[0]

    def but(self, **changes: Any) -> Option:
        """The same option with another default or help (``conformance selftest``'s variants)."""
        return dataclasses.replace(self, **changes)


#: Every option of a run, in ``conformance run --help`` order, then the ones only pytest receives.
TABLE: tuple[Option, ...] = (
    Option("target", ("--target",),
           "broker URL (amqp://user:pass@host/vhost), env:NAME (the URL from environment variable NAME, kept out of ps) or launcher "
           "name (default: the --adapter's own default target; without --adapter: rabbitmq-local, a private node)",
           pytest_help="broker URL (amqp://user:pass@host:port/vhost) or a launcher name (e.g. rabbitmq-local)"),
    Option("adapter", ("--adapter",), "adapter plugin (default: the one speaking the URL's scheme; its protocol also picks the mutations)"),
    Option("profile", ("--profile",), "profile id or YAML file (default: chosen from the server's product and version)"),
    Option("out", ("--out",), "results folder (default: runs/<timestamp>)", type=Path, pytest=False),
    Option("area", ("--area",), "only this area (repeatable)", repeatable=True, narrows=True),
    Option("pack", ("--pack",), "also load this requirement pack; no:NAME leaves out one the adapter's package ships "
           "(repeatable; see docs/stomp-and-plugins.md 'Requirement packs')", repeatable=True),
    Option("requirement", ("--requirement", "-r"), "only this requirement id (repeatable)", repeatable=True, narrows=True),
    Option("exclude_area", ("--exclude-area",), "leave out this area (repeatable)", repeatable=True, narrows=True),
    Option("level", ("--level",), "only requirements of this level (repeatable)", type=str.upper, repeatable=True, choices=tuple(LEVELS),
           narrows=True),
    Option("queue_type", ("--queue-type",), "only cases of this queue type, as the profile names them (repeatable)", repeatable=True,
           narrows=True),
    Option("repeat", ("--repeat",), "run every selected case N times: each repetition its own record, a pass rate per case",
           type=int, default=1, at_least=1),
    Option("workers", ("--workers", "-n"), "parallel worker processes (default: cores + 1, at most 4, for the whole catalogue on 2+ "
           "cores, measured fastest by bench/catalogue.py; else 1)", type=int, at_least=1, pytest=False),
    Option("case_timeout", ("--case-timeout",), "deadline per case in seconds (default 60)", type=float, default=60.0, positive="seconds"),
    Option("keep_history", ("--keep-history",), "keep the operation history of passing cases too", switch=True),
    Option("verbose", ("--verbose", "-v"), "one plain line per decided case instead of the live progress bar", switch=True, pytest=False),
    Option("debug", ("--debug",), "pytest's own console too: its reports and the runner's tracebacks (kept in results.jsonl either way)",
           switch=True, pytest=False),
    Option("mutation", ("--mutation",), "make the target faulty on purpose: run through a proxy applying this protocol mutation "
           "(see conformance selftest --list)", narrows=True),
    # what the runner is told by the command that starts it
    Option("target_env", ("--target-env",), "name of an environment variable holding the target URL (keeps a password out of the "
           "process list)", cli=False),
    Option("results_dir", ("--results-dir",), "folder for run.json and results.jsonl", cli=False),
    Option("disruptive", ("--disruptive",), "cases that restart or kill the broker: run them too (default), leave them out, or run only them",
           choices=("include", "exclude", "only"), default="include", cli=False),
    Option("attach_target", ("--attach-target",), "JSON handle of a target launched by another process (conformance selftest); it is "
           "neither started nor stopped", cli=False),
)

OPTIONS: dict[str, Option] = {o.name: o for o in TABLE}
#: What ``conformance run`` declares, and what the pytest plugin declares.
CLI_OPTIONS = tuple(o for o in TABLE if o.cli)
PYTEST_OPTIONS = tuple(o for o in TABLE if o.pytest)
#: Selection filters of ``conformance run``: with none of them set, the run is the whole catalogue.
FILTERS = tuple(o.name for o in TABLE if o.narrows)


def declare(add: Callable[..., Any], options: Iterable[Option], *, for_pytest: bool = False) -> None:
    """Declare ``options`` through ``add``: an argparse parser's ``add_argument`` or a pytest
    option group's ``addoption`` (the same keywords)."""
    for o in options:
        kw: dict[str, Any] = {"help": o.pytest_help or o.help} if for_pytest else {"help": o.help}
        if o.switch:
            kw["action"] = "store_true"
        else:
            if o.repeatable:
                kw["action"] = "append"
            if o.type is not str:
                kw["type"] = o.type
            if o.choices:
                kw["choices"] = list(o.choices)
            if o.default is not None:
                kw["default"] = o.default
        add(*(o.flags[:1] if for_pytest else o.flags), **kw)


def argv(values: Mapping[str, Any], options: Iterable[Option] = PYTEST_OPTIONS) -> list[str]:
    """The command line that hands ``values`` to pytest. A value equal to the table's default is left
    out: pytest's option has that default from the same entry."""
    out: list[str] = []
    for o in options:
        value = values.get(o.name)
        if o.switch:
            out += [o.long] if value else []
        elif o.repeatable:
            for v in value or []:
                out += [o.long, str(v)]
        elif value not in (None, "") and value != o.default:
            out += [o.long, str(value)]
    return out


def _listed(value: Any) -> list[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


def check(values: Mapping[str, Any], adapter: str | None = None, options: Iterable[Option] = TABLE) -> list[Pack]:
    """Refuse bad option values, one line each (UsageError); return the requirement packs they select.

    ``values`` maps option names to values (argparse's namespace, or what pytest parsed); options
    absent from it are not checked. ``adapter`` is the adapter's entry-point name once the target's
    adapter is known (it may ship packs of its own); before that, ``--adapter`` if given."""
    from conformance.catalogue import packs
    from conformance.catalogue.profiles import check_profile_option
    from conformance.catalogue.requirements import check_selection
    from conformance.nemesis.mutations import alters, make

    loaded = packs.activate(packs.selection(values.get("pack") or [], adapter or values.get("adapter")))
    check_selection(values.get("requirement") or [], _listed(values.get("area")) + (values.get("exclude_area") or []))
    for o in options:
        for v in _listed(values.get(o.name)):
            if o.choices and (o.type(v) if isinstance(v, str) else v) not in o.choices:
                raise UsageError(f"unknown {o.long.lstrip('-').replace('-', ' ')} {v!r}: one of {', '.join(o.choices)}")
            if o.at_least is not None and v < o.at_least:
                raise UsageError(f"{o.long} must be at least {o.at_least}")
            if o.positive and not v > 0:
                raise UsageError(f"{o.long} must be a positive number of {o.positive}")
    check_profile_option(values.get("profile"))
    for mutation in _listed(values.get("mutation")):
        if alters(mutation):
            make(mutation)  # an unknown name is a usage error here, not a dead proxy process
    return loaded
