"""The driver JVM's class archive (reports.cds): mapped when there is one,
recorded only when asked (scripts/install.sh, or CONFORMANCE_SPARK_CDS=1: once by one run, taken by
later runs only once it has been written out), never with CONFORMANCE_SPARK_CDS=0.

Pure decisions on a temporary cache folder; the figures (a million-record report 2-3 s sooner to
its first task) are bench/report_pipeline.py's."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from reports import cds


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CONFORMANCE_SPARK_CDS_DIR", str(tmp_path))
    monkeypatch.setenv("CONFORMANCE_SPARK_CDS", "1")
    return tmp_path


def test_by_default_an_archive_is_mapped_but_never_recorded(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CONFORMANCE_SPARK_CDS")
    assert cds.class_archive_options() == []
    assert list(cache.iterdir()) == []  # nothing recorded, nothing on its way
    archive = cds.archive_path()
    archive.write_bytes(b"archive")  # what scripts/install.sh recorded
    assert cds.class_archive_options() == [f"-XX:SharedArchiveFile={archive}", "-Xshare:auto"]
    monkeypatch.setenv("CONFORMANCE_SPARK_CDS", "0")
    assert cds.class_archive_options() == []


def test_the_first_run_records_and_a_later_one_takes_the_settled_archive(cache: Path) -> None:
    first = cds.class_archive_options()
    assert len(first) == 1 and first[0].startswith("-XX:ArchiveClassesAtExit=") and first[0].endswith(".part")
    part = Path(first[0].split("=", 1)[1])
    part.write_bytes(b"archive")  # what the first JVM wrote as it exited...
    assert cds.class_archive_options() == []  # ...still too fresh to be taken whole, and nobody records a second
    old = time.time() - cds.CDS_SETTLE_S - 5
    os.utime(part, (old, old))
    taken = cds.class_archive_options()
    archive = Path(taken[0].split("=", 1)[1])
    assert taken == [f"-XX:SharedArchiveFile={archive}", "-Xshare:auto"] and archive.read_bytes() == b"archive" and not part.exists()
    assert cds.class_archive_options() == taken  # from now on every run maps it
