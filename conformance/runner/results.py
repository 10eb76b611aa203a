"""Machine-readable run results: ``run.json`` (metadata) and ``results.jsonl`` (one line per case).

Lines are appended with a single ``write`` on an O_APPEND descriptor the moment a case is decided,
so parallel workers never interleave and a killed run keeps every decided case.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterator

from conformance.errors import UsageError
from conformance.secrets import dumps

RUN_SCHEMA = "conformance.run/1"
RESULT_SCHEMA = "conformance.result/1"
RESULTS_FILE = "results.jsonl"
RUN_FILE = "run.json"


class ResultsWriter:
    def __init__(self, out_dir: Path) -> None:
        self.dir = Path(out_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.results_path = self.dir / RESULTS_FILE

    def append(self, record: dict[str, Any]) -> None:
        line = (dumps({"schema": RESULT_SCHEMA, **record}, sort_keys=True) + "\n").encode()
        fd = os.open(self.results_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)

    def write_run(self, meta: dict[str, Any]) -> None:
        tmp = self.dir / (RUN_FILE + ".tmp")
        tmp.write_text(dumps({"schema": RUN_SCHEMA, **meta}, indent=2, sort_keys=True) + "\n")
        tmp.replace(self.dir / RUN_FILE)


def read_results(out_dir: Path) -> Iterator[dict[str, Any]]:
    path = Path(out_dir) / RESULTS_FILE
    if not path.exists():
        return
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UsageError(f"{path}:{n}: malformed result line: {exc.msg}") from exc
        if rec.get("schema") != RESULT_SCHEMA:
            raise UsageError(f"{path}:{n}: unknown result schema {rec.get('schema')!r}")
        yield rec


def read_run(out_dir: Path) -> dict[str, Any]:
    path = Path(out_dir) / RUN_FILE
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path}: malformed run metadata: {exc.msg}") from exc
