"""The module import graph: no cycle, the core names no adapter, the CLI sits on top.

The graph covers conformance/, adapters/, reports/ and the STOMP package, and counts every import
statement wherever it stands: inside a function (a lazy import still ties the two modules: each
needs the other to work) and under ``if TYPE_CHECKING`` (the same dependency a reader follows).
Importing ``a.b.c`` also runs the packages ``a`` and ``a.b`` that are not the importer's own, so
those are edges too (``conformance.pytest_plugin``'s ``__init__`` imports every hook module).
A cycle is broken by moving what both modules need into the module it belongs to (a leaf both
read), never by hiding an import.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

#: Top-level package name -> its folder.
TREES = {
    "conformance": ROOT / "conformance",
    "adapters": ROOT / "adapters",
    "reports": ROOT / "reports",
    "conformance_stomp": ROOT / "packages" / "conformance-stomp" / "conformance_stomp",
}
#: What the core must not import: the built-in and plugin adapters (they load through entry points,
#: pyproject.toml) and the client libraries and codecs they wrap.
NOT_IN_CORE = ("adapters", "conformance_stomp", "pika", "proton", "_proton", "cproton", "pamqp", "stomp")
#: The folders of the core, each a test of its own below.
CORE_PARTS = ("", "catalogue", "kit", "nemesis", "runner", "pytest_plugin", "cli", "cases", "soak")


def modules(trees: dict[str, Path]) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` under the trees (a package by its ``__init__``)."""
    out = {}
    for top, base in trees.items():
        for path in sorted(base.rglob("*.py")):
            parts = (top, *path.relative_to(base).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = path
    return out


def _ancestors(name: str) -> set[str]:
    parts = name.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts))}


def imported_names(path: Path, name: str) -> list[tuple[str, str | None]]:
    """Every import in the file, as (module, imported name or None), relative ones resolved."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: list[tuple[str, str | None]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(a.name, None) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([module] if module else []))
            out += [(module, a.name) for a in node.names]
    return out


def graph(trees: dict[str, Path] = TREES) -> dict[str, set[str]]:
    """Module -> the modules of the trees that importing it runs (directly)."""
    mods = modules(trees)
    edges: dict[str, set[str]] = {}
    for name, path in mods.items():
        own = _ancestors(name) | ({name} if path.name == "__init__.py" else set())
        targets: set[str] = set()
        for module, attr in imported_names(path, name):
            sub = f"{module}.{attr}" if attr else None
            reached = {sub} if sub in mods else {module}
            if sub in mods and module not in own:
                reached.add(module)  # ``from pkg import mod`` runs pkg's __init__ too
            for m in reached:
                targets |= {a for a in _ancestors(m) | {m} if a in mods and a not in own and a != name}
        edges[name] = targets
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each as one cycle through
    all its members where there is one, else as its sorted members."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(edges) + 100))
    try:
        for v in sorted(edges):
            if v not in index:
                visit(v)
    finally:
        sys.setrecursionlimit(limit)
    return found


def describe(component: list[str], edges: dict[str, set[str]]) -> str:
    """One line: the shortest way from the component's first module back to itself (there is one:
    every member of a strongly connected component reaches every other)."""
    members = set(component)
    start = component[0]
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for v in frontier:
            for w in sorted(edges[v] & members):
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return " -> ".join([*reversed(path), start])
                if w not in came_from:
                    came_from[w] = v
                    following.append(w)
        frontier = following
    return "cycle among " + ", ".join(component)


@pytest.fixture(scope="module")
def import_graph() -> dict[str, set[str]]:
    return graph()


# --- no cycle -------------------------------------------------------------------------------------

PARTS = [f"conformance.{p}" if p else "conformance" for p in CORE_PARTS] + ["adapters", "reports", "conformance_stomp"]


@pytest.mark.parametrize("part", PARTS)
def test_no_import_cycle_runs_through_a_module_of(part: str, import_graph: dict[str, set[str]]) -> None:
    """``conformance`` alone: the modules at the core's root (api, targets, errors, ...)."""

    def inside(module: str) -> bool:
        if part == "conformance":
            return module == "conformance" or (module.startswith("conformance.") and module.count(".") == 1
                                               and module not in PARTS)
        return module == part or module.startswith(part + ".")

    found = [describe(c, import_graph) for c in cycles(import_graph) if any(map(inside, c))]
    assert not found, "import cycles:\n" + "\n".join(found)


def test_the_graph_sees_lazy_relative_and_package_imports(tmp_path: Path) -> None:
    """The check finds the cycles it is for: a lazy import in a function, a relative import, and a
    package ``__init__`` that imports the module importing a sibling of it; not a sibling import
    inside one package (its ``__init__`` already runs)."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from pkg import b\n")
    (pkg / "b.py").write_text("from . import a\n")
    (pkg / "sub" / "__init__.py").write_text("from pkg.sub.hooks import hook\n")
    (pkg / "sub" / "hooks.py").write_text("from pkg.sub.util import x\n")
    (pkg / "sub" / "util.py").write_text("x = 1\n")
    (pkg / "sub" / "other.py").write_text("y = 2\n")
    (pkg / "c.py").write_text("from pkg.sub.other import y\n")
    (pkg / "d.py").write_text("import pkg.sub.util\n")
    (pkg / "sub" / "back.py").write_text("from pkg import d\n")
    edges = graph({"pkg": pkg})
    assert edges["pkg.b"] == {"pkg.a"}
    assert "pkg.sub" in edges["pkg.c"] and "pkg.sub" not in edges["pkg.sub.hooks"]
    assert edges["pkg.sub.back"] == {"pkg.d"} and edges["pkg.d"] == {"pkg.sub", "pkg.sub.util"}
    assert [describe(c, edges) for c in cycles(edges)] == ["pkg.a -> pkg.b -> pkg.a"]
    (pkg / "sub" / "util.py").write_text("from pkg import c\n")
    edges = graph({"pkg": pkg})
    assert [describe(c, edges) for c in cycles(edges)] == [
        "pkg.a -> pkg.b -> pkg.a", "pkg.c -> pkg.sub -> pkg.sub.hooks -> pkg.sub.util -> pkg.c"]


# --- the core names no adapter --------------------------------------------------------------------

@pytest.mark.parametrize("part", CORE_PARTS)
def test_the_core_imports_no_adapter_client_library_or_codec(part: str) -> None:
    """conformance/ loads the built-in adapters, codecs, mutations and profiles through entry points
    (pyproject.toml), as it loads a plugin package's. conformance/cli/new_adapter.py's code
    templates name them in strings, which are no import."""
    base = TREES["conformance"]
    files = sorted(base.glob("*.py")) if not part else sorted((base / part).rglob("*.py"))
    named = {name: path for name, path in modules({"conformance": base}).items() if path in set(files)}
    assert named
    bad = [f"{name} imports {module}" for name, path in named.items() for module, _ in imported_names(path, name)
           if module.split(".")[0] in NOT_IN_CORE]
    assert not bad, "\n".join(bad)


def test_the_catalogue_imports_no_nemesis() -> None:
    """What is required does not depend on what breaks things: a case's fault kinds ask the target
    (conformance.nemesis.kinds.fault_applicability), its requirement asks the adapter
    (conformance.catalogue.capabilities.applicability), and the runner asks both."""
    base = TREES["conformance"]
    named = {name: path for name, path in modules({"conformance": base}).items() if path.is_relative_to(base / "catalogue")}
    bad = [f"{name} imports {module}" for name, path in named.items() for module, _ in imported_names(path, name)
           if module == "conformance.nemesis" or module.startswith("conformance.nemesis.")]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("tree,folder", [("conformance", "kit"), ("conformance", "cases"), ("adapters", ""), ("conformance_stomp", "")])
def test_cases_adapters_and_launchers_import_nothing_from_the_runner(tree: str, folder: str) -> None:
    """The case kit, the cases and every plugin see the plugin API at conformance/'s root and the kit,
    never the runner that drives them (the in-flight marker and the supervisor are root modules)."""
    base = TREES[tree] / folder if folder else TREES[tree]
    named = {name: path for name, path in modules({tree: TREES[tree]}).items() if path.is_relative_to(base)}
    bad = [f"{name} imports {module}" for name, path in named.items() for module, _ in imported_names(path, name)
           if module == "conformance.runner" or module.startswith("conformance.runner.")]
    assert not bad, "\n".join(bad)


# --- the runner runs without pytest ---------------------------------------------------------------

#: What only the pytest plugin may import: pytest and its machinery (a runner module takes plain values).
PYTEST_ONLY = ("pytest", "_pytest", "xdist", "pluggy", "pytest_timeout")


def test_no_runner_module_imports_pytest() -> None:
    """conformance/runner/ is a run without pytest in it: pytest's objects (config, items, reports,
    stash, marks, outcomes) stay in conformance/pytest_plugin/, which hands the runner plain values.
    Every import counts, a lazy one inside a function included."""
    base = TREES["conformance"]
    named = {name: path for name, path in modules({"conformance": base}).items() if path.is_relative_to(base / "runner")}
    assert "conformance.runner.case_runner" in named and "conformance.runner.lifecycle" in named
    bad = [f"{name} imports {module}" for name, path in named.items() for module, _ in imported_names(path, name)
           if module.split(".")[0] in PYTEST_ONLY]
    assert not bad, "\n".join(bad)


def test_the_pytest_check_sees_a_lazy_import(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("def f():\n    from _pytest.config import create_terminal_writer\n")
    assert [m for m, _ in imported_names(tmp_path / "m.py", "m")] == ["_pytest.config"]


# --- the CLI sits on top --------------------------------------------------------------------------

CLI_COMMANDS = sorted(p.stem for p in (TREES["conformance"] / "cli").glob("*.py") if p.stem not in ("__init__", "__main__"))


@pytest.mark.parametrize("module", CLI_COMMANDS)
def test_the_cli_is_imported_by_none_of_the_command_modules_it_drives(module: str) -> None:
    """conformance.cli (main and the parser) imports each command module; a command module takes
    what it shares with another from that module, never from conformance.cli."""
    mods = modules({"conformance": TREES["conformance"]})
    name = f"conformance.cli.{module}"
    back = [(m, attr) for m, attr in imported_names(mods[name], name)
            if (m == "conformance.cli" and f"conformance.cli.{attr}" not in mods) or (m == "conformance" and attr == "cli")]
    assert not back, f"{name} imports {back} from conformance.cli"


def test_nothing_outside_the_cli_imports_it(import_graph: dict[str, set[str]]) -> None:
    users = sorted(m for m, targets in import_graph.items()
                   if not (m == "conformance.cli" or m.startswith("conformance.cli."))
                   and any(t == "conformance.cli" or t.startswith("conformance.cli.") for t in targets))
    assert not users, f"modules the CLI drives import it: {users}"


def test_the_run_command_and_the_selftest_share_the_runner_s_pytest_command_line() -> None:
    from conformance import cli
    from conformance.cli import run, selftest  # noqa: F401 - importable on their own, in any order
    from conformance.runner import pytest_argv

    assert cli.pytest_args is run.pytest_args is pytest_argv.pytest_args
    engine = TREES["conformance"] / "runner" / "selftest" / "runs.py"
    assert ("conformance.runner.pytest_argv", "pytest_args") in imported_names(engine, "conformance.runner.selftest.runs")


# --- what the plugin and the cases import ---------------------------------------------------------

def test_the_plugin_module_still_holds_every_hook_and_fixture_pytest_must_find() -> None:
    """``-p conformance.pytest_plugin`` is the one plugin: pytest registers what its namespace holds."""
    from conformance import pytest_plugin

    hooks = {n for n in dir(pytest_plugin) if n.startswith("pytest_")}
    assert hooks == {
        "pytest_addoption", "pytest_collection_modifyitems", "pytest_configure", "pytest_configure_node",
        "pytest_generate_tests", "pytest_internalerror", "pytest_keyboard_interrupt", "pytest_runtest_makereport",
        "pytest_sessionfinish", "pytest_sessionstart", "pytest_timeout_set_timer", "pytest_unconfigure",
    }
    for fixture in ("conformance_case", "conformance_attempt", "queue_type", "variant"):
        assert hasattr(pytest_plugin, fixture), fixture


def test_cases_import_the_case_and_its_context_from_conformance_kit_case() -> None:
    from conformance.kit.case import WAIT_S, Case, CaseContext, Obs, ScenarioVoid, Settled, delivery_obs, sentinel_body  # noqa: F401

    assert all(hasattr(CaseContext, m) for m in ("connect", "proxy", "queue", "drain", "restart_broker", "absorb", "close"))
