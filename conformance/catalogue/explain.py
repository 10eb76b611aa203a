"""``conformance explain RUN CASE_OR_REQUIREMENT``: everything a results folder knows about one case.

Why a command of its own: a failing case's record in ``results.jsonl`` holds the requirement,
expected vs. observed, verdicts, history and wire trace, but as one JSON line among hundreds. This
module finds the case (or every case of a requirement), joins the catalogue's text and sources, and
prints it in the order a person debugging it reads: what was required, what happened, how it was
observed, and the one command that reruns exactly that case against the same target.

Selection and formatting are pure functions of the records (tested with synthetic ones); only
:func:`explain` touches the folder and the console. Every line passes :func:`conformance.secrets.scrub`.
"""

from __future__ import annotations

import difflib
import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from conformance.catalogue.requirements import Requirement, catalogue
from conformance.errors import UsageError
from conformance.runner.pytest_argv import TARGET_ENV
from conformance.runner.results import RESULTS_FILE, read_results, read_run
from conformance.secrets import MASK, scrub

RERUN_TITLE = "Rerun exactly this case"
#: ``REQ-ID[classic]`` or ``REQ-ID[classic-single]``: a requirement narrowed to a case's parameters.
_NARROWED = re.compile(r"^(?P<req>[A-Za-z0-9-]+)\[(?P<params>[^\]]+)\]$")


@dataclass(frozen=True)
class Section:
    """A titled block of the explanation; ``lines`` are plain text (never rich markup)."""

    title: str
    lines: tuple[str, ...]


@dataclass(frozen=True)
class Rerun:
    """The command that reruns a case, and what the reader must know to use it."""

    argv: tuple[str, ...]
    notes: tuple[str, ...]

    def line(self) -> str:
        return shlex.join(self.argv)


def load(run_dir: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """run.json and the records of that run (a folder reused by several runs keeps only the last's)."""
    run_dir = Path(run_dir)
    if not (run_dir / RESULTS_FILE).is_file():
        raise UsageError(f"{run_dir}: no {RESULTS_FILE} (not a results folder of conformance run)")
    run = read_run(run_dir)
    records = list(read_results(run_dir))
    if run.get("run_id"):
        records = [r for r in records if r.get("run_id") == run["run_id"]] or records
    return run, records


def select_records(records: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    """The records ``key`` names: a case id (whole or its tail, e.g. ``TestX::test[classic]``), a
    requirement id (every case of it, any case), or ``REQ-ID[params]``. Unknown: a UsageError listing
    the closest ids, so a typo costs one line, not a search through the file."""
    key = key.strip()
    exact = [r for r in records if r.get("case_id") == key]
    if exact:
        return exact
    by_req = [r for r in records if str(r.get("requirement", "")).upper() == key.upper()]
    if by_req:
        return by_req
    m = _NARROWED.match(key)
    if m:
        narrowed = [r for r in records if str(r.get("requirement", "")).upper() == m["req"].upper()
                    and str(r.get("case_id", "")).endswith(f"[{m['params']}]")]
        if narrowed:
            return narrowed
    tail = [r for r in records if str(r.get("case_id", "")).endswith(key) and "::" in key]
    if tail:
        return tail
    ids = sorted({str(r.get("case_id")) for r in records} | {str(r.get("requirement")) for r in records})
    close = difflib.get_close_matches(key, ids, n=3, cutoff=0.4)
    hint = f"; closest: {', '.join(close)}" if close else f"; the run has {len(ids)} ids (see its results.jsonl)"
    raise UsageError(f"no case or requirement {key!r} in this run{hint}")


def rerun(run: dict[str, Any], record: dict[str, Any], siblings: Iterable[dict[str, Any]] = ()) -> Rerun:
    """The ``conformance run`` command for this case against the run's target, adapter, profile and
    mutation. A target recorded with a masked password goes through ``--target env:NAME``: the
    password was never written down, and must not land in a shell history either."""
    target = str(run.get("target") or record.get("target") or "rabbitmq-local")
    notes: list[str] = []
    if MASK in target:
        notes.append(f"the run's target was {target} (password redacted): export {TARGET_ENV}=<that URL with its password> first")
        target = f"env:{TARGET_ENV}"
    elif "://" not in target:
        notes.append(f"{target} is a launcher: the rerun launches a fresh {target} of its own")
    argv = ["conformance", "run", "--target", target]
    adapter = run.get("adapter") or record.get("adapter")
    if adapter:
        argv += ["--adapter", str(adapter)]
    profile = _profile_option(run, record)
    if profile:
        argv += ["--profile", profile]
    argv += ["-r", str(record.get("requirement"))]
    if record.get("queue_type"):
        argv += ["--queue-type", str(record["queue_type"])]
    mutation = run.get("mutation") if isinstance(run.get("mutation"), dict) else None
    spec = (mutation or {}).get("spec") or (mutation or {}).get("name") or record.get("mutation")
    if spec:
        argv += ["--mutation", str(spec)]
        notes.append(f"through the mutation {spec}, as the original run: a deliberately faulty broker")
    argv += ["--keep-history", "--out", f"runs/rerun-{record.get('requirement')}"]
    variant = record.get("variant")
    if variant:
        others = sorted({str(s.get("variant")) for s in siblings if s.get("requirement") == record.get("requirement")
                         and s.get("queue_type") == record.get("queue_type") and s.get("variant") and s.get("variant") != variant})
        if others:
            notes.append(f"runs the requirement's other variants on this queue type too ({', '.join(others)}): there is no variant selector")
    return Rerun(tuple(argv), tuple(notes))


def _profile_option(run: dict[str, Any], record: dict[str, Any]) -> str | None:
    """The profile id when the run judged by a bundled one, else the file it judged by."""
    pid = run.get("profile") or record.get("profile")
    path = run.get("profile_path")
    if not pid:
        return None
    try:
        from conformance.catalogue.profiles import bundled_profiles

        bundled = {p.id: str(p.path) for p in bundled_profiles()}
    except UsageError:
        bundled = {}
    if path and bundled.get(pid) not in (None, str(path)):
        return str(path)
    if pid not in bundled and path:
        return str(path)
    return str(pid)


def sections(run: dict[str, Any], record: dict[str, Any], req: Requirement | None, siblings: Iterable[dict[str, Any]] = ()) -> list[Section]:
    """The explanation of one record, section by section (pure: synthetic records test it)."""
    level = record.get("level") or (req.level if req else "?")
    head = [f"requirement: {record.get('requirement')} [{level}]"
            + (f" (declared {req.level}; {level} over {record.get('protocol')})" if req and req.level != level else "")]
    if req:
        head.append(f"text: {req.text}")
        head += [f"source ({s.kind}): {s}" for s in req.sources]
        for proto, ids in req.rules:
            head.append(f"spec rules ({proto}): {', '.join(ids)}")
        for ref in req.reference:
            head.append(f"reference: {ref.key} = {' or '.join(map(str, ref.values))} ({ref.source})")
    else:
        head.append("text: (not in this suite's catalogue: the run used another catalogue version)")
    case = [
        f"case: {record.get('case_id')}" + (f" (attempt {record.get('attempt')})" if (record.get("attempt") or 1) > 1 else ""),
        f"target: {record.get('product')} {record.get('version')} over {record.get('protocol')} via {record.get('adapter')}, profile {record.get('profile')}",
        f"queue type: {record.get('queue_type') or '- (queue-type independent)'}   variant: {record.get('variant') or '-'}",
        f"duration: {record.get('duration_s')} s",
    ]
    if record.get("mutation"):
        case.append(f"MUTATED by {record['mutation']}: a deliberately faulty broker, not a result about it")
    verdict = [
        f"verdict: {str(record.get('verdict', '?')).upper()}   spec: {record.get('spec_verdict') or '-'}   vendor: {record.get('vendor_verdict') or '-'}",
        f"expected: {record.get('expected') or '-'}",
        f"observed: {record.get('observed') or '-'}",
    ]
    if record.get("reason"):
        verdict.append(f"cause: {record['reason']}")
    if record.get("known_bug"):
        verdict.append(f"known bug (open upstream, still a fail): {record['known_bug']}")
    elif record.get("citation"):
        verdict.append(f"citation: {record['citation']}")
    out = [Section("Requirement", tuple(head)), Section("Case", tuple(case)), Section("Verdict", tuple(verdict))]
    if record.get("traceback"):
        out.append(Section("Traceback (the suite's, kept for debugging)", tuple(str(record["traceback"]).splitlines())))
    if record.get("observations") not in (None, {}, []):
        out.append(Section("Observations", _observation_lines(record["observations"])))
    history = record.get("history")
    if history:
        out.append(Section(f"History ({len(history)} operations)", tuple(_event_line(e) for e in history)))
    else:
        out.append(Section("History", ("not kept (a passing case keeps it only with --keep-history; the rerun command below asks for it)",)))
    trace = record.get("wire_trace")
    if trace:
        out.append(Section(f"Wire trace ({len(trace)} lines, decoded)", tuple(str(t) for t in trace)))
    else:
        out.append(Section("Wire trace", ("none (the case ran without the fault proxy, or it passed without --keep-history)",)))
    cmd = rerun(run, record, siblings)
    out.append(Section(RERUN_TITLE, (cmd.line(), *(f"note: {n}" for n in cmd.notes))))
    return [Section(s.title, tuple(scrub(line) for line in s.lines)) for s in out]


def _observation_lines(obs: Any) -> tuple[str, ...]:
    """One compact JSON line per observed key: the raw facts the verdict judged, greppable."""
    if not isinstance(obs, dict):
        return (json.dumps(obs, sort_keys=True, default=str),)
    return tuple(f"{k}: {json.dumps(v, sort_keys=True, default=str, separators=(',', ':'))}" for k, v in sorted(obs.items()))


def _event_line(e: dict[str, Any]) -> str:
    """One history event as :meth:`conformance.kit.history.Event.line` prints it (records keep the fields)."""
    tail = f" !! {e['error']}" if e.get("error") else ""
    t = e.get("t_ms")
    when = f"{t:9.1f}ms" if isinstance(t, (int, float)) else f"{'?':>9}ms"
    return f"{when}  {str(e.get('actor', '')):<10} {e.get('op')}({e.get('detail', '')}){tail}"


def render_plain(blocks: list[list[Section]]) -> str:
    """Plain text for pipes and CI logs: a title line, then the section's lines indented."""
    out: list[str] = []
    for i, block in enumerate(blocks):
        if i:
            out.append("=" * 72)
        for s in block:
            out.append(f"{s.title}:")
            out.extend(f"  {line}" for line in s.lines)
    return "\n".join(out)


def _print_rich(blocks: list[list[Section]]) -> None:
    """On a terminal: one panel per section, verdict coloured; content printed as text, never markup."""
    from rich.console import Console, Group
    from rich.panel import Panel
    from rich.rule import Rule
    from rich.text import Text

    colours = {"PASS": "green", "FAIL": "red", "ERROR": "magenta", "DEVIATION": "yellow", "BLOCKED": "magenta"}
    console = Console(highlight=False)
    for i, block in enumerate(blocks):
        if i:
            console.print(Rule())
        for s in block:
            if s.title == RERUN_TITLE:  # not boxed: a wrapped command inside a panel cannot be copied and pasted
                console.print(Text(f"{s.title}:", style="bold"))
                for line in s.lines:
                    console.print(Text(line), soft_wrap=True)
                continue
            body = Text("\n".join(s.lines))
            if s.title == "Verdict" and s.lines:
                word = s.lines[0].split()[1] if len(s.lines[0].split()) > 1 else ""
                body.highlight_words([word], style=f"bold {colours.get(word, 'white')}")
            console.print(Panel(Group(body), title=s.title, title_align="left", expand=True))


def explain(run_dir: Path, key: str, *, rich: bool) -> int:
    """Print the explanation of ``key`` in ``run_dir``; 0 when found (a bad key is a UsageError)."""
    run, records = load(run_dir)
    chosen = select_records(records, key)
    reqs = catalogue()
    blocks = [sections(run, r, reqs.get(str(r.get("requirement"))), records) for r in chosen]
    if rich:
        _print_rich(blocks)
    else:
        print(render_plain(blocks))
    return 0
