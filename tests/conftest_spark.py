"""ONE SparkSession for every Spark test module (import the ``spark`` fixture from here).

``local[2]``, UI off, 2 shuffle partitions, UTC: small and fast on a loaded 2-core box.
Tests are skipped (not failed) when PySpark or Java is missing.
"""

from __future__ import annotations

import pytest

try:
    import pyspark  # noqa: F401

    HAVE_PYSPARK = True
except ImportError:  # pragma: no cover
    HAVE_PYSPARK = False


@pytest.fixture(scope="session")
def spark():  # type: ignore[no-untyped-def]
    if not HAVE_PYSPARK:
        pytest.skip("PySpark is not installed")
    from oop.spark.session import get_spark, java_available

    if java_available() is None:
        pytest.skip("no Java runtime")
    return get_spark("local[2]", app_name="oop-tests", conf={
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
        "spark.sql.execution.arrow.maxRecordsPerBatch": "2000",
    })
