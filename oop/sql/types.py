"""SQL column types -> Arrow types (``CREATE TABLE`` columns and ``CAST``), below both
:mod:`oop.sql.ddl` and :mod:`oop.sql.expr`.
"""

from __future__ import annotations

import pyarrow as pa
from sqlglot import exp

from oop.sql.parse import Script

__all__ = ["arrow_type"]

_TS_UNIT = {0: "s", 3: "ms", 6: "us", 9: "ns"}


def arrow_type(dt: exp.DataType, script: Script, at: exp.Expression | None = None) -> pa.DataType:
    """The Arrow type of a declared SQL column type (errors point at ``at``, else ``dt``)."""
    T = exp.DataType.Type
    params = [int(p.this.name) for p in dt.expressions if isinstance(p, exp.DataTypeParam)
              and isinstance(p.this, exp.Literal)]
    t = dt.this
    if t in (T.TIMESTAMP, T.TIMESTAMPLTZ, T.TIMESTAMPTZ, T.DATETIME):
        p = params[0] if params else 3 if t != T.TIMESTAMP else 6
        if p not in _TS_UNIT:
            raise script.error(f"TIMESTAMP({p}): use precision 0, 3, 6 or 9", at or dt)
        return pa.timestamp(_TS_UNIT[p], "UTC" if t != T.TIMESTAMP and t != T.DATETIME else None)
    simple = {T.BIGINT: pa.int64(), T.INT: pa.int32(), T.SMALLINT: pa.int16(),
              T.TINYINT: pa.int8(), T.DOUBLE: pa.float64(), T.FLOAT: pa.float32(),
              T.TEXT: pa.string(), T.VARCHAR: pa.string(), T.CHAR: pa.string(),
              T.BOOLEAN: pa.bool_(), T.DATE: pa.date32()}
    if t in simple:
        return simple[t]
    if t == T.DECIMAL:
        p, s = (params + [10, 0])[:2] if params else (10, 0)
        return pa.decimal128(p, s)
    raise script.error(f"unsupported column type {dt.sql()!r}", at or dt)
