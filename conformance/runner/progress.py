"""What a person sees while the suite works: live progress on a terminal, one line per case elsewhere.

Why a module of its own: the console is the tool's, not pytest's. ``conformance run`` turns pytest's
terminal reporter off (no dots, no ``[ 43%]``, no tracebacks of the runner's frames) and shows
:class:`RunProgress` instead, fed by a plugin of the controller process
(conformance.pytest_plugin.progress). It reads the records the run writes to ``results.jsonl``
(from where it left off each time a case is reported), so it sees exactly what the results say,
and works the same whether the cases ran in this process or in worker processes.

Two forms, one source of lines:

- on a terminal (and without ``--verbose``): a live bar with cases done / total, elapsed time and an
  estimate, the counts by verdict as they come, and the area and case(s) running now; a failing
  case's block is printed above the bar when it is decided;
- in a pipe, a CI log or with ``--verbose``: one plain line per decided case (verdict, case id,
  requirement), and the same failing-case blocks.

The self-test and the report use :class:`StepProgress` (done / total of coarser steps).
Every line passes :func:`conformance.secrets.scrub`: a password never reaches the console.
"""

from __future__ import annotations

import json
import os
import shlex
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Callable

from conformance.secrets import scrub

#: Verdicts in the order the counts line shows them, and their colour on a terminal.
VERDICT_STYLE = {"pass": "green", "fail": "bold red", "error": "magenta", "blocked": "magenta", "deviation": "yellow",
                 "unsupported": "dim", "undocumented": "cyan"}
#: Verdicts that print a block of their own: a person must read why.
PROBLEMS = ("fail", "error", "blocked")


def case_block(record: dict[str, Any], out: Path | None, *, debug: bool = False) -> list[str]:
    """A decided problem case in the suite's words: requirement and level, Expected / Actual, the
    cause, and where its trace is (the results file and the ``explain`` command for this case).

    Pure (records in, lines out): tested with synthetic records, shared by run and selftest."""
    verdict = str(record.get("verdict", "?")).upper()
    where = " ".join(str(x) for x in (record.get("queue_type"), record.get("variant")) if x)
    lines = [f"{verdict} {record.get('requirement')} [{record.get('level')}]" + (f" {where}" if where else "")
             + f"  {record.get('case_id', '')}",
             f"  Expected: {record.get('expected') or '-'}",
             f"  Actual:   {record.get('observed') or '-'}"]
    if record.get("reason"):
        lines.append(f"  Cause:    {record['reason']}")
    if record.get("known_bug"):
        lines.append(f"  Known bug: {record['known_bug']}")
    elif record.get("citation"):
        lines.append(f"  Citation: {record['citation']}")
    if out is not None:
        lines.append(f"  Trace:    {out / 'results.jsonl'}; conformance explain {shlex.quote(str(out))} {shlex.quote(str(record.get('case_id', '')))}")
    if debug and record.get("traceback"):
        lines.append("  Traceback (the suite's, --debug):")
        lines += [f"    {line}" for line in str(record["traceback"]).splitlines()]
    return [scrub(line) for line in lines]


def case_line(record: dict[str, Any]) -> str:
    """The plain form's line for one decided case: verdict, case id, requirement."""
    from conformance.unsupported import label

    return scrub(f"{label(record).upper():<12} {record.get('case_id', '')}  {record.get('requirement')} [{record.get('level')}]")


def counts_text(counts: Counter[str]) -> str:
    """``pass 12  fail 1``: the verdicts seen so far, in a fixed order (absent ones left out)."""
    return "  ".join(f"{v} {counts[v]}" for v in VERDICT_STYLE if counts.get(v))


def eta_s(done: int, total: int, elapsed: float) -> float | None:
    """Seconds left at the pace so far; None before the first case (no pace to go by)."""
    if done <= 0 or total <= done:
        return None if done <= 0 else 0.0
    return elapsed / done * (total - done)


def clock(seconds: float | None) -> str:
    if seconds is None:
        return "-:--"
    s = int(round(seconds))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


def area_of(nodeid: str) -> str:
    """Cases live under ``conformance/cases/<area>/``: the node id's first folder is the area."""
    head = nodeid.split("::", 1)[0]
    return head.split("/", 1)[0] if "/" in head else "-"


def short_case(nodeid: str) -> str:
    """``TestNackDiscard::test[classic-single]``: what distinguishes a case within its area."""
    parts = nodeid.split("::")
    return "::".join(parts[1:]) if len(parts) > 1 else nodeid


class ResultsTail:
    """New complete lines of a ``results.jsonl`` since the last read (a half-written line waits)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.offset = self.path.stat().st_size if self.path.exists() else 0
        self._partial = b""

    def read(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        with open(self.path, "rb") as fh:
            fh.seek(self.offset)
            chunk = fh.read()
        self.offset += len(chunk)
        data = self._partial + chunk
        *lines, self._partial = data.split(b"\n")
        out = []
        for line in lines:
            if line.strip():
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError:
                    continue  # the results file is the source of truth; a damaged line is the report's to quarantine
        return out


@dataclass
class Console:
    """Where progress goes: a rich console on the real terminal, or plain lines to a stream.

    ``stream`` is a duplicate of the terminal's descriptor taken before pytest starts, so pytest's
    output capture (which redirects descriptor 1 during a case) never swallows the bar."""

    stream: IO[str]
    live: bool
    width: int = 100
    _rich: Any = field(default=None, init=False)

    def __post_init__(self) -> None:
        if self.live:
            from rich.console import Console as RichConsole

            self._rich = RichConsole(file=self.stream, force_terminal=True, width=self.width, highlight=False)

    @classmethod
    def for_stdout(cls, *, verbose: bool) -> "Console":
        """Live on a terminal unless ``--verbose``; plain lines in a pipe or a CI log."""
        import shutil
        import sys

        tty = sys.stdout.isatty() and os.environ.get("TERM") != "dumb"
        sys.stdout.flush()
        try:
            stream: Any = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1, encoding="utf-8", errors="replace")
        except (OSError, ValueError, AttributeError):  # io.UnsupportedOperation: an in-memory stdout (a caller's capture)
            stream = sys.stdout
        return cls(stream, live=tty and not verbose, width=shutil.get_terminal_size((100, 24)).columns)

    def line(self, text: str, style: str | None = None) -> None:
        if self._rich is not None:
            from rich.text import Text

            self._rich.print(Text(text, style=style or ""), soft_wrap=True)
        else:
            self.stream.write(text + "\n")
            self.stream.flush()

    def live_view(self, render: Callable[[], Any]) -> Any:
        """A rich Live redrawing ``render()`` a few times a second; stdout is left alone (pytest owns it)."""
        from rich.live import Live

        return Live(get_renderable=render, console=self._rich, refresh_per_second=4, transient=True,
                    redirect_stdout=False, redirect_stderr=False)


class RunProgress:
    """Progress and the failing-case blocks of ``conformance run``; the pytest plugin of the
    controller feeds it (conformance.pytest_plugin.progress)."""

    def __init__(self, console: Console, out: Path, *, debug: bool = False) -> None:
        self.console = console
        self.out = Path(out)
        self.debug = debug
        self.total = 0
        self.done = 0
        self.counts: Counter[str] = Counter()
        self.running: dict[str, float] = {}
        self.started = time.monotonic()
        self._tail: ResultsTail | None = None
        self._live: Any = None
        self._lock = threading.Lock()

    def begin(self) -> None:
        """The run began: records from here on are its own (a reused folder's earlier ones are not)."""
        self._tail = ResultsTail(self.out / "results.jsonl")
        self.started = time.monotonic()

    def case_started(self, nodeid: str) -> None:
        with self._lock:
            self.running[nodeid] = time.monotonic()

    def case_finished(self, nodeid: str) -> None:
        with self._lock:
            self.running.pop(nodeid, None)
        self.drain()

    def end(self) -> None:
        self.drain()
        if self._live is not None:
            self._live.stop()
            self._live = None

    # --- the view ---------------------------------------------------------------------------------
    def start(self, total: int) -> None:
        """The number of cases selected: the bar starts (or the plain form says how many)."""
        self.total = total
        if self.console.live and self._live is None and total:
            self._live = self.console.live_view(self.render)
            self._live.start()
        elif not self.console.live:
            self.console.line(f"conformance: {total} cases selected; one line per decided case")

    def drain(self) -> None:
        """Every record written since the last look: count it, and print it in the suite's words."""
        if self._tail is None:
            return
        records = self._tail.read()
        for record in records:
            with self._lock:
                self.done += 1
                self.counts[str(record.get("verdict"))] += 1
            if record.get("verdict") not in PROBLEMS:
                if not self.console.live:
                    self.console.line(case_line(record))
            else:  # its block's first line is its plain line too: verdict, requirement, case id
                for i, line in enumerate(case_block(record, self.out, debug=self.debug)):
                    self.console.line(line, VERDICT_STYLE.get(str(record.get("verdict"))) if i == 0 else None)
        if records and self._live is not None:
            self._live.refresh()  # the counts agree with the blocks just printed, not a quarter second later

    def status(self) -> dict[str, Any]:
        """The figures the bar shows (pure data: the test of the view reads these)."""
        with self._lock:
            elapsed = time.monotonic() - self.started
            return {"done": self.done, "total": max(self.total, self.done), "elapsed": elapsed,
                    "eta": eta_s(self.done, max(self.total, self.done), elapsed), "counts": Counter(self.counts),
                    "running": sorted(self.running, key=self.running.__getitem__)}

    def render(self) -> Any:
        from rich.console import Group
        from rich.progress_bar import ProgressBar
        from rich.table import Table
        from rich.text import Text

        s = self.status()
        head = Table.grid(padding=(0, 1))
        head.add_row(Text("conformance run", style="bold"), ProgressBar(total=s["total"] or 1, completed=s["done"], width=30),
                     Text(f"{s['done']}/{s['total']} cases"), Text(f"elapsed {clock(s['elapsed'])}"),
                     Text(f"~{clock(s['eta'])} left" if s["eta"] is not None else "estimating"))
        counts = Text("  ")
        for v in VERDICT_STYLE:
            if s["counts"].get(v):
                counts.append(f"{v} {s['counts'][v]}  ", style=VERDICT_STYLE[v])
        lines = [head, counts]
        for nodeid in s["running"][:4]:
            lines.append(Text(f"  now: {area_of(nodeid)} · {short_case(nodeid)}", style="cyan", overflow="ellipsis", no_wrap=True))
        return Group(*lines)


class StepProgress:
    """Progress over coarse steps (the self-test's catalogue runs, the report's stages).

    On a terminal a live bar with done / total, elapsed and an estimate, the steps running now and
    a free ``note`` (kills so far); elsewhere each finished step is a plain line (the caller's)."""

    def __init__(self, title: str, console: Console) -> None:
        self.title = title
        self.console = console
        self.total = 0
        self.done = 0
        self.note = ""
        self.current: list[str] = []
        self.started = time.monotonic()
        self._planned = self.started
        self._live: Any = None
        self._lock = threading.Lock()

    def __enter__(self) -> "StepProgress":
        if self.console.live:
            self._live = self.console.live_view(self.render)
            self._live.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    def plan(self, total: int) -> None:
        """The number of steps; the estimate's pace counts from here (the self-test's clean runs,
        before the plan, are not mutation runs and would skew it)."""
        with self._lock:
            self.total = total
            self._planned = time.monotonic()

    def begin(self, name: str) -> None:
        with self._lock:
            self.current.append(name)

    def finish(self, name: str, line: str | None = None, note: str | None = None, count: bool = True) -> None:
        """``name`` ended; ``count=False`` for a step outside the planned total (the self-test's clean runs)."""
        with self._lock:
            if name in self.current:
                self.current.remove(name)
            self.done += int(count)
            if note is not None:
                self.note = note
        if line:
            self.say(line)

    def say(self, text: str) -> None:
        """A line above the bar (or a plain line): what the command used to print, in order."""
        self.console.line(scrub(text))

    def render(self) -> Any:
        from rich.console import Group
        from rich.progress_bar import ProgressBar
        from rich.table import Table
        from rich.text import Text

        with self._lock:
            elapsed = time.monotonic() - self.started
            done, total, current, note = self.done, max(self.total, self.done), list(self.current), self.note
            paced = time.monotonic() - self._planned
        eta = eta_s(done, total, paced) if total else None
        head = Table.grid(padding=(0, 1))
        head.add_row(Text(self.title, style="bold"), ProgressBar(total=total or 1, completed=done, width=30),
                     Text(f"{done}/{total or '?'}"), Text(f"elapsed {clock(elapsed)}"),
                     Text(f"~{clock(eta)} left" if eta is not None else "estimating"), Text(note, style="bold"))
        rows: list[Any] = [head]
        rows += [Text(f"  now: {c}", style="cyan", overflow="ellipsis", no_wrap=True) for c in current[:4]]
        return Group(*rows)
