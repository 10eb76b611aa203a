"""The README is one page and the manual is a site that builds: `mkdocs build --strict` passes (a broken
link, a missing anchor or a page left out of nav is a warning, and --strict makes any warning fatal),
the README stays short and opens with the two commands, every relative link in the README and the
manual resolves, and every repository path they name exists (a module moved without its docs shows
here, not in a reader's shell)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = [README, *sorted(DOCS.rglob("*.md"))]

#: The README's first lines: its title, then the code block whose two lines are the main job and the
#: tests. .ci/run runs the second; a user copies both.
MAIN_JOB = ("scripts/install.sh && conformance run --out runs/latest; conformance report runs/latest "
            "--out runs/latest/report   # main job")
TESTS = "scripts/install.sh && python3 -m pytest"

#: Top-level folders of the repository: a code span starting with one of them names a path in it.
TOP = ("conformance/", "adapters/", "reports/", "docker/", "scripts/", "tests/", "bench/", "packages/", "docs/", ".ci/")
#: Placeholders in a named path (conformance/cases/<area>/, packages/conformance-NAME/, *.yaml).
PLACEHOLDER = re.compile(r"[<>{}*\[\]]|NAME|\.\.\.")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.DOTALL | re.MULTILINE)


def prose(page: Path) -> str:
    """The page without its fenced code blocks (commands and console output, not links)."""
    return FENCE.sub("", page.read_text())


def anchors(page: Path) -> set[str]:
    """The heading ids MkDocs gives a page (the toc extension's slugify)."""
    from markdown.extensions.toc import slugify

    return {slugify(h.strip().strip("#").strip(), "-") for h in re.findall(r"^#{1,6} .+$", prose(page), re.MULTILINE)}


def test_mkdocs_build_strict(tmp_path: Path) -> None:
    try:
        import mkdocs  # noqa: F401
    except ImportError:
        pytest.fail("mkdocs is not installed: scripts/install.sh installs it (pip install -e '.[docs]')")
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"),
                           "-d", str(tmp_path / "site")], check=False, cwd=ROOT, capture_output=True, text=True, timeout=120)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output
    assert "WARNING" not in output, output
    assert (tmp_path / "site" / "index.html").exists()


def test_readme_is_one_page() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines; the manual belongs in docs/"


def test_readme_opens_with_the_two_commands() -> None:
    lines = README.read_text().splitlines()
    assert lines[2] == "```sh"
    assert lines[3] == MAIN_JOB
    assert lines[4].startswith(TESTS + " ") and lines[5] == "```"
    assert TESTS in (ROOT / ".ci" / "run").read_text(), "CI runs the README's test command"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page: Path) -> None:
    broken = []
    for target in LINK.findall(prose(page)):
        if re.match(r"[a-z]+:", target):
            continue  # https:, mailto:
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading #{anchor} in {dest.relative_to(ROOT)}")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_named_paths_exist(page: Path) -> None:
    missing = []
    for span in re.findall(r"`([^`\n]+)`", prose(page)):
        for word in span.split():
            path = word.strip("(),;:'\"")
            if path.startswith(TOP) and not PLACEHOLDER.search(path) and not (ROOT / path).exists():
                missing.append(path)
    assert not missing, f"{page.relative_to(ROOT)} names paths that do not exist: {sorted(set(missing))}"
