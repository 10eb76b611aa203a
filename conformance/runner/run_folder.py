"""A run's results folder (``--out``): checked writable before anything starts, and one run's alone.

CI reruns into a fixed folder (``--out runs/latest``), so a folder that holds a previous run is not
refused: that run's files move into ``previous/<its start time>-<its run id>/`` (a run folder of its
own, readable by ``conformance report`` and ``explain``), and the new run starts on an empty folder.
Appending instead once made a 49-record aborted run and a 105-record run read as 154 records of one.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

from conformance.errors import UsageError
from conformance.runner.results import RESULTS_FILE, RUN_FILE

#: Where the runs a folder held before go (each in a folder of its own).
PREVIOUS = "previous"
#: What a run leaves in its folder, and the report the main job writes beside it: only these move
#: aside, so anything else a user keeps in the folder stays where it is.
RUN_OUTPUTS = (RUN_FILE, RESULTS_FILE, "junit.xml", "pytest.log", "allure-results", "report")


def prepare(out: Path) -> str | None:
    """Make ``out`` ready for a new run. Returns the line that says where a previous run's files
    went, or None when the folder held none; an unusable folder is a :class:`UsageError`."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=out):
            pass
    except OSError as exc:
        raise UsageError(f"--out {out}: cannot write the results there ({exc.strerror or exc})") from None
    if not ((out / RUN_FILE).exists() or (out / RESULTS_FILE).exists()):
        return None
    dest = _previous_dir(out)
    try:
        dest.mkdir(parents=True)
        for name in RUN_OUTPUTS:
            if (out / name).exists():
                (out / name).rename(dest / name)
    except OSError as exc:
        raise UsageError(f"--out {out}: holds a previous run that could not be moved aside ({exc.strerror or exc})") from None
    return f"{out} held a previous run: moved to {dest}; this run starts fresh"


def _previous_dir(out: Path) -> Path:
    """``previous/<start time>-<run id>``: sorted by time, and never over a folder already there."""
    try:
        meta = json.loads((out / RUN_FILE).read_text())
    except (OSError, ValueError):
        meta = {}
    meta = meta if isinstance(meta, dict) else {}
    started = meta.get("started_at") or meta.get("finished_at")
    if not isinstance(started, (int, float)):
        newest = [p.stat().st_mtime for p in (out / RUN_FILE, out / RESULTS_FILE) if p.exists()]
        started = min(newest) if newest else time.time()
    name = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(started)) + (f"-{meta['run_id']}" if str(meta.get("run_id", "")).isalnum() else "")
    dest, n = out / PREVIOUS / name, 1
    while dest.exists():
        n += 1
        dest = out / PREVIOUS / f"{name}-{n}"
    return dest
