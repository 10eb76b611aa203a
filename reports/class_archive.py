"""``python3 -m reports.class_archive``: record the driver JVM's class archive (reports.cds) now.

scripts/install.sh runs it once per machine, so a fresh machine's first report already maps the
archive: a small report goes through every stage in this process, and its JVM writes the archive as
it exits.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from reports.cds import archive_path


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
