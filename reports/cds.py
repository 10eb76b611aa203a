"""The driver JVM's class-data-sharing (CDS) archive: where it lives, and the JVM options that map it
or record it.

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
