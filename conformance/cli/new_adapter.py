"""``conformance new-adapter NAME``: a package skeleton for a broker team's own protocol.

It writes what packages/conformance-stomp/ has, empty: a pyproject with the entry points the core
reads, an adapter whose every operation raises Unsupported until implemented (so a half-written
adapter reports "unsupported", never a pass), a profile stub, an empty requirement pack (where the
team's own requirements, the spec rules they quote and their cases go), a test that the installed
entry points resolve (no broker needed: the first thing a new package must get right) and a test
that runs adapter-check against a broker.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from conformance.errors import UsageError

PYPROJECT = '''[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "conformance-{name}"
version = "0.1.0"
description = "{name} adapter and profiles for the broker conformance suite"
requires-python = ">=3.11"
dependencies = ["broker-conformance"]  # and your client library

[project.entry-points."conformance.adapters"]
{name} = "{pkg}.adapter:Adapter"

[project.entry-points."conformance.profiles"]
{name} = "{pkg}:PROFILES_DIR"

# Your own requirements, the spec rules they quote and their cases (the suite's manual, docs/stomp-and-plugins.md "Requirement packs");
# loaded by default with this package's adapter, with --pack {name} otherwise.
[project.entry-points."conformance.packs"]
{name} = "{pkg}.pack"

[tool.setuptools.packages.find]
include = ["{pkg}*"]

[tool.setuptools.package-data]
{pkg} = ["profiles/*.yaml", "pack/requirements/*.yaml", "pack/rules/*.yaml"]
'''

INIT = '''"""{name} plugin for the broker conformance suite (found by the core through entry points only)."""

from pathlib import Path

PROFILES_DIR = str(Path(__file__).parent / "profiles")
'''

ADAPTER = '''"""{name} adapter: map the neutral API (conformance/api.py) onto your client library.

Contract (checked by `conformance adapter-check --adapter {name} --target URL`): every wait bounded
(a missing reply is NoReply(operation, reply, seconds) and the connection is cut), the broker's
refusals as ChannelClosed, lost sockets as ConnectionLost, what the protocol cannot express as
Unsupported (never a silent no-op), sync() a real round trip, cut() a reset without the close handshake.
"""

from __future__ import annotations

from typing import Any

from conformance import api
from conformance.errors import Unsupported


class Connection(api.Connection):
    def __init__(self, url: str, *, timeout: float, name: str | None, op_timeout: float) -> None:
        raise Unsupported("{name}: connect is not implemented yet")

    def session(self) -> api.Session:
        raise Unsupported("not implemented yet")

    def close(self) -> None:
        raise Unsupported("not implemented yet")

    def cut(self) -> None:
        raise Unsupported("not implemented yet")

    @property
    def is_open(self) -> bool:
        return False


class Adapter(api.Adapter):
    name = "{name}"
    protocol = "{name}"  # the protocol name your records and profiles carry
    schemes = ("{name}",)
    #: The target of a run that names none: a launcher name your package registers under
    #: conformance.targets (or a URL). None: `conformance run --adapter {name}` asks for --target.
    default_target = None
    #: What your protocol can express: names from conformance/catalogue/data/capabilities.yaml (start small).
    capabilities = frozenset({{"ack.individual", "abrupt-disconnect"}})

    def connect(self, url: str, *, timeout: float = 10.0, name: str | None = None, op_timeout: float | None = None) -> Any:
        return Connection(url, timeout=timeout, name=name, op_timeout=op_timeout or 10.0)
'''

PROFILE = '''id: {name}-1
title: "Your broker over {name} (fill in versions, queue types and documented choices, each with its source)"
checked: "not run yet"
match:
  product: YourBroker
  versions: "*"
  protocols: [{name}]
queue_types:
  classic:
    declare: {{durable: true, arguments: {{}}}}
    source: "where your broker documents how a queue is created"
'''

PACK_INIT = '''"""The {name} requirement pack (the suite's docs/stomp-and-plugins.md, "Requirement packs"): requirements of your protocol's
specification that the shared catalogue does not have, with the cases that check them."""

from pathlib import Path

_HERE = Path(__file__).parent
REQUIREMENTS = str(_HERE / "requirements")
RULES = str(_HERE / "rules")
CASES = "{pkg}.pack.cases"
#: The protocols the pack's cases speak on the wire themselves (only adapters of these run them).
PROTOCOLS = ("{name}",)
'''

PACK_RULES = '''# The normative statements of your protocol's specification, word for word; the keyword gives the
# level of every requirement citing the rule. Example:
#   - {{id: "PING reply", keyword: MUST, area: {name}, quote: "A server MUST answer PING with PONG."}}
protocol: {name}
source:
  title: "the {name} protocol specification"
  url: "https://example.org/your-specification"
rules: []
'''

PACK_REQUIREMENTS = '''# Your requirements: the schema of conformance/catalogue/data/requirements/*.yaml. Example:
#   - id: {upper}-PING-PONG
#     level: MUST                      # the keyword of its first rule
#     rules: {{{name}: ["PING reply"]}}
#     text: A PING is answered by a PONG.
#     protocols: [{name}]
#     needs: []                        # capabilities from conformance/catalogue/data/capabilities.yaml
#     sources:
#       - {{kind: spec, ref: "{name} 'PING'", url: "https://example.org/your-specification#PING"}}
# and a case in pack/cases/test_*.py: class TestPingPong(Case) with requirement = "{upper}-PING-PONG".
area: {name}
title: "{name} protocol"
requirements: []
'''

ENTRY_POINTS_TEST = '''"""The installed package's entry points resolve (no broker needed): what `pip install -e .` must
give before anything else works."""

from importlib.metadata import entry_points

from conformance.catalogue import packs
from conformance.api import adapter_for
from conformance.catalogue.profiles import bundled_profiles


def test_the_adapter_is_found_by_name_and_scheme() -> None:
    assert "{name}" in {{ep.name for ep in entry_points(group="conformance.adapters")}}
    chosen = adapter_for("{name}", "{name}")  # validates the declared capabilities too
    assert chosen.protocol == "{name}" and "{name}" in chosen.schemes


def test_the_profiles_load() -> None:
    assert "{name}-1" in {{p.id for p in bundled_profiles()}}


def test_the_requirement_pack_loads_with_the_adapter() -> None:
    assert packs.selection([], "{name}") == ["{name}"]
    packs.activate(["{name}"])
'''

TEST = '''"""Run the adapter kit's contract check against a broker (set {env} to its URL)."""

import os

import pytest

from conformance.cli.adapter_check import check
from {pkg}.adapter import Adapter


@pytest.mark.skipif(not os.environ.get("{env}"), reason="set {env} to a broker URL")
def test_adapter_keeps_the_neutral_api_contract() -> None:
    broken = [r.line() for r in check(Adapter(), os.environ["{env}"]) if r.outcome == "broken"]
    assert broken == []
'''


def write_skeleton(name: str, where: Path) -> Path:
    """The package directory written under ``where``; refuses a bad name or an existing directory."""
    if not re.fullmatch(r"[a-z][a-z0-9]*(-[a-z0-9]+)*", name):
        raise UsageError(f"adapter name {name!r}: use lower-case letters, digits and dashes (e.g. inhouse)")
    root = where / f"conformance-{name}"
    if root.exists():
        raise UsageError(f"{root} exists already")
    pkg = f"conformance_{name.replace('-', '_')}"
    env = f"CONFORMANCE_{name.replace('-', '_').upper()}_URL"
    files = {
        "pyproject.toml": PYPROJECT, f"{pkg}/__init__.py": INIT, f"{pkg}/adapter.py": ADAPTER,
        f"{pkg}/profiles/{name}-1.yaml": PROFILE, "tests/test_adapter_check.py": TEST,
        "tests/test_entry_points.py": ENTRY_POINTS_TEST, f"{pkg}/pack/__init__.py": PACK_INIT,
        f"{pkg}/pack/rules/{name}.yaml": PACK_RULES, f"{pkg}/pack/requirements/{name}.yaml": PACK_REQUIREMENTS,
        f"{pkg}/pack/cases/__init__.py": "",
    }
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text.format(name=name, pkg=pkg, env=env, upper=name.upper()))
    return root


# -- the command: ``conformance new-adapter`` ----------------------------------------------------------

def add_parser(sub: Any) -> None:
    na = sub.add_parser("new-adapter", help="write a package skeleton for an adapter of your own (pyproject, adapter stub, profile stub, test)")
    na.add_argument("name", help="adapter and protocol name, e.g. inhouse")
    na.add_argument("--dir", type=Path, default=Path("packages"), help="where to write it (default: packages/)")
    na.set_defaults(func=command)


def command(args: Any) -> int:
    from conformance.cli.exit_codes import EXIT_OK

    root = write_skeleton(args.name, args.dir)
    print(f"wrote {root}: pip install -e {root}, implement adapter.py, then conformance adapter-check --adapter {args.name} --target URL")
    return EXIT_OK
