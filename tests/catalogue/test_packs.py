"""Requirement packs (conformance/catalogue/packs.py): a package's own requirements, rules and
cases join the catalogue when selected; a broken pack is one line naming it; a broken pack nobody
selected is never imported.

The packs here are real installed distributions (a ``.dist-info`` with entry points on a temporary
``sys.path`` entry), not monkeypatched discovery: what is tested is what a third party ships."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Iterator

import pytest

from conformance.catalogue import packs
from conformance.errors import UsageError
from tests.conftest import ROOT

RULES = """\
protocol: widget-1
source: {title: Widget protocol 1, url: "https://example.org/widget-1"}
rules:
  - {id: "PING reply", keyword: MUST, area: widget, quote: "A server MUST answer PING with PONG."}
"""

REQUIREMENTS = """\
area: widget
title: Widget frames
requirements:
  - id: WIDGET-PING-PONG
    level: {level}
    rules: {{widget-1: ["PING reply"]}}
    text: A PING is answered by a PONG.
    protocols: [widget-1]
    needs: []
    sources:
      - {{kind: spec, ref: "Widget 1 'PING'", url: "https://example.org/widget-1#PING"}}
"""

CASE = """\
from conformance.kit.case import Case


class TestPingPong(Case):
    requirement = "WIDGET-PING-PONG"
"""


def install_pack(site: Path, dist: str, name: str, module: str, *, level: str = "MUST", broken: bool = False,
                 adapter: str | None = None) -> None:
    """A distribution ``dist`` in ``site`` whose entry point ``name`` in conformance.packs is ``module``
    (``broken``: the module does not exist); ``adapter``: it ships an adapter of that name too."""
    info = site / f"{dist}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    eps = f"[conformance.packs]\n{name} = {module}\n"
    if adapter:
        eps += f"[conformance.adapters]\n{adapter} = conformance.adapters.pika:PikaAdapter\n"
    (info / "entry_points.txt").write_text(eps)
    if broken:
        return
    pkg = site / module
    (pkg / "requirements").mkdir(parents=True)
    (pkg / "rules").mkdir()
    (pkg / "cases").mkdir()
    (pkg / "__init__.py").write_text(textwrap.dedent(f"""\
        from pathlib import Path
        REQUIREMENTS = str(Path(__file__).parent / "requirements")
        RULES = str(Path(__file__).parent / "rules")
        CASES = "{module}.cases"
        PROTOCOLS = ("widget-1",)
        """))
    (pkg / "requirements" / "widget.yaml").write_text(REQUIREMENTS.format(level=level))
    (pkg / "rules" / "widget-1.yaml").write_text(RULES)
    (pkg / "cases" / "__init__.py").write_text("")
    (pkg / "cases" / "test_ping.py").write_text(CASE)


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    d = tmp_path / "site"
    d.mkdir()
    monkeypatch.syspath_prepend(str(d))
    packs.deactivate_all()
    yield d
    packs.deactivate_all()


def test_a_selected_pack_joins_the_catalogue_with_its_rules_and_cases(site: Path) -> None:
    from conformance.cases import all_cases
    from conformance.catalogue.requirements import catalogue

    install_pack(site, "widget-pack", "widget", "widget_pack")
    assert "WIDGET-PING-PONG" not in catalogue()
    packs.activate(packs.selection(["widget"]))
    req = catalogue()["WIDGET-PING-PONG"]
    assert (req.pack, req.area, req.level_for("widget-1"), req.wire_protocols) == ("widget", "widget", "MUST", ("widget-1",))
    assert "TestPingPong" in [c.__name__ for c in all_cases()]
    packs.deactivate_all()
    assert "WIDGET-PING-PONG" not in catalogue()


def test_a_pack_applies_only_to_adapters_of_the_protocol_its_cases_speak(site: Path) -> None:
    from types import SimpleNamespace

    from conformance.catalogue.capabilities import applicability
    from conformance.catalogue.requirements import catalogue

    install_pack(site, "widget-pack", "widget", "widget_pack")
    packs.activate(["widget"])
    req = catalogue()["WIDGET-PING-PONG"]
    amqp = SimpleNamespace(protocol="amqp-0-9-1", name="pika", capabilities=frozenset())
    widget = SimpleNamespace(protocol="widget-1", name="widget", capabilities=frozenset())
    assert "speak widget-1 on the wire" in (applicability(req, amqp, SimpleNamespace(lacks={})) or "")
    assert applicability(req, widget, SimpleNamespace(lacks={})) is None


def test_default_selection_is_the_adapters_distribution_plus_and_minus_pack_options(site: Path) -> None:
    install_pack(site, "widget-pack", "widget", "widget_pack", adapter="widgetmq")
    install_pack(site, "other-pack", "other", "other_pack", broken=True)
    assert packs.selection([], "widgetmq") == ["widget"]
    assert packs.selection([], "pika") == []
    assert packs.selection(["no:widget"], "widgetmq") == []
    assert packs.selection(["other"], "widgetmq") == ["widget", "other"]
    with pytest.raises(UsageError, match=r"unknown requirement pack 'nosuch' \(--pack\); installed: .*widget"):
        packs.selection(["nosuch"])


@pytest.mark.parametrize("how, message", [
    ("broken", "requirement pack 'broken' in conformance.packs: failed to load: ModuleNotFoundError: No module named 'no_such_pack_module'"),
    ("level", "requirement pack 'broken' in conformance.packs: WIDGET-PING-PONG: level SHOULD but its rules give MUST"),
])
def test_a_broken_pack_is_one_line_naming_it(site: Path, how: str, message: str) -> None:
    if how == "broken":
        install_pack(site, "broken-pack", "broken", "no_such_pack_module", broken=True)
    else:
        install_pack(site, "broken-pack", "broken", "broken_pack", level="SHOULD")
    with pytest.raises(UsageError) as err:
        packs.activate(["broken"])
    assert str(err.value).startswith(message) and "\n" not in str(err.value)
    assert packs.active() == []  # nothing half-loaded stays in the catalogue


def _cli(site: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "conformance.cli", *args], cwd=ROOT, env=env, capture_output=True, text=True, check=False, timeout=60)


def test_a_broken_pack_nobody_selected_does_not_stop_a_command_and_a_selected_one_exits_2(site: Path, tmp_path: Path) -> None:
    install_pack(site, "broken-pack", "broken", "no_such_pack_module", broken=True)
    ok = _cli(site, "list", "--json", "--area", "ack")
    assert ok.returncode == 0, ok.stderr
    bad = _cli(site, "list", "--pack", "broken")
    assert bad.returncode == 2
    assert bad.stderr.strip() == ("conformance: error: requirement pack 'broken' in conformance.packs: failed to load: "
                                  "ModuleNotFoundError: No module named 'no_such_pack_module'")
    # a run that selects it stops before anything is launched (nothing listens on port 9), in the same line
    run = _cli(site, "run", "--target", "stomp://127.0.0.1:9/", "--pack", "broken", "--out", str(tmp_path / "run"))
    assert (run.returncode, run.stderr.strip()) == (2, bad.stderr.strip())


def test_mutation_expectations_naming_a_packs_requirements_are_checked_only_with_the_pack(site: Path, tmp_path: Path) -> None:
    """A plugin's mutations are always registered (the proxy runs in a process of its own), but the
    requirements they break may live in a pack the run did not load: out of scope then, checked
    when the pack is loaded."""
    from conformance.nemesis.mutations import _expectations_of

    install_pack(site, "widget-pack", "widget", "widget_pack")
    path = tmp_path / "expectations.yaml"
    path.write_text("schema: conformance.mutation-expectations/1\nmutations:\n  redelivered-cleared:\n"
                    "    pack: widget\n    breaks: [WIDGET-PING-PONG]\n    why: test\n")
    assert _expectations_of(path)["redelivered-cleared"].breaks == ("WIDGET-PING-PONG",)
    packs.activate(["widget"])
    assert _expectations_of(path)["redelivered-cleared"].breaks == ("WIDGET-PING-PONG",)
    path.write_text(path.read_text().replace("[WIDGET-PING-PONG]", "[WIDGET-NO-SUCH]"))
    with pytest.raises(UsageError, match="unknown requirement 'WIDGET-NO-SUCH'"):
        _expectations_of(path)
