"""The guide's flow (docs/stomp-and-plugins.md, "Adding your broker"): `conformance new-adapter NAME`, install, the
skeleton's own tests pass. The install is what `pip install -e` leaves for an editable package (the
package folder on sys.path, a .dist-info carrying the pyproject's entry points), written directly:
pip's isolated build fetches setuptools for 1-2 minutes, which proves nothing about the skeleton."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

from tests.conftest import ROOT


def install_editable(root: Path, site: Path) -> None:
    meta = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    info = site / f"{meta['name'].replace('-', '_')}-{meta['version']}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {meta['name']}\nVersion: {meta['version']}\n")
    (info / "entry_points.txt").write_text("".join(
        f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in eps.items()) for group, eps in meta["entry-points"].items()))


def test_new_adapter_then_install_then_the_skeletons_own_tests_pass(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    made = subprocess.run([sys.executable, "-m", "conformance.cli", "new-adapter", "inhouse", "--dir", str(tmp_path)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, check=False, timeout=60)
    assert made.returncode == 0, made.stderr
    root = tmp_path / "conformance-inhouse"
    meta = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    assert set(meta["entry-points"]) == {"conformance.adapters", "conformance.profiles", "conformance.packs"}
    site = tmp_path / "site"
    install_editable(root, site)
    env["PYTHONPATH"] = os.pathsep.join([str(root), str(site), str(ROOT)])
    env.pop("CONFORMANCE_INHOUSE_URL", None)
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # the skeleton's tests need no plugin: seconds saved on a busy machine
    tests = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", str(root / "tests")],
                           cwd=root, env=env, capture_output=True, text=True, check=False, timeout=120)
    assert tests.returncode == 0, tests.stdout[-3000:]
    assert "3 passed, 1 skipped" in tests.stdout, tests.stdout[-2000:]  # skipped: adapter-check without a broker URL
