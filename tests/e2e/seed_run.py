"""One seed server's whole catalogue, the way a user runs it: ``conformance run --target
process:<definition>`` with the binary in the definition's environment variable, default workers, an
existing --out folder; compared cell by cell with its reviewed expectation file (tests/e2e/expected/).
A changed verdict fails and names the cell; a server that is absent skips with one line."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from conformance.runner.results import read_results, read_run
from tests.conftest import conformance_cmd
from tests.e2e.seed_brokers import EXPECTED, differences, load

#: The run's own limit; pytest's (the callers' timeout mark) is a minute above it.
RUN_LIMIT_S = 600


def catalogue_matches_its_expectation(name: str, tmp_path: Path) -> None:
    expected = load(EXPECTED / f"{name}.yaml")
    binary = expected.binary_path()
    if binary is None:
        pytest.skip(f"{expected.product} {expected.version} absent: set ${expected.env} or keep {expected.binary} beside the checkout")
    out = tmp_path / "run"
    out.mkdir()  # an existing --out folder, as users have
    env = {**os.environ, expected.env: str(binary)}
    proc = subprocess.run(conformance_cmd("run", "--target", expected.target, "--adapter", expected.adapter, "--out", str(out)),
                          check=False, capture_output=True, text=True, timeout=RUN_LIMIT_S, env=env, cwd=tmp_path)
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-3000:]
    run = read_run(out)
    assert (run["product"], run["version"]) == (expected.product, expected.version), (
        f"${expected.env}={binary} is {run['product']} {run['version']}, not {expected.product} {expected.version}")
    records = list(read_results(out))
    changed = differences(expected, records)
    assert not changed, f"{len(changed)} cell(s) of {expected.path.name} changed:\n" + "\n".join(changed)
