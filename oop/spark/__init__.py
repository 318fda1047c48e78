"""PySpark integration (DESIGN §7): replay DataFrames into ``oop`` plans, run plans sharded
over Spark partitions, and check results against Spark SQL.

Importing this package does not start a JVM; :func:`get_spark` does.
"""

from oop.spark.errors import SparkInputError, SparkUnavailableError
from oop.spark.replay import IDEAL, replay, replay_stream
from oop.spark.session import get_spark, java_available

__all__ = [
    "get_spark",
    "java_available",
    "replay",
    "replay_stream",
    "IDEAL",
    "SparkInputError",
    "SparkUnavailableError",
]
