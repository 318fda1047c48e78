"""PySpark integration (DESIGN §7): replay DataFrames into ``oop`` plans, run plans sharded
over Spark partitions, and check results against Spark SQL.

* :func:`replay` / :func:`replay_stream` -- any DataFrame into an ``oop`` plan on the
  driver, in arrival order, in Arrow batches (:mod:`oop.spark.replay`);
* :func:`shard` -> :class:`ShardedStream` -- rekey / redistribute / reshard / broadcast /
  multicast / query, one ``oop`` plan per shard inside Spark tasks
  (:mod:`oop.spark.sharded`, plans in :mod:`oop.spark.plans`); ``punctuation="ideal"``
  computes each shard's true low-watermark in Spark;
* :func:`shard_files` -- the fast path for Parquet inputs: each Spark task reads its
  files / row groups with pyarrow and runs the first (shard-local) query on them, so
  only that query's output goes through Spark (:mod:`oop.spark.files`);
* :func:`spark_windows` / :func:`compare_windows` -- Spark SQL ground truth and the
  window-by-window report (:mod:`oop.spark.verify`);
* :func:`structured_windows` -- the same query in Structured Streaming
  (:mod:`oop.spark.structured`).

Importing this package does not start a JVM; :func:`get_spark` does.
"""

from oop.spark.errors import SparkInputError, SparkUnavailableError
from oop.spark.files import shard_files
from oop.spark.replay import IDEAL, replay, replay_stream
from oop.spark.session import get_spark, java_available
from oop.spark.sharded import ShardedResult, ShardedStream, shard
from oop.spark.structured import structured_windows
from oop.spark.verify import VerifyReport, compare_windows, spark_windows

__all__ = [
    "get_spark",
    "java_available",
    "replay",
    "replay_stream",
    "IDEAL",
    "shard",
    "shard_files",
    "ShardedStream",
    "ShardedResult",
    "spark_windows",
    "compare_windows",
    "VerifyReport",
    "structured_windows",
    "SparkInputError",
    "SparkUnavailableError",
]
