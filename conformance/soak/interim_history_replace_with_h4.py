"""INTERIM, TO BE REPLACED: a minimal JSONL history writer with the shared schema's API
(``HistoryWriter(path).record(process, type, f, value) -> index``), used only while
conformance.soak.history (written on another branch) is not in this tree. Delete this file once it is.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any


class HistoryWriter:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._fh = self.path.open("w", encoding="utf-8")
        self._lock = threading.Lock()
        self._next = 0
        self._t0 = time.monotonic_ns()

    def record(self, process: str, type: str, f: str, value: dict[str, Any]) -> int:
        with self._lock:
            index = self._next
            self._next += 1
            line = {"index": index, "time_ns": time.monotonic_ns() - self._t0, "process": process, "type": type, "f": f, "value": value}
            self._fh.write(json.dumps(line, separators=(",", ":")) + "\n")
            return index

    def flush(self) -> None:
        with self._lock:
            self._fh.flush()

    def close(self) -> None:
        with self._lock:
            self._fh.close()
