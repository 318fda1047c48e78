"""The Apache Flink side of ``bench_flink.py``: one PyFlink SQL job, run by a Python that has
PyFlink (``apache-flink``), never by the one that has ``oop``.

    FLINK_PYTHON flink_job.py CSV_FOLDER OUT_FOLDER PARALLELISM tumbling|sliding

Streaming mode, event time: ``ts`` (epoch ms) becomes a ``TIMESTAMP_LTZ(3)`` rowtime with
the watermark ``rt - 5 s`` (``oop replay --punctuation bounded:5s``), time zone UTC, and
the window TVF (``TUMBLE`` 1 s or ``HOP`` 1 s / 10 s) groups by key, ``window_start`` and
``window_end`` into ``COUNT(*)`` and ``SUM(v)``. The input is the folder of headerless CSV
files, read by the filesystem connector; the result is a folder of CSV part files. The
bounded input ends the job: Flink's watermark then goes to the end of time and fires every
window left open, as ``oop`` does at the end of its input.

It prints one JSON line on stdout: the seconds to the job's end, and the CPU seconds and
peak RSS of the JVM that PyFlink started (a child of this process, which ``wait4`` of the
benchmark would not see: it is killed, not waited for, when this process exits).
"""

from __future__ import annotations

import json
import os
import sys
import time


def jvm_usage() -> dict[str, float]:
    """CPU seconds (user + sys) and peak RSS (MiB) of this process's child processes."""
    tick = os.sysconf("SC_CLK_TCK")
    cpu, rss = 0.0, 0.0
    for tid in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{tid}/children") as f:
            children = f.read().split()
        for pid in children:
            try:
                with open(f"/proc/{pid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                cpu += (int(fields[11]) + int(fields[12])) / tick
                with open(f"/proc/{pid}/status") as f:
                    for line in f:
                        if line.startswith("VmHWM:"):
                            rss += int(line.split()[1]) / 1024
            except OSError:
                continue
    return {"jvm_cpu_s": cpu, "jvm_peak_rss_mb": rss}


def main(src: str, out: str, parallelism: int, query: str) -> None:
    t0 = time.perf_counter()
    from pyflink.table import EnvironmentSettings, TableEnvironment

    env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    conf = env.get_config()
    conf.set("parallelism.default", str(parallelism))
    conf.set("table.local-time-zone", "UTC")
    env.execute_sql(f"""CREATE TABLE src (ts BIGINT, `key` BIGINT, v DOUBLE,
        rt AS TO_TIMESTAMP_LTZ(ts, 3), WATERMARK FOR rt AS rt - INTERVAL '5' SECOND)
        WITH ('connector' = 'filesystem', 'path' = '{src}', 'format' = 'csv')""")
    env.execute_sql(f"""CREATE TABLE snk (`key` BIGINT, window_start TIMESTAMP(3),
        `count` BIGINT, sum_v DOUBLE)
        WITH ('connector' = 'filesystem', 'path' = '{out}', 'format' = 'csv')""")
    window = ("TUMBLE(TABLE src, DESCRIPTOR(rt), INTERVAL '1' SECOND)" if query == "tumbling"
              else "HOP(TABLE src, DESCRIPTOR(rt), INTERVAL '1' SECOND, INTERVAL '10' SECOND)")
    env.execute_sql(f"""INSERT INTO snk
        SELECT `key`, CAST(window_start AS TIMESTAMP(3)), COUNT(*), SUM(v)
        FROM TABLE({window}) GROUP BY `key`, window_start, window_end""").wait()
    print(json.dumps({"job_s": time.perf_counter() - t0, **jvm_usage()}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4])
