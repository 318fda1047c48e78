"""SparkSession plumbing for ``oop.spark`` (DESIGN §7).

:func:`get_spark` returns the active session when there is one (under
``spark-submit`` the cluster's session wins) and otherwise builds an embedded
one, ``local[*]`` by default, tuned for the engine: Arrow on, the UI off,
session time zone UTC (so timestamp columns are epoch-based everywhere), and
a small ``spark.sql.shuffle.partitions`` unless told otherwise.

Errors a user can fix -- no Java, a bad master URL -- become one-line
:class:`~oop.spark.errors.SparkUnavailableError` messages instead of JVM
stack traces. :func:`spark_errors` turns Spark's analysis errors (unknown
column, unreadable file, corrupt Parquet) into :mod:`oop.errors` classes.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
from typing import TYPE_CHECKING, Iterator, Mapping

from oop.errors import ConfigError, UnknownColumnError
from oop.spark.errors import SparkInputError, SparkUnavailableError

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

__all__ = ["get_spark", "java_available", "spark_errors", "DEFAULT_CONF"]

#: settings of an embedded session (a session that already exists is left alone)
DEFAULT_CONF: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.execution.arrow.maxRecordsPerBatch": "65536",  # rows per JVM<->Python batch
    "spark.sql.shuffle.partitions": "4",
    # file splits of 16 MB (default 128 MB): shard()/replay sort each split by arrival in the
    # JVM heap; two concurrent 5M-row splits took a 2 GB local driver to OutOfMemoryError
    "spark.sql.files.maxPartitionBytes": "16m",
    "spark.driver.memory": "2g",
    "spark.sql.adaptive.enabled": "false",  # keep the requested shard partitioning
    "spark.driver.extraJavaOptions": "-Dlog4j2.level=ERROR",
    "spark.sql.streaming.forceDeleteTempCheckpointLocation": "true",
    "spark.python.worker.reuse": "true",
}


def java_available() -> str | None:
    """The java executable Spark would use (``$JAVA_HOME/bin/java`` or ``java`` on PATH)."""
    home = os.environ.get("JAVA_HOME")
    if home:
        exe = os.path.join(home, "bin", "java")
        if os.path.exists(exe):
            return exe
    return shutil.which("java")


def get_spark(
    master: str | None = None,
    app_name: str = "oop",
    conf: Mapping[str, str] | None = None,
) -> "SparkSession":
    """The active SparkSession, or a new embedded one on ``master`` (default ``local[*]``).

    Under ``spark-submit`` the submit's ``--master`` wins over ``master``.

    Raises :class:`SparkUnavailableError` (one line) when PySpark is not
    installed, no Java is found, or the JVM does not start.
    """
    try:
        from pyspark.sql import SparkSession
    except ImportError as e:  # pragma: no cover - depends on the install
        raise SparkUnavailableError(
            "PySpark is not installed; install the spark extra: pip install -e '.[spark]'"
        ) from e
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    if java_available() is None:
        raise SparkUnavailableError(
            "no Java found: Spark needs a Java 17 runtime; install one (e.g. apt-get install "
            "openjdk-17-jre-headless) and set JAVA_HOME or put java on PATH"
        )
    if master is not None and not re.match(r"^(local(\[(\*|\d+)(,\d+)?\])?|spark://|yarn|k8s://|mesos://)", master):
        raise ConfigError(
            f"Spark master {master!r} is not a master URL; use local[*], local[N], "
            "spark://HOST:PORT, yarn or k8s://..."
        )
    builder = SparkSession.builder.appName(app_name)
    if os.environ.get("PYSPARK_GATEWAY_PORT"):
        master = None  # launched by spark-submit: its --master (and conf) win
    if master is not None:
        builder = builder.master(master)
    elif not os.environ.get("SPARK_MASTER") and "spark.master" not in (conf or {}):
        builder = builder.master("local[*]")
    for k, v in {**DEFAULT_CONF, **(conf or {})}.items():
        builder = builder.config(k, v)
    try:
        spark = builder.getOrCreate()
    except Exception as e:  # the JVM gateway failed: report it in one line
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise SparkUnavailableError(f"Spark did not start on master {master!r}: {first}") from e
    spark.sparkContext.setLogLevel("ERROR")
    return spark


_MISSING_COL = re.compile(r"(?:UNRESOLVED_COLUMN|cannot be resolved|cannot resolve)", re.I)


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    line = text.splitlines()[0] if text else type(e).__name__
    return line[:500]


@contextlib.contextmanager
def spark_errors(what: str) -> Iterator[None]:
    """Re-raise Spark/Py4J errors met while doing ``what`` as one-line :mod:`oop.errors`."""
    try:
        yield
    except Exception as e:
        from oop.errors import OopError

        if isinstance(e, OopError):
            raise
        name = type(e).__name__
        msg = _first_line(e)
        if name in ("AnalysisException",) or "AnalysisException" in name:
            if _MISSING_COL.search(str(e)):
                raise UnknownColumnError(f"{what}: {msg}") from e
            if "PATH_NOT_FOUND" in str(e) or "Path does not exist" in str(e):
                raise FileNotFoundError(f"{what}: {msg}") from e
            raise SparkInputError(f"{what}: {msg}") from e
        if name in ("Py4JJavaError", "SparkRuntimeException", "PythonException",
                    "SparkException", "IllegalArgumentException", "UnknownException",
                    "SparkUpgradeException", "ArithmeticException",
                    "Py4JError", "NumberFormatException"):
            # the interesting part: a Python error raised in a task, the stage failure, or the
            # innermost Java cause -- one line
            text = str(e)
            detail = msg
            py = re.findall(r"^\s*(?:oop\.\S+\.)?([A-Z]\w*(?:Error|Exception)): (.+)$", text, re.M)
            oop_err = [f"{n}: {m}" for n, m in py if n in (
                "UnknownColumnError", "TimeTypeError", "ConfigError", "LateTupleError",
                "NullTimeError", "PunctuationOrderError", "SchemaMismatchError", "EmptyInputError")]
            stage = re.search(r"Job aborted due to stage failure: (?:.*?\): )?([^\n]+)", text)
            causes = re.findall(r"Caused by: ([^\n]+)", text)
            if oop_err:
                detail = oop_err[-1]
            elif stage:
                detail = stage.group(1)
            elif causes:
                detail = causes[-1]
            raise SparkInputError(f"{what}: {detail[:500]}") from e
        raise
