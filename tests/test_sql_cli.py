"""oop.sql: EXPLAIN output, one-line errors with line:col, the ``oop sql`` command, and the
code blocks of docs/sql.md."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import oop
from oop.cli import main
from oop.sql import SqlError, plan_sql

from _doc_blocks import code_blocks, run_shell

T = pa.table({"ts": [1000, 3000, 2000, 12000], "k": ["a", "b", None, "a"], "v": [1.0, 2.0, 3.0, None]})
D = ("CREATE TABLE t (ts BIGINT, k STRING, v DOUBLE, WATERMARK FOR ts AS ts - INTERVAL '1' "
     "SECOND) WITH ('time-unit' = 'ms');\n")
U = D.replace("TABLE t", "TABLE u")
W = "FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '1' SECOND))"


# ---- EXPLAIN -----------------------------------------------------------------------
def test_explain_names_operators_methods_and_punctuation() -> None:
    text = oop.sql(D + U + """EXPLAIN SELECT k, window_start, COUNT(*) AS n, MAX(v) AS mv
        FROM TABLE(HOP(TABLE j, DESCRIPTOR(ts), INTERVAL '1' SECOND, INTERVAL '4' SECOND))
        GROUP BY window_start, window_end, k""".replace("TABLE j", "TABLE t"), {"t": T})
    assert isinstance(text, str) and text.startswith("== oop plan (strategy oop) ==")
    assert "window [WindowAggregate]" in text and "Sliding(range=4000, slide=1000" in text
    assert "method: WID or Paned-WID (auto: sliding: the cost model" in text
    assert "t [Source]" in text
    assert "punctuation: Cadence(inner=BoundedDelay(delay='1s'), rows=65536)" in text
    tumble = oop.sql(D + f"EXPLAIN SELECT COUNT(*) AS n {W} GROUP BY window_start, window_end",
                     {"t": T})
    assert "method: WID (auto: tumbling: each tuple is in one window" in tumble
    cum = oop.sql(D + """EXPLAIN PLAN FOR SELECT COUNT(*) AS n FROM TABLE(CUMULATE(TABLE t,
        DESCRIPTOR(ts), INTERVAL '1' SECOND, INTERVAL '3' SECOND)) GROUP BY window_start,
        window_end""", {"t": T})
    assert "Cumulate(step=1000, size=3000" in cum and "method: WID (auto: Cumulate" in cum


def test_explain_analyze_reports_the_choice_and_counts() -> None:
    text = oop.sql(D + """EXPLAIN ANALYZE SELECT window_start, COUNT(*) AS n
        FROM TABLE(HOP(TABLE t, DESCRIPTOR(ts), INTERVAL '1' SECOND, INTERVAL '10' SECOND))
        GROUP BY window_start, window_end""", {"t": T})
    assert "-- analyzed" in text
    assert re.search(r"method: (Paned-WID|WID) \(auto: sliding.*costs \{'cost_wid'", text)
    assert "rows in 4, out 4" in text  # the source


def test_explain_join_and_union() -> None:
    text = oop.sql(D + U + """EXPLAIN SELECT t.k, u.ts AS uts FROM t FULL JOIN u ON t.k = u.k
        AND u.ts BETWEEN t.ts - INTERVAL '1' SECOND AND t.ts + INTERVAL '2' SECOND""",
                   {"t": T, "u": T})
    assert "interval_join [SplitJoin]" in text and "how: full; keys: [('k', 'k_right')]" in text
    assert "range0=1000, range1=2000" in text and "rename: ts_right -> uts" in text
    text = oop.sql(D + U + "EXPLAIN SELECT ts, k FROM t UNION ALL SELECT ts, k FROM u",
                   {"t": T, "u": T})
    assert "union_all [Meld]" in text and text.count("[Source]") == 2


# ---- errors --------------------------------------------------------------------------
ERRORS = [
    (D + "SELECT k FROM t\nORDER BY k", "3:1: ORDER BY is not supported"),
    (D + "SELECT k FROM t LIMIT 3", "2:17: LIMIT is not supported"),
    (D + "SELECT DISTINCT k FROM t", "2:8: SELECT DISTINCT is not supported"),
    (D + "SELECT ts FROM t UNION SELECT ts FROM t", "UNION (distinct) is not supported"),
    (D + "SELECT k FROM t WHERE k IN (SELECT k FROM t)", "2:29: subqueries in expressions"),
    (D + "SELECT ROW_NUMBER() OVER (ORDER BY ts) FROM t", "2:8: OVER windows are not supported"),
    (D + "SELECT k, COUNT(*) FROM t GROUP BY k", "2:27: GROUP BY needs a window TVF"),
    (D + "SELECT COUNT(*) FROM t", "2:8: aggregate COUNT needs a window TVF"),
    (D + U + "SELECT * FROM t JOIN u ON t.k = u.k", "3:27: the join needs both a lower and an "
                                                    "upper bound"),
    (D + U + "SELECT * FROM t CROSS JOIN u", "CROSS joins are not supported"),
    (D + U + "CREATE VIEW j AS SELECT * FROM t JOIN u ON t.k = u.k AND t.ts = u.ts;\n"
     "SELECT j.k FROM j JOIN t AS c ON c.ts BETWEEN j.ts_right AND j.ts_right", "4:47: the join's "
     "time band must be on each input's primary event time (j: 'ts', c: 'ts')"),
    (D + U + "SELECT * FROM t JOIN u ON t.ts > u.ts AND t.ts <= u.ts", "use >= / <="),
    (D + f"SELECT STDDEV_POP(v) AS s {W} GROUP BY window_start, window_end",
     "2:8: unsupported aggregate STDDEV_POP"),
    (D + f"SELECT VAR_POP(v) AS s {W} GROUP BY window_start, window_end", "VAR_POP"),
    (D + f"SELECT PERCENTILE_DISC(0.5) WITHIN GROUP (ORDER BY v) {W} GROUP BY window_start, "
         "window_end", "PERCENTILE_DISC WITHIN GROUP is not supported"),
    (D + f"SELECT k, SUM(v) {W} GROUP BY window_start, window_end",
     "2:8: column 'k' is neither in GROUP BY nor inside an aggregate"),
    (D + f"SELECT COUNT(*) {W} GROUP BY window_start, k", "must list both window_start and"),
    (D + "SELECT COUNT(*) FROM TABLE(SESSION(TABLE t PARTITION BY k, DESCRIPTOR(ts), INTERVAL "
         "'1' SECOND)) GROUP BY window_start, window_end", "2:28: SESSION: PARTITION BY k must"),
    (D + "SELECT COUNT(*) FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(v), INTERVAL '1' SECOND)) "
         "GROUP BY window_start, window_end", "DESCRIPTOR(v) is not an event-time attribute"),
    (D + "SELECT k FROM nope", "2:15: unknown table 'nope'"),
    (D + "SELECT * FROM TABLE(HOP(TABLE t, DESCRIPTOR(ts), INTERVAL '1' SECOND, INTERVAL '2' "
         "SECOND))", "2:21: HOP without GROUP BY is not supported"),
    (D + U + "SELECT * FROM (SELECT * FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '1' "
             "SECOND))) L JOIN (SELECT * FROM TABLE(TUMBLE(TABLE u, DESCRIPTOR(ts), INTERVAL '2'"
             " SECOND))) R ON L.window_start = R.window_start AND L.window_end = R.window_end",
     "a window join needs the same window on both sides"),
    (D + "SELECT t.zz FROM t", "2:8: unknown column 't.zz'"),
    (D + "SELECT k FROM t WHERE foo(k) = 1", "2:23: unsupported function FOO"),
    (D + "SELECT ts + INTERVAL '1' SECOND FROM t", "INTERVAL arithmetic is only supported"),
    (D + "SELECT k FROM t; SELECT k FROM t", "found a second query"),
    (D, "the script has no query"),
    (D + "DROP TABLE t", "2:1: unsupported statement DROP"),
    ("CREATE TABLE t (ts BIGINT, WATERMARK FOR ts AS ts) ; SELECT ts FROM t",
     "needs the option 'time-unit'"),
    ("CREATE TABLE t (ts BIGINT, WATERMARK FOR ts AS ts - 5) WITH ('time-unit'='ms'); "
     "SELECT ts FROM t", "1:42: unsupported WATERMARK expression 'ts - 5'"),
    ("CREATE TABLE t (ts BIGINT, a ARRAY<INT>, WATERMARK FOR ts AS ts) WITH "
     "('time-unit'='ms'); SELECT ts FROM t", "1:28: unsupported column type"),
    ("CREATE TABLE t (ts BIGINT, WATERMARK FOR ts AS ts) WITH ('conector'='x'); SELECT ts "
     "FROM t", "unknown table option 'conector'"),
    (D + "SELECT k FROM t WHERE v >", "2:25: syntax error near '>'"),
    (D + "SELECT k FROM\nt WHERE k = 'a", "3:13: this quote is never closed"),
    ("", "the SQL text is empty"),
]


def test_backticks_quote_identifiers_outside_literals_and_comments() -> None:
    """Flink's backtick identifiers: the same query as unquoted names; a backtick inside a
    string literal or a comment is left alone, and a quote never closed is pointed at."""
    quoted = D + "SELECT `k`, v FROM `t` WHERE k <> 'x`y' -- `c`\n"
    plain = D + "SELECT k, v FROM t WHERE k <> 'x`y'"
    assert oop.sql(quoted, {"t": T}).collect().equals(oop.sql(plain, {"t": T}).collect())
    with pytest.raises(SqlError, match="2:8: this quote is never closed"):
        oop.sql(D + "SELECT `k FROM t", {"t": T})


@pytest.mark.parametrize("script,message", ERRORS)
def test_unsupported_and_bad_sql_give_one_line_with_position(script: str, message: str) -> None:
    with pytest.raises(SqlError) as e:
        r = oop.sql(script, {"t": T, "u": T})
        r.collect()
    text = str(e.value)
    assert message in text and "\n" not in text and re.match(r"^\d+:\d+: ", text), text


def test_in_order_refusals() -> None:
    with pytest.raises(SqlError, match=r"2:8: the in-order strategy iop-sort cannot compute "
                                       r"median"):
        plan_sql(D + f"SELECT MEDIAN(v) AS m {W} GROUP BY window_start, window_end",
                 tables={"t": T}, strategy="iop-sort")
    with pytest.raises(SqlError, match="has no LEFT OUTER join"):
        plan_sql(D + U + """SELECT t.k FROM t LEFT JOIN u ON t.k = u.k AND u.ts BETWEEN t.ts
            AND t.ts + INTERVAL '1' SECOND""", tables={"t": T, "u": T}, strategy="iop-sort")
    with pytest.raises(SqlError, match="has no CUMULATE windows"):
        plan_sql(D + """SELECT COUNT(*) AS n FROM TABLE(CUMULATE(TABLE t, DESCRIPTOR(ts),
            INTERVAL '1' SECOND, INTERVAL '2' SECOND)) GROUP BY window_start, window_end""",
                 tables={"t": T}, strategy="iop-slack:1s")


# ---- the command ----------------------------------------------------------------------
def _write(tmp_path: Path) -> str:
    import pyarrow.parquet as pq

    pq.write_table(T, tmp_path / "t.parquet")
    return (f"CREATE TABLE t (ts BIGINT, k STRING, v DOUBLE, WATERMARK FOR ts AS ts - "
            f"INTERVAL '1' SECOND) WITH ('time-unit' = 'ms', 'path' = '{tmp_path}/t.parquet');\n")


def test_cli_select_prints_csv(tmp_path: Path, capsys: Any) -> None:
    ddl = _write(tmp_path)
    assert main(["sql", "-e", ddl + f"SELECT window_start, COUNT(*) AS n {W} "
                 "GROUP BY window_start, window_end"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == '"window_start","n"' and sorted(out[1:]) == ["1000,1", "12000,1", "2000,1",
                                                                   "3000,1"]


def test_cli_insert_into_sink_and_explain_and_errors(tmp_path: Path, capsys: Any) -> None:
    ddl = _write(tmp_path)
    f = tmp_path / "q.sql"
    f.write_text(ddl + f"CREATE TABLE o (key STRING, n BIGINT, total DOUBLE) WITH ('path' = "
                 f"'{tmp_path}/o.csv');\nINSERT INTO o SELECT k, COUNT(*), SUM(v) "
                 "FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '1' MINUTE)) "
                 "GROUP BY window_start, window_end, k")
    assert main(["sql", "-f", str(f)]) == 0
    lines = (tmp_path / "o.csv").read_text().splitlines()
    assert lines[0] == '"key","n","total"' and sorted(lines[1:]) == ['"a",2,1', '"b",1,2', ',1,3']
    assert main(["sql", "-e", ddl + "EXPLAIN SELECT k FROM t WHERE v > 1"]) == 0
    assert "where [Select]" in capsys.readouterr().out
    assert main(["sql", "-e", ddl + "SELECT k FROM t ORDER BY k"]) == 2
    err = capsys.readouterr().err
    assert err.strip() == "oop: error: 2:17: ORDER BY is not supported (a stream has no end " \
                          "to sort or limit at)"
    assert main(["sql", "-e", ddl + f"SELECT MEDIAN(v) AS m {W} GROUP BY window_start, "
                 "window_end", "--strategy", "iop-sort"]) == 2
    assert "the in-order strategy iop-sort cannot compute median" in capsys.readouterr().err


def test_cli_strategy_and_out(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    ddl = _write(tmp_path)
    q = ddl + f"SELECT k, window_start, COUNT(*) AS n {W} GROUP BY window_start, window_end, k"
    for st in ("oop", "iop-sort"):
        assert main(["sql", "-e", q, "--strategy", st, "--out", str(tmp_path / f"{st}.parquet")]) == 0
    a, b = (pq.read_table(tmp_path / f"{st}.parquet") for st in ("oop", "iop-sort"))
    key = [("window_start", "ascending"), ("k", "ascending")]
    assert a.sort_by(key).equals(b.sort_by(key)) and a.num_rows == 4


def test_cli_table_option_and_missing_inputs(tmp_path: Path, capsys: Any) -> None:
    _write(tmp_path)
    q = D + "SELECT k, v FROM t WHERE v >= 2"
    assert main(["sql", "-e", q, "--table", f"t={tmp_path}/t.parquet"]) == 0
    assert sorted(capsys.readouterr().out.splitlines()[1:]) == ['"b",2', ',3']
    assert main(["sql", "-f", str(tmp_path / "nope.sql")]) == 2
    assert main(["sql", "-e", q, "--table", "t"]) == 2
    assert main(["sql", "-e", q, "--table", f"t={tmp_path}/missing.parquet"]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line]
    assert len(err) == 3 and all(line.startswith("oop: error: ") for line in err), err


# ---- docs/sql.md ---------------------------------------------------------------------
def _blocks(lang: str) -> list[str]:
    return code_blocks("docs/sql.md", lang)


def test_docs_code_blocks(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.chdir(tmp_path)
    ns: dict[str, Any] = {}
    py = _blocks("python")
    assert len(py) >= 6
    for i, code in enumerate(py):
        exec(compile(code, f"docs/sql.md[python {i}]", "exec"), ns)
    for code in _blocks("bash"):
        r = run_shell(code, tmp_path)
        assert r.returncode == 0, r.stderr
    assert (tmp_path / "per_user.csv").read_text().startswith('"user","ws","n"')
    assert (tmp_path / "per_user_iop.parquet").exists()
