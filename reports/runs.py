"""Run metadata (``run.json``) of the run folders a report or a gate reads: how each run ended, and
whether two sets of runs can be compared at all.

A killed run leaves ``status: running`` and an aborted one ``aborted: <cause>``; its results are
real but incomplete, so the report says so and the gate refuses to pass on it. Two runs are only
comparable when they judged the same catalogue (suite version, catalogue digest): otherwise a
verdict change can come from the suite, not from the broker, and the gate must say so instead of
calling it a regression or, worse, hiding one. Another profile on the other side (release N+1 under
its own profile) keeps the runs comparable: the gate lists what the profiles say differently and the
cells each difference touched (reports.profile_diff), and a failure the new profile excuses blocks.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FINISHED = "finished"
RUN_FILE = "run.json"


@dataclass(frozen=True)
class RunMeta:
    """One run folder's metadata, as far as its ``run.json`` says (``problem`` when it cannot)."""

    folder: str
    run_id: str | None = None
    status: str = "unknown"
    suite_version: str | None = None
    catalogue_digest: str | None = None
    profile: str | None = None
    profile_digest: str | None = None
    product: str | None = None
    version: str | None = None
    protocol: str | None = None
    problem: str | None = None  # why the metadata is missing or unreadable
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def finished(self) -> bool:
        return self.problem is None and self.status == FINISHED

    @property
    def ended(self) -> str:
        """How the run ended, in words for a banner or a gate cause."""
        if self.problem:
            return self.problem
        if self.status == "running":
            return "status 'running': the run was killed or is still going (nothing marked it finished)"
        return f"status {self.status!r}"


#: What an adapter records when the server announced no product (AMQP 1.0 ``product`` and AMQP 0-9-1
#: server properties are optional; STOMP's ``server`` header too) or no version.
UNANNOUNCED = ("", "unknown")
UNANNOUNCED_VERSIONS = ("", "0", "unknown")


def announced(product: str | None) -> bool:
    """Whether a recorded product names a broker (not an adapter's placeholder for none)."""
    return product is not None and product.strip(" ").lower() not in UNANNOUNCED


def broker_name(product: str | None, version: str | None, target: str | None) -> tuple[str | None, str | None]:
    """The (product, version) a report and a gate name a broker by: what it announced, or, when it
    announced no product, its target (the launcher name, e.g. ``proton-example``, or the redacted
    URL; the run's, from ``run.json``, where there is one: see :func:`run_targets`) with the version
    only if one was announced. Why: the Proton example broker announces nothing, and "unknown 0"
    named no broker in the matrix, its headings or the gate; the target is what the user chose to run. The run metadata (the gate's profile lines) is named here, the
    records by :func:`broker_name_sql`, the same rule over the same constants (records are named
    inside the Spark pass, so that every figure groups by the name), and tests/reports check that
    the two agree."""
    if announced(product):
        return product, version
    named = version if version is not None and version.strip(" ").lower() not in UNANNOUNCED_VERSIONS else None
    return (target or product or None), named


def run_targets(metas: list[RunMeta]) -> dict[str, str]:
    """run id -> the target its ``run.json`` names, for the runs of a broker that announced no
    product. Why not the records' own ``target``: a case that ran in a worker not attached to the
    launched target records its URL (``amqp://127.0.0.1:16860``, a new port each run), so two runs
    of one broker would be two brokers; ``run.json`` keeps the launcher name the user gave."""
    return {m.run_id: str(m.raw["target"]) for m in metas
            if m.problem is None and m.run_id and m.raw.get("target") and not announced(m.raw.get("product"))}


def broker_name_sql(targets: dict[str, str] | None = None) -> tuple[str, str]:
    """:func:`broker_name` as two Spark SQL expressions over a record's columns: (product, version);
    the target is the run's (``targets``: :func:`run_targets`), else the record's."""
    from reports.groupings import sql_text as text

    def one_of(col: str, values: tuple[str, ...]) -> str:
        return f"coalesce(lower(trim(`{col}`)), '') IN ({', '.join(map(text, values))})"

    target = "`target`"
    if targets:
        target = f"coalesce(CASE `run_id` {' '.join(f'WHEN {text(k)} THEN {text(v)}' for k, v in sorted(targets.items()))} END, `target`)"
    unannounced = one_of("product", UNANNOUNCED)
    return (f"CASE WHEN {unannounced} THEN coalesce(nullif({target}, ''), nullif(`product`, '')) ELSE `product` END",
            f"CASE WHEN {unannounced} AND {one_of('version', UNANNOUNCED_VERSIONS)} THEN NULL ELSE `version` END")


def _folder(results_file: str) -> str:
    return results_file[: -len("/results.jsonl")] if results_file.endswith("/results.jsonl") else os.path.dirname(results_file)


def _meta(folder: str, raw: Any, problem: str | None = None) -> RunMeta:
    if problem is not None:
        return RunMeta(folder=folder, problem=problem)
    if not isinstance(raw, dict):
        return RunMeta(folder=folder, problem=f"{RUN_FILE} is not a JSON object")

    def s(key: str) -> str | None:
        v = raw.get(key)
        return None if v is None else str(v)

    product, version = broker_name(s("product"), s("version"), s("target"))
    return RunMeta(folder=folder, run_id=s("run_id"), status=s("status") or "unknown", suite_version=s("suite_version"),
                   catalogue_digest=s("catalogue_digest"), profile=s("profile"), profile_digest=s("profile_digest"),
                   product=product, version=version, protocol=s("protocol"), raw=raw)


def read_local(results_file: str) -> RunMeta:
    """The ``run.json`` beside a local results file; a missing or broken one is recorded, not raised:
    whether that is fatal is the caller's decision (the report shows it, the gate is inconclusive)."""
    folder = _folder(results_file)
    path = Path(folder) / RUN_FILE
    try:
        return _meta(folder, json.loads(path.read_text()))
    except FileNotFoundError:
        return _meta(folder, None, f"no {RUN_FILE}: how the run ended is unknown")
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        return _meta(folder, None, f"{RUN_FILE} unreadable ({str(exc).splitlines()[0]})")


def read_remote(spark: Any, results_file: str) -> RunMeta:
    """``run.json`` of a run folder only Spark can reach (hdfs://, s3a://, ...), read as text and
    parsed here: Spark's JSON reader infers a schema, which drops empty mappings and a profile's
    default entry row (key ""), so the resolved profile would not read back as written."""
    folder = _folder(results_file)
    try:
        row = spark.read.text(f"{folder}/{RUN_FILE}", wholetext=True).first()
    except Exception as exc:  # noqa: BLE001 - Spark raises its own analysis/IO exceptions; all mean "unreadable"
        return _meta(folder, None, f"{RUN_FILE} unreadable ({str(exc).splitlines()[0][:160]})")
    if row is None or not str(row[0]).strip():
        return _meta(folder, None, f"{RUN_FILE} is empty")
    try:
        return _meta(folder, json.loads(row[0]))
    except json.JSONDecodeError as exc:
        return _meta(folder, None, f"{RUN_FILE} unreadable ({str(exc).splitlines()[0]})")


def is_local(results_file: str) -> bool:
    return results_file.startswith("/") or results_file.startswith("file:")


def read_metas(results_files: list[str], spark: Any | None = None) -> list[RunMeta]:
    """Metadata of every run folder (local ones without Spark; remote ones only when a session is given)."""
    out = []
    for f in results_files:
        if is_local(f):
            out.append(read_local(f[len("file://"):] if f.startswith("file://") else f))
        elif spark is not None:
            out.append(read_remote(spark, f))
        else:
            out.append(RunMeta(folder=_folder(f), problem=f"{RUN_FILE} not read (remote path, no Spark session)"))
    return out


def unfinished(metas: list[RunMeta]) -> list[RunMeta]:
    return [m for m in metas if not m.finished]


def _values(metas: list[RunMeta], attr: str) -> list[str]:
    return sorted({str(getattr(m, attr)) for m in metas})


def differences(baseline: list[RunMeta], current: list[RunMeta]) -> list[str]:
    """Why the two sides cannot be compared (empty when they can), each reason one short sentence.

    Compared: suite version and catalogue digest over all runs of both sides; within one side, one
    profile (id and digest) per product and protocol. A run without a catalogue digest is of the old
    format: its comparability cannot be checked, which is said, never assumed.
    """
    reasons: list[str] = []
    metas = [m for m in baseline + current if m.problem is None]
    old = [m for m in metas if not m.catalogue_digest or not m.profile_digest]
    if old:
        reasons.append("old-format run(s) without catalogue/profile digest, comparability cannot be checked: "
                       + ", ".join(dict.fromkeys(m.folder for m in old)))
    for attr, what in (("suite_version", "suite version"), ("catalogue_digest", "catalogue digest")):
        b = _values([m for m in baseline if m.problem is None and getattr(m, attr)], attr)
        c = _values([m for m in current if m.problem is None and getattr(m, attr)], attr)
        if len(set(b) | set(c)) > 1:
            reasons.append(f"{what} differs: baseline {', '.join(_short(v) for v in b) or '-'} vs current {', '.join(_short(v) for v in c) or '-'}")

    def profiles(side: list[RunMeta]) -> dict[tuple[str, str], set[tuple[str, str]]]:
        acc: dict[tuple[str, str], set[tuple[str, str]]] = {}
        for m in side:
            if m.problem is None:
                acc.setdefault((m.product or "?", m.protocol or "?"), set()).add((m.profile or "?", m.profile_digest or "?"))
        return acc

    # Another profile on the other side is no reason: the gate lists what the two say differently
    # (reports.profile_diff). Two profiles for one product and protocol on one side are: its cells
    # merge across runs, and which profile judged a merged cell could not be said.
    for side, acc in (("baseline", profiles(baseline)), ("current", profiles(current))):
        for key in sorted(acc):
            if len(acc[key]) > 1:
                reasons.append(f"the {side} judged {key[0]} {key[1]} by more than one profile: "
                               + ", ".join(f"{p} ({_short(d)})" for p, d in sorted(acc[key])) + "; gate one profile per side")
    return reasons


def profile_pairs(baseline: list[RunMeta], current: list[RunMeta]) -> list[tuple[str, str, list[RunMeta], list[RunMeta]]]:
    """(product, protocol, baseline runs, current runs) for each product and protocol on both sides
    judged by another profile (id or digest) on each: the gate shows what the two profiles say differently."""
    def by_key(side: list[RunMeta]) -> dict[tuple[str, str], list[RunMeta]]:
        acc: dict[tuple[str, str], list[RunMeta]] = {}
        for m in side:
            if m.problem is None and m.profile_digest:
                acc.setdefault((m.product or "?", m.protocol or "?"), []).append(m)
        return acc

    b, c = by_key(baseline), by_key(current)
    def ident(ms: list[RunMeta]) -> set[tuple[str | None, str | None]]:
        return {(m.profile, m.profile_digest) for m in ms}

    return [(key[0], key[1], b[key], c[key]) for key in sorted(set(b) & set(c)) if ident(b[key]) != ident(c[key])]


def _short(digest: str) -> str:
    """A digest shortened for a one-line cause (versions pass through)."""
    return digest[:12] if len(digest) == 64 and all(ch in "0123456789abcdef" for ch in digest) else digest
