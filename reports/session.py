"""One Spark session per pipeline run: local mode by default, a cluster by configuration only.

``master`` is a Spark master URL (``local[4]``, ``spark://host:7077``, ``yarn``) or a Spark Connect
URL (``sc://host:15002``); nothing else in the pipeline changes. The UI is off unless asked for:
a report run on a CI machine has no one to look at it, and it costs a port and start time.

Quiet by default: the JVM's and Spark's start-up lines (``WARNING: Using incubator
modules``, ``Using Spark's default log4j profile``, NativeCodeLoader, progress bars) are not the
report's findings. The py4j gateway is launched here with its stdout and stderr going to a log file
(:func:`spark_log`), under a log4j2 configuration at WARN, so the console shows only the command's own
lines and the log keeps what a person debugging Spark needs. ``verbose=True`` leaves both alone.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterator

from reports.cds import class_archive_options

#: log4j2 for a quiet session: WARN and above, to the JVM's stderr (which goes to the log file).
QUIET_LOG4J2 = """status = error
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n%ex
logger.parquet.name = org.apache.parquet
logger.parquet.level = error
"""

#: SQL settings of the pipeline's session, in every mode (local, cluster, Spark Connect).
SQL_CONF = {
    "spark.sql.shuffle.partitions": "8",
    "spark.sql.session.timeZone": "UTC",
    # The one pass (reports.groupings) keeps a digest, a set and a struct per case and target:
    # past 128 groups per task Spark would otherwise re-sort every input row by key (35 s instead
    # of 24 s for the pass at a million records). 100k groups of small buffers fit easily.
    "spark.sql.objectHashAggregate.sortBased.fallbackThreshold": "100000",
    # The pipeline hands Spark a list of results files, not folders to discover: past 32 paths
    # Spark would run a listing job on the executors first (1.4 s of a million-record report,
    # 200 files); stat-ing a few thousand named files on the driver is faster.
    "spark.sql.sources.parallelPartitionDiscovery.threshold": "10000",
    # Fewer, larger scan tasks: Spark splits the input into tasks of at most this many bytes, or
    # fewer than one per core when the input is small (its bytes per core); each task builds its
    # own partial aggregation of every case it meets (thousands of groups, each with a digest, a
    # set and a struct), which the reduce side then merges, and the last wave of tasks may leave
    # a core idle. At Spark's default, 128 MB, a million records (809 MB) were 7 tasks on 2 cores;
    # at 1 GB they are one per core. The pass (bench data, 1M records, load 1.5-2.5):
    # 16 MB 19.8 s, 32 MB 18.9 s, 128 MB 17.2 / 17.7 / 17.2 s, 256 MB 16.6 s, 1 GB 14.3 / 15.4 /
    # 15.2 / 15.3 s. A task streams its split line by line, so its size costs no memory.
    "spark.sql.files.maxPartitionBytes": "1g",
}

_log_path: Path | None = None
#: Set when a pipeline run failed: its Spark log outlives the process (named on stderr).
_keep_log = False


def _remove_log(folder: Path) -> None:
    """At exit (the JVM writes to the log as long as the process lives): a clean run leaves no temp folder."""
    if not _keep_log:
        shutil.rmtree(folder, ignore_errors=True)


def spark_log() -> Path | None:
    """Where the quiet session's JVM output went (None when it printed to the console)."""
    return _log_path


def spark_session(master: str | None = None, *, ui: bool = False, app: str = "conformance-report", verbose: bool = False) -> Any:
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
            remote = SparkSession.builder.remote(master).appName(app).getOrCreate()
        except ImportError as exc:
            raise UsageError(f"Spark Connect ({master}) needs pip install 'pyspark[connect]': {exc}") from None
        for key, value in SQL_CONF.items():  # the server's session is ours to set; its JVM is not
            remote.conf.set(key, value)
        return remote
    if not (os.environ.get("JAVA_HOME") or shutil.which("java")):
        raise UsageError("Spark needs Java 17+ (apt-get install openjdk-17-jre-headless) or a Spark Connect URL (--spark-master sc://...)")
    builder = (
        SparkSession.builder.master(master).appName(app)
        .config("spark.ui.enabled", str(ui).lower())
        .config("spark.driver.memory", os.environ.get("CONFORMANCE_SPARK_DRIVER_MEMORY", "4g"))
        .config("spark.ui.showConsoleProgress", "false")
        # the throughput collector: a report is one batch, and on 2 cores G1's concurrent work
        # competed with the JSON parse (1M records: the pass 19.6-19.9 s with G1, 17.6-19.2 s with it)
        .config("spark.driver.extraJavaOptions", " ".join(["-XX:+UseParallelGC", *class_archive_options(create=not verbose)]))
    )
    for key, value in SQL_CONF.items():
        builder = builder.config(key, value)
    if not verbose:
        _launch_quiet_gateway(builder)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _launch_quiet_gateway(builder: Any) -> None:
    """Start the JVM ourselves, its output into a log file, before the builder would start it on the
    console. Only the JVM launch can be silenced this way: ``WARNING: Using incubator modules`` is
    printed by the JVM before any logging is configured. A gateway that already exists (a session
    kept across tests, PYSPARK_GATEWAY_PORT) is left as it is."""
    global _log_path, _keep_log
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None or "PYSPARK_GATEWAY_PORT" in os.environ:
        return
    folder = Path(tempfile.mkdtemp(prefix="conformance-spark-"))
    props = folder / "log4j2.properties"
    props.write_text(QUIET_LOG4J2)
    conf = SparkConf(loadDefaults=False)
    conf.setAll(list(builder._options.items()))
    java_opts = " ".join(filter(None, [conf.get("spark.driver.extraJavaOptions"), f"-Dlog4j2.configurationFile=file:{props}"]))
    conf.set("spark.driver.extraJavaOptions", java_opts)
    builder.config("spark.driver.extraJavaOptions", java_opts)
    atexit.register(_remove_log, folder)
    log = folder / "spark.log"
    _log_path = log
    try:
        with log.open("ab") as sink:  # the child keeps its own descriptor; ours closes at once
            gateway = launch_gateway(conf, popen_kwargs={"stdout": sink, "stderr": sink})
    except Exception as exc:  # the JVM's complaint is in the log we took from the console: say where
        from conformance.errors import UsageError

        _keep_log = True
        last = (log.read_text(errors="replace").strip().splitlines() or [type(exc).__name__])[-1]
        raise UsageError(f"Spark's JVM did not start ({last[:200]}); its log: {log}") from None
    SparkContext._ensure_initialized(gateway=gateway, conf=conf)


@contextlib.contextmanager
def spark_run(master: str | None = None, *, verbose: bool = False) -> Iterator[Any]:
    """The pipeline run's session, stopped at the end (kept when CONFORMANCE_KEEP_SPARK is set: a
    test session shares one JVM across its tests)."""
    spark = spark_session(master, verbose=verbose)
    try:
        yield spark
    except BaseException:
        global _keep_log
        if _log_path is not None:  # the evidence of what Spark did stays, and the error says where
            _keep_log = True
            print(f"report: Spark's own log: {_log_path}", file=sys.stderr)
        raise
    finally:
        if not os.environ.get("CONFORMANCE_KEEP_SPARK"):
            spark.stop()
