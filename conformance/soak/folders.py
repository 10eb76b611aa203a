"""Soak run folders made without a broker: a synthetic history with its soak.json (tests, the Spark
benchmark), and a real run's copy with a history mutation applied (a failing row the report must
show, as the self-test's mutated records are: marked, never counted as the broker's).

A folder is what ``conformance soak --out`` writes: ``history.jsonl`` and ``soak.json``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from conformance.soak.history import read_history, write_history
from conformance.soak.mutations import MUTATIONS


def synthetic_meta(ops: list[dict[str, Any]], *, product: str, version: str, protocol: str, nemesis: list[str],
                   seed: int, queue_type: str = "quorum", **options: Any) -> dict[str, Any]:
    """A soak.json for a synthetic history: the fields a real run writes that the report reads
    (no verdicts recorded: nothing judged it yet)."""
    faults = [op for op in ops if op["f"] == "fault" and op["type"] == "ok"]
    return {"seed": seed, "target": "synthetic", "product": product, "version": version, "protocol": protocol, "ops": len(ops),
            "schedule": [{"at_s": round(op["time_ns"] / 1e9, 3), "kind": nemesis[n % len(nemesis)]} for n, op in enumerate(faults)],
            "options": {"seed": seed, "nemesis": list(nemesis), "queue_type": queue_type, "ordered": False, "requeue_counts": False, **options},
            "verdicts": {}, "anomalies": [], "stats": {"ops": len(ops), "faults_fired": [{"kind": nemesis[0]}] * len(faults)},
            "synthetic": True}


def write_run(folder: str | Path, ops: list[dict[str, Any]], meta: dict[str, Any]) -> Path:
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    write_history(folder / "history.jsonl", ops)
    (folder / "soak.json").write_text(json.dumps(meta, indent=1) + "\n")
    return folder


def mutate_run(src: str | Path, dst: str | Path, mutation: str, seed: int = 0) -> Path:
    """A copy of the run folder ``src`` at ``dst`` whose history has ``mutation`` applied
    (conformance.soak.mutations.MUTATIONS); its soak.json says so (``history_mutation``) and drops
    the verdicts recorded at run time, which were about the unmutated history."""
    fn = MUTATIONS[mutation][0]
    src, dst = Path(src), Path(dst)
    if dst.exists():
        shutil.rmtree(dst)
    dst.mkdir(parents=True)
    meta = json.loads((src / "soak.json").read_text())
    meta.update(history_mutation=mutation, mutation_seed=seed, mutated_from=str(src), verdicts={}, anomalies=[])
    return write_run(dst, fn(read_history(src / "history.jsonl"), seed=seed), meta)
