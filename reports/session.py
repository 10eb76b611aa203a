"""One Spark session per pipeline run: local mode by default, a cluster by configuration only.

``master`` is a Spark master URL (``local[4]``, ``spark://host:7077``, ``yarn``) or a Spark Connect
URL (``sc://host:15002``); nothing else in the pipeline changes. The UI is off unless asked for:
a report run on a CI machine has no one to look at it, and it costs a port and start time.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from typing import Any, Iterator


def spark_session(master: str | None = None, *, ui: bool = False, app: str = "conformance-report") -> Any:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", os.environ.get("PYSPARK_PYTHON", "python3"))
    try:
        from pyspark.sql import SparkSession
    except ImportError as exc:  # pragma: no cover - pyspark is a dependency
        from conformance.errors import UsageError

        raise UsageError(f"the report pipeline needs pyspark ({exc}); run scripts/install.sh") from None
    from conformance.errors import UsageError

    master = master or os.environ.get("CONFORMANCE_SPARK_MASTER") or "local[*]"
    if master.startswith("sc://"):
        try:
            return SparkSession.builder.remote(master).appName(app).getOrCreate()
        except ImportError as exc:
            raise UsageError(f"Spark Connect ({master}) needs pip install 'pyspark[connect]': {exc}") from None
    if not (os.environ.get("JAVA_HOME") or shutil.which("java")):
        raise UsageError("Spark needs Java 17+ (apt-get install openjdk-17-jre-headless) or a Spark Connect URL (--spark-master sc://...)")
    builder = (
        SparkSession.builder.master(master).appName(app)
        .config("spark.ui.enabled", str(ui).lower())
        .config("spark.sql.shuffle.partitions", "8")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", os.environ.get("CONFORMANCE_SPARK_DRIVER_MEMORY", "4g"))
        .config("spark.ui.showConsoleProgress", "false")
    )
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


@contextlib.contextmanager
def spark_run(master: str | None = None) -> Iterator[Any]:
    """The pipeline run's session, stopped at the end (kept when CONFORMANCE_KEEP_SPARK is set: a
    test session shares one JVM across its tests)."""
    spark = spark_session(master)
    try:
        yield spark
    finally:
        if not os.environ.get("CONFORMANCE_KEEP_SPARK"):
            spark.stop()
