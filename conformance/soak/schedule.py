"""The nemesis schedule of a soak: data made before the run, from the seed or a scripted file.

Same seed, same kinds, same horizon: the same schedule (:func:`generate_schedule` is a pure
function). Each entry is ``{"at_s": seconds after the soak started, "kind": fault kind name}``; the
runner fires each entry at its time and heals it before the next (faults never overlap). On a
cluster target, an entry of a kind that strikes one node (``kill``, ``partition``) also names the
node, ``"node": 1..N`` (the cluster's nodes in order), drawn from the seed by :func:`assign_nodes`.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from conformance.errors import UsageError

#: The fault kinds a soak can schedule: the broker kinds of conformance.nemesis.kinds, and ``cut``
#: (every client connection reset through the fault proxy); on a cluster target ``kill`` is the
#: node kill of one node, and ``partition`` cuts one node off from the others.
SOAK_KINDS = ("cut", "kill", "restart", "pause", "partition")
#: The kinds that strike one node of a cluster (the entry names it).
NODE_KINDS = ("kill", "partition")
#: No fault in the first and last second: the workload is running before the first, and the last
#: heals before the run stops.
MARGIN_S = 1.0


def generate_schedule(seed: int, kinds: list[str] | tuple[str, ...], horizon_s: float, every_s: float = 4.0) -> list[dict[str, Any]]:
    """Faults of ``kinds`` at seeded random times within ``horizon_s``: one every ``every_s`` on
    average (each gap uniform in [0.5, 1.5] x ``every_s``), none within :data:`MARGIN_S` of either end."""
    kinds = list(kinds)
    if not kinds:
        return []
    for k in kinds:
        if k not in SOAK_KINDS:
            raise UsageError(f"unknown nemesis kind {k!r} (a soak takes: {', '.join(SOAK_KINDS)})")
    rng = random.Random(f"schedule:{seed}")
    out: list[dict[str, Any]] = []
    t = MARGIN_S + rng.uniform(0.0, every_s)
    while t < horizon_s - MARGIN_S:
        out.append({"at_s": round(t, 3), "kind": rng.choice(kinds)})
        t += rng.uniform(0.5 * every_s, 1.5 * every_s)
    if not out and horizon_s > 2 * MARGIN_S:  # a short soak still takes one fault
        out.append({"at_s": round(rng.uniform(MARGIN_S, horizon_s - MARGIN_S), 3), "kind": rng.choice(kinds)})
    return out


def assign_nodes(schedule: list[dict[str, Any]], seed: int, size: int) -> list[dict[str, Any]]:
    """The schedule with a seeded ``node`` (1..``size``) on each entry of a :data:`NODE_KINDS` kind
    that names none (a scripted entry may name its own). Pure: same seed, schedule and size, same
    nodes; the draw is its own generator, so the times and kinds are those of the seed regardless."""
    rng = random.Random(f"nodes:{seed}")
    out = []
    for e in schedule:
        e = dict(e)
        if e["kind"] in NODE_KINDS:
            pick = rng.randint(1, size)  # drawn for every such entry, so a scripted node shifts no other
            e.setdefault("node", pick)
        out.append(e)
    return out


def load_schedule(path: str | Path) -> list[dict[str, Any]]:
    """A scripted schedule: a YAML list of ``{at_s, kind}``, checked and sorted by time."""
    import yaml

    from conformance.yamlio import safe_load

    try:
        data = safe_load(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"--schedule {path}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise UsageError(f"--schedule {path}: not YAML: {' '.join(str(exc).split())}") from None
    if not isinstance(data, list):
        raise UsageError(f"--schedule {path}: expected a YAML list of {{at_s, kind}}")
    out = []
    for i, item in enumerate(data):
        if not isinstance(item, dict) or "at_s" not in item or "kind" not in item:
            raise UsageError(f"--schedule {path}: entry {i} is not a mapping with at_s and kind")
        if item["kind"] not in SOAK_KINDS:
            raise UsageError(f"--schedule {path}: entry {i}: unknown kind {item['kind']!r} (known: {', '.join(SOAK_KINDS)})")
        try:
            at = float(item["at_s"])
        except (TypeError, ValueError):
            raise UsageError(f"--schedule {path}: entry {i}: at_s {item['at_s']!r} is not a number") from None
        if at < 0:
            raise UsageError(f"--schedule {path}: entry {i}: at_s must not be negative")
        entry: dict[str, Any] = {"at_s": at, "kind": str(item["kind"])}
        if "node" in item:
            if not isinstance(item["node"], int) or isinstance(item["node"], bool) or item["node"] < 1:
                raise UsageError(f"--schedule {path}: entry {i}: node {item['node']!r} is not a node number (1, 2, ...)")
            entry["node"] = item["node"]
        out.append(entry)
    return sorted(out, key=lambda e: e["at_s"])
