"""The driver JVM's class-data-sharing archive (issue 20): recorded once, mapped by every report.

Why: most of the driver JVM's start is loading and verifying Spark's classes (SparkContext, then
the session's analyzer, planner and code generator): 4.4-5.2 s from launch to the first task.
Java 17 can map the classes an earlier JVM loaded from an archive instead (``-XX:SharedArchiveFile``):
the report starts 2-2.5 s sooner (start 2.7-2.8 s instead of 4.6-4.9 s at a million records). The
archive (about 165 MB, in ``~/.cache/conformance/spark-cds``, ``CONFORMANCE_SPARK_CDS_DIR`` moves it)
is named after the java binary and the pyspark version: an upgrade of either gives a new name, and
a stale or foreign archive is refused by the JVM itself, which then starts as without one.

Who records it: ``scripts/install.sh`` (``python3 -m reports.class_archive``, a small report whose
JVM writes the archive as it exits, about 20 s once per machine), so a fresh machine's first
report already maps it. ``CONFORMANCE_SPARK_CDS``:

* unset (the default): map the archive when there is one; never record;
* ``1``: also record it from the first report that finds none (that report is slower, 36.7 s
  instead of about 21 s at a million records; its JVM writes the archive after the report's
  process has exited, under a temporary name a later run takes once it has stopped growing);
* ``0``: neither.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import time
import uuid
from pathlib import Path

#: Seconds a class archive the JVM writes as it exits (a few seconds' work) must have been left
#: alone before a later run takes it as written.
CDS_SETTLE_S = 30.0


def mode() -> str:
    """``record``, ``off`` or ``use`` (the default), from CONFORMANCE_SPARK_CDS."""
    value = os.environ.get("CONFORMANCE_SPARK_CDS", "").strip().lower()
    if value in ("1", "true", "yes", "record"):
        return "record"
    if value in ("0", "false", "no", "off"):
        return "off"
    return "use"


def archive_path() -> Path:
    """Where this java and this pyspark's archive lives (its folder is created)."""
    import pyspark

    java = shutil.which("java", path=os.path.join(os.environ["JAVA_HOME"], "bin")) if os.environ.get("JAVA_HOME") else shutil.which("java")
    java = os.path.realpath(java or "java")
    key = hashlib.sha256(f"{java} {os.stat(java).st_mtime_ns} {pyspark.__version__} {os.path.dirname(pyspark.__file__)}".encode()).hexdigest()[:16]
    folder = Path(os.environ.get("CONFORMANCE_SPARK_CDS_DIR") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "conformance" / "spark-cds")
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"driver-{key}.jsa"


def class_archive_options(*, create: bool = True) -> list[str]:
    """JVM options: map the archive if there is one; record one (mode ``record`` and ``create``)
    if there is none and none is on its way. A part a recording JVM left is taken as the archive
    once it has not changed for CDS_SETTLE_S, so two reports at once never share a half-written file."""
    wanted = mode()
    if wanted == "off":
        return []
    try:
        archive = archive_path()
        if not archive.is_file():
            # an archive appears only when its JVM exits: no part yet means none is on its way
            parts = sorted(archive.parent.glob(f"{archive.name}.*.part"))
            settled = [p for p in parts if p.stat().st_size > 0 and time.time() - p.stat().st_mtime > CDS_SETTLE_S]
            if settled:
                os.replace(settled[0], archive)
                for extra in settled[1:]:
                    extra.unlink(missing_ok=True)
            elif wanted == "record" and create and not parts:
                return [f"-XX:ArchiveClassesAtExit={archive.parent / f'{archive.name}.{uuid.uuid4().hex}.part'}"]
            else:
                return []
        return [f"-XX:SharedArchiveFile={archive}", "-Xshare:auto"]
    except (OSError, ImportError):  # no writable cache, no java: start as without one
        return []


def _sample_run(folder: Path) -> None:
    """A small run folder whose report goes through every stage (verdicts of each kind, a flaky
    case, a trace): the classes the recording JVM loads are the ones a real report needs."""
    import json

    from conformance.catalogue.requirements import catalogue
    from reports.schema import RESULT_FIELDS, RESULT_SCHEMAS

    folder.mkdir(parents=True)
    blank = dict.fromkeys(name for name, _, _ in RESULT_FIELDS)  # every field of the schema, as a real record has
    lines = []
    verdicts = ("pass", "fail", "deviation", "unsupported", "pass", "error")
    for i, req in enumerate(list(catalogue().values())[:24]):
        for attempt in (1, 2):
            verdict = verdicts[(i + attempt) % len(verdicts)]
            lines.append(json.dumps({
                **blank, "schema": RESULT_SCHEMAS[0], "run_id": "sample", "case_id": f"{req.area}/test_x.py::T::test[classic]",
                "requirement": req.id, "level": req.level, "area": req.area, "queue_type": "classic",
                "verdict": verdict, "spec_verdict": verdict, "vendor_verdict": verdict, "expected": "expected", "observed": "observed",
                "duration_s": 0.01 * (i + 1), "attempt": attempt, "finished_at": 1.0e9 + i + attempt, "product": "Sample", "version": "1",
                "protocol": "amqp-0-9-1", "wire_trace": "C->S basic.ack" if verdict == "fail" else None, "history": "[]"}))
    lines.append("{not json")  # the quarantine path too
    (folder / "results.jsonl").write_text("\n".join(lines) + "\n")


def record() -> Path | None:
    """Record this machine's archive now, from a small report in this process, and wait until the
    JVM has written it (it does so as it exits). None if one exists already."""
    import tempfile

    archive = archive_path()
    if archive.is_file():
        return None
    os.environ["CONFORMANCE_SPARK_CDS"] = "1"
    with tempfile.TemporaryDirectory(prefix="conformance-cds-") as d:
        _sample_run(Path(d) / "run")
        from pyspark import SparkContext

        from reports.report import build

        build([str(Path(d) / "run")], Path(d) / "report")
        gateway = SparkContext._gateway
        proc = getattr(gateway, "proc", None)
        if proc is None:
            raise RuntimeError("the report's JVM was not started by this process")
        gateway.shutdown()
        proc.stdin.close()  # the gateway JVM exits at the end of its stdin, writing the archive
        proc.wait(timeout=300)
    parts = sorted(archive.parent.glob(f"{archive.name}.*.part"), key=lambda p: p.stat().st_mtime)
    if not parts or parts[-1].stat().st_size == 0:
        raise RuntimeError("the JVM exited without writing a class archive")
    os.replace(parts[-1], archive)
    return archive


def main() -> int:
    """``python3 -m reports.class_archive``: record the archive (scripts/install.sh). A failure is a
    line on stderr and exit 1; reports then run as without an archive."""
    try:
        got = record()
    except Exception as exc:  # noqa: BLE001 - any failure leaves reports as they were
        print(f"class archive not recorded ({type(exc).__name__}: {exc}); reports start without one", file=sys.stderr)
        return 1
    print(f"class archive: {got or archive_path()}" + ("" if got else " (already there)"), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
