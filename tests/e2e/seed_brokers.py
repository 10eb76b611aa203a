"""The seed brokers' reviewed expectations: one YAML file per broker version in tests/e2e/expected/.

Each file names the server (the build in ../shared/brokers beside the checkout, or the binary an
environment variable points at), the target definition and adapter the run uses, and one line per
cell of the catalogue: ``REQUIREMENT [queue-type variant]: verdict``. Every fail and deviation carries
``why``, one line saying what the review decided (docs/findings/<product>-<version>.md has the
evidence); an unsupported cell names its kind. A run that differs from the file in any cell fails
the test and names the cell, so a changed verdict is reviewed, never absorbed.

    python3 -m tests.e2e.seed_brokers write lavinmq-2.9.1 RUN_DIR   # rewrite the cells from a run,
                                                                    # keeping every why still true
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conformance import yamlio

ROOT = Path(__file__).resolve().parents[2]
EXPECTED = Path(__file__).resolve().parent / "expected"
VERDICTS = ("pass", "fail", "deviation", "unsupported", "error", "blocked")
#: A verdict whose cell must say why the review let it stand.
EXPLAINED = ("fail", "deviation")
UNREVIEWED = "UNREVIEWED"


@dataclass(frozen=True)
class Expectation:
    name: str
    path: Path
    product: str
    version: str
    target: str
    adapter: str
    env: str
    binary: str
    #: cell -> {"verdict": ..., "why": ..., "kind": ...}
    cells: dict[str, dict[str, str]]

    def binary_path(self) -> Path | None:
        """The server to run: ``$env`` when set to a file, else the build beside the checkout."""
        given = os.environ.get(self.env)
        if given:
            return Path(given) if Path(given).is_file() else None
        path = (ROOT / self.binary).resolve()
        return path if path.is_file() else None


def cell_of(record: dict[str, Any]) -> str:
    """``REQUIREMENT [classic nack]``: the requirement and its configuration (queue type, variant)."""
    config = " ".join(str(x) for x in (record.get("queue_type"), record.get("variant")) if x) or "-"
    return f"{record['requirement']} [{config}]"


def _cell_value(raw: Any, where: str) -> dict[str, str]:
    value = {"verdict": raw} if isinstance(raw, str) else raw
    if not isinstance(value, dict) or value.get("verdict") not in VERDICTS or any(k not in ("verdict", "why", "kind") for k in value):
        raise ValueError(f"{where}: expected a verdict ({', '.join(VERDICTS)}) or a mapping of verdict, why, kind")
    if value["verdict"] in EXPLAINED and not str(value.get("why", "")).strip():
        raise ValueError(f"{where}: a {value['verdict']} needs a one-line why (what the review decided)")
    if UNREVIEWED in str(value.get("why", "")):
        raise ValueError(f"{where}: not reviewed yet ({value['why']})")
    if value["verdict"] == "unsupported" and not value.get("kind"):
        raise ValueError(f"{where}: an unsupported cell names its kind (cannot-express, refused, no-fault)")
    return {k: " ".join(str(v).split()) for k, v in value.items()}


def load(path: Path) -> Expectation:
    data = yamlio.safe_load(path.read_text())
    where = str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)
    for key in ("product", "version", "target", "adapter", "binary", "env", "cells"):
        if not data.get(key):
            raise ValueError(f"{where}: missing {key!r}")
    cells = {str(k): _cell_value(v, f"{where}: {k}") for k, v in data["cells"].items()}
    return Expectation(name=path.stem, path=path, product=str(data["product"]), version=str(data["version"]),
                       target=str(data["target"]), adapter=str(data["adapter"]), env=str(data["env"]),
                       binary=str(data["binary"]), cells=cells)


def every() -> list[Expectation]:
    return [load(p) for p in sorted(EXPECTED.glob("*.yaml"))]


def observed(records: list[dict[str, Any]]) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for r in records:
        cell = {"verdict": r["verdict"]}
        if r["verdict"] == "unsupported" and r.get("unsupported_kind"):
            cell["kind"] = r["unsupported_kind"]
        out[cell_of(r)] = cell
    return out


def differences(expected: Expectation, records: list[dict[str, Any]]) -> list[str]:
    """One line per cell the run does not agree with the reviewed file on (empty: they agree)."""
    seen = observed(records)
    lines = []
    for cell in sorted(expected.cells.keys() | seen.keys()):
        want, got = expected.cells.get(cell), seen.get(cell)
        if want is None:
            lines.append(f"{cell}: new cell, {_show(got)}; review it and add it to {expected.path.name}")
        elif got is None:
            lines.append(f"{cell}: expected {_show(want)}, the run has no such cell")
        elif (want["verdict"], want.get("kind")) != (got["verdict"], got.get("kind")):
            why = f" (reviewed: {want['why']})" if want.get("why") else ""
            lines.append(f"{cell}: expected {_show(want)}{why}, observed {_show(got)}")
    return lines


def _show(cell: dict[str, str] | None) -> str:
    if cell is None:
        return "nothing"
    return cell["verdict"] + (f" ({cell['kind']})" if cell.get("kind") else "")


def write(name: str, run_dir: Path) -> Path:
    """Rewrite ``name``'s cells from a run, keeping each why whose verdict did not change; a new fail
    or deviation gets an UNREVIEWED why, which :func:`load` refuses until someone writes one."""
    from conformance.runner.results import read_results

    path = EXPECTED / f"{name}.yaml"
    data = yamlio.safe_load(path.read_text())
    old = {str(k): ({"verdict": v} if isinstance(v, str) else v) for k, v in (data.get("cells") or {}).items()}
    cells: dict[str, Any] = {}
    for cell, got in sorted(observed(list(read_results(run_dir))).items()):
        before = old.get(cell) or {}
        if got["verdict"] in EXPLAINED:
            same = before.get("verdict") == got["verdict"] and before.get("why")
            got = {**got, "why": before["why"] if same else f"{UNREVIEWED}: see docs/findings"}
        cells[cell] = got["verdict"] if list(got) == ["verdict"] else got
    head = [ln for ln in path.read_text().splitlines() if ln.startswith("#")]
    fields = [f"{k}: {json.dumps(str(data[k]))}" for k in ("product", "version", "target", "adapter", "env", "binary")]
    lines = [f"  {json.dumps(cell)}: {_flow(value)}" for cell, value in cells.items()]
    path.write_text("\n".join([*head, *fields, "cells:", *lines]) + "\n")
    return path


def _flow(value: str | dict[str, str]) -> str:
    """One cell on one line: ``pass`` or ``{"verdict": "fail", "why": "..."}`` (JSON is YAML)."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] != "write":
        sys.exit("usage: python3 -m tests.e2e.seed_brokers write NAME RUN_DIR")
    print(write(sys.argv[2], Path(sys.argv[3])))
