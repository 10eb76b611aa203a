"""matrix.parquet and matrix.csv, written by the driver from the cells it already collected.

Why not ``DataFrame.write``: on a cluster or a Spark Connect server, Spark writes where its
executors run, so a report pointed at a remote master left its Parquet and CSV on the cluster's
disks, not in ``--out``. The cells (targets x requirements) are collected anyway, and writing them
here also saves two Spark jobs per report. The folder layout stays Spark's (``matrix.parquet/``
holding one part file), so whatever read those folders before reads them still.
"""

from __future__ import annotations

import csv
import shutil
from pathlib import Path
from typing import Any

#: The matrix's columns and their types (as Spark typed them when it computed the cells: the files
#: read back the same), in order; matrix.parquet leaves out the trace, matrix.csv the texts too.
COLUMNS = (("column", "string"), ("config", "string"), ("product", "string"), ("version", "string"), ("protocol", "string"),
           ("queue_type", "string"), ("requirement", "string"), ("level", "string"), ("area", "string"), ("verdict", "string"),
           ("state", "string"), ("flaky", "boolean"), ("spec_verdict", "string"), ("vendor_verdict", "string"), ("records", "bigint"),
           ("cases", "bigint"), ("runs", "int"), ("passes", "bigint"), ("decided", "bigint"), ("pass_rate", "double"),
           ("case_id", "string"), ("expected", "string"), ("observed", "string"), ("wire_trace", "string"), ("reason", "string"),
           ("citation", "string"))
#: Spark's simple type names -> Arrow types.
_ARROW = {"string": "string", "bigint": "int64", "int": "int32", "double": "float64", "boolean": "bool_"}


def write_tables(cells: list[dict[str, Any]], out: Path, columns: tuple[tuple[str, str], ...] = COLUMNS) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    parquet_cols = [(n, t) for n, t in columns if n != "wire_trace"]
    csv_cols = [n for n, _ in parquet_cols if n not in ("expected", "observed")]
    schema = pa.schema([(n, getattr(pa, _ARROW.get(t, "string"))()) for n, t in parquet_cols])
    table = pa.table({n: [_cast(c.get(n), t) for c in cells] for n, t in parquet_cols}, schema=schema)
    for folder in (out / "matrix.parquet", out / "matrix.csv"):
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
    pq.write_table(table, out / "matrix.parquet" / "part-00000.parquet")
    with (out / "matrix.csv" / "part-00000.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(csv_cols)
        for c in cells:
            w.writerow([_text(c.get(n)) for n in csv_cols])


def _cast(value: Any, spark_type: str) -> Any:
    return value if value is None or spark_type != "string" else str(value)


def _text(value: Any) -> str:
    """A CSV field as Spark's CSV writer gave it (empty for null, true/false)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
