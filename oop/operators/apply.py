"""Apply: add or replace columns computed from each tuple (004 §8.2).

What it computes: ``{t + (c_1 = f_1(t), ..., c_k = f_k(t)) | t in S}`` -- every
tuple extended by (or with its columns overwritten by) the values of
vectorized expressions. Each ``f_i`` is either a ``pyarrow.compute.Expression``
(``pc.field("len") * 8``), evaluated on the whole batch by Arrow's Acero
engine in one call for all expressions, or a callable ``RecordBatch -> array``
(pyarrow or numpy array, or a scalar broadcast to every row); a plain
constant gives a constant column. Expressions see
the *input* columns (they do not see each other's results). Replaced columns
keep their position; new columns are appended in the given order.

On a batch: evaluate, assemble, emit at once. Output column types are fixed
at plan time (by evaluating on an empty batch of the input schema); a result
of another type is cast to it or raises :class:`SchemaMismatchError`.

On a punctuation: forwarded unchanged unless it is on a column the Apply
overwrites. Overwriting a progressing attribute would make its punctuation
false, so it is refused at plan time unless declared monotone:
``monotone={"ts": f}`` with ``f`` non-decreasing maps ``P(ts, v)`` to
``P(ts, f(v))`` (``t.ts >= v`` implies ``f(t.ts) >= f(v)``). Group-wise
punctuation whose key columns are overwritten is dropped (counted in
``metrics.counters["punctuations_dropped"]``).

Purges: nothing (stateless). Cost: O(batch) vectorized per batch (one Acero
project for the expressions), O(1) per punctuation.

>>> import pyarrow as pa, pyarrow.compute as pc, oop
>>> t = pa.table({"ts": [2, 1], "v": [10, 20]})
>>> out = oop.from_arrow(t, time="ts", unit="s").apply(w=pc.field("v") * 2).collect()
>>> out.column("w").to_pylist()
[20, 40]
"""

from __future__ import annotations

import re
from typing import Any, Callable, Mapping, Sequence, Union

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from oop.errors import ConfigError, SchemaMismatchError, UnknownColumnError
from oop.operators.base import Operator, StreamInfo
from oop.stream.elements import Element, GroupPunctuation, JointPunctuation, Punctuation

__all__ = ["Apply", "ColumnFn", "evaluate_expressions", "apply_reference", "missing_field"]

ColumnFn = Union["pc.Expression", Callable[[pa.RecordBatch], Any]]


def evaluate_expressions(
    batch: pa.RecordBatch, exprs: Sequence[pc.Expression], names: Sequence[str]
) -> list[pa.Array]:
    """Evaluate Arrow expressions on a RecordBatch, vectorized (one Acero ``project``).

    Returns one array per expression, each ``batch.num_rows`` long (scalar
    expressions are broadcast). Single-threaded so the row order is kept.

    >>> b = pa.record_batch({"a": [1, 2, 3]})
    >>> [x.to_pylist() for x in evaluate_expressions(b, [pc.field("a") + 1], ["x"])]
    [[2, 3, 4]]
    """
    if not exprs:
        return []
    import pyarrow.acero as acero  # lazily: it loads pyarrow.dataset and pandas (~0.3 s, ~40 MB)

    table = pa.Table.from_batches([batch], schema=batch.schema)
    decl = acero.Declaration.from_sequence([
        acero.Declaration("table_source", acero.TableSourceNodeOptions(table)),
        acero.Declaration("project", acero.ProjectNodeOptions(list(exprs), list(names))),
    ])
    out = decl.to_table(use_threads=False)
    if out.num_rows != batch.num_rows:  # pragma: no cover - a project never changes the row count
        raise AssertionError("Acero project changed the number of rows")
    return [out.column(i).combine_chunks() for i in range(out.num_columns)]


def missing_field(e: Exception) -> str | None:
    """The column name in Arrow's "No match for FieldRef.Name(x)" error, else None."""
    m = re.search(r"No match for FieldRef\.Name\(([^)]*)\)", str(e))
    return m.group(1) if m else None


def raise_if_missing_column(e: Exception, operator: str, what: str, stream: str,
                            columns: Sequence[str]) -> None:
    """Raise :class:`UnknownColumnError` (chained from ``e``) when the Arrow error ``e``
    is about a column the stream does not have; return otherwise.

    ``what`` names the offending part ("an expression", "the predicate").
    """
    col = missing_field(e)
    if col is not None:
        raise UnknownColumnError(
            f"{operator}: {what} refers to column {col!r}, which stream {stream!r} does not "
            f"have; its columns are {list(columns)}"
        ) from e


class Apply(Operator):
    """Add/replace columns by vectorized expressions; see the module docstring."""

    def __init__(
        self,
        columns: Mapping[str, ColumnFn],
        name: str = "apply",
        monotone: Mapping[str, Callable[[int], int]] | None = None,
    ) -> None:
        super().__init__(name)
        if not columns:
            raise ConfigError(f"{self.name}: apply needs at least one column=expression")
        cols: dict[str, ColumnFn] = {}
        for c, f in columns.items():
            if isinstance(f, (int, float, str, bool, pa.Scalar)) and not callable(f):
                f = pc.scalar(f)  # a constant column
            if not isinstance(f, pc.Expression) and not callable(f):
                raise ConfigError(
                    f"{self.name}: column {c!r} must be a pyarrow.compute Expression "
                    f"(e.g. pc.field('v') * 2), a constant, or a callable RecordBatch -> array, "
                    f"got {f!r}"
                )
            cols[c] = f
        self.columns = cols
        self.monotone = dict(monotone or {})
        self._exprs = [(c, f) for c, f in self.columns.items() if isinstance(f, pc.Expression)]
        self._calls = [(c, f) for c, f in self.columns.items() if not isinstance(f, pc.Expression)]
        self._types: dict[str, pa.DataType] = {}
        self._overwritten: set[str] = set()

    # ---- plan time ---------------------------------------------------------
    def infer_output(self, inputs: Sequence[StreamInfo]) -> StreamInfo:
        info = inputs[0]
        self._overwritten = {c for c in self.columns if c in info.schema.names}
        for c in self.monotone:
            if c not in self.columns:
                raise ConfigError(
                    f"{self.name}: monotone mapping given for {c!r} but the apply does not "
                    f"compute that column; it computes {list(self.columns)}"
                )
        for c in self._overwritten & set(info.times):
            if c not in self.monotone:
                raise ConfigError(
                    f"{self.name}: column {c!r} is a progressing attribute of stream "
                    f"{info.name!r}; overwriting it would make its punctuation false. Write the "
                    f"result to a new column, or declare monotone={{{c!r}: f}} with f "
                    "non-decreasing so punctuation values can be mapped"
                )
        empty = info.schema.empty_table().to_batches()
        probe = empty[0] if empty else pa.RecordBatch.from_pylist([], schema=info.schema)
        try:
            arrays = self._compute(probe, info.name, plan_time=True)
        except UnknownColumnError:
            raise
        except Exception as e:  # the expression does not fit the schema
            raise ConfigError(
                f"{self.name}: cannot evaluate the apply on stream {info.name!r} (columns "
                f"{info.schema.names}): {str(e).splitlines()[0] if str(e) else type(e).__name__}; "
                "check column names and types (callables must also "
                "accept an empty batch)"
            ) from e
        self._types = {c: a.type for c, a in arrays.items()}
        fields = [
            pa.field(f.name, self._types[f.name]) if f.name in self._types else f
            for f in info.schema
        ]
        fields += [pa.field(c, self._types[c]) for c in self.columns if c not in info.schema.names]
        schema = pa.schema(fields)
        out = info.with_schema(schema, name=self.name)
        return out

    # ---- evaluation ----------------------------------------------------------
    def _compute(
        self, batch: pa.RecordBatch, stream: str, plan_time: bool = False
    ) -> dict[str, pa.Array]:
        n = batch.num_rows
        out: dict[str, pa.Array] = {}
        if self._exprs:
            try:
                arrays = evaluate_expressions(batch, [e for _, e in self._exprs],
                                              [c for c, _ in self._exprs])
            except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as e:
                raise_if_missing_column(e, self.name, "an expression", stream, batch.schema.names)
                raise
            out.update(zip((c for c, _ in self._exprs), arrays))
        for c, f in self._calls:
            out[c] = self._as_array(c, f(batch), n)
        if not plan_time:
            for c, a in out.items():
                want = self._types[c]
                if a.type != want:
                    try:
                        out[c] = a.cast(want)
                    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                        raise SchemaMismatchError(
                            f"{self.name}: column {c!r} evaluated to {a.type} on stream "
                            f"{stream!r} but the plan fixed it as {want}; make the function "
                            "return one type"
                        ) from e
        return out

    def _as_array(self, c: str, value: Any, n: int) -> pa.Array:
        if isinstance(value, pa.ChunkedArray):
            value = value.combine_chunks()
        if isinstance(value, pa.Array):
            arr = value
        elif isinstance(value, np.ndarray):
            arr = pa.array(value)
        elif isinstance(value, pa.Scalar):
            arr = pa.repeat(value, n)
        elif np.isscalar(value) or value is None:
            arr = pa.repeat(pa.scalar(value), n)
        else:
            arr = pa.array(value)
        if len(arr) != n:
            raise SchemaMismatchError(
                f"{self.name}: column {c!r} evaluated to {len(arr)} values for a batch of {n} "
                "rows; a column function must return one value per row (or a scalar)"
            )
        return arr

    def on_batch(self, batch: pa.RecordBatch, port: int = 0) -> list[Element]:
        assert self.output is not None
        computed = self._compute(batch, self.inputs[0].name)
        arrays = [computed.get(f.name, None) if f.name in computed else batch.column(f.name)
                  for f in self.inputs[0].schema]
        arrays += [computed[c] for c in self.columns if c not in self.inputs[0].schema.names]
        return [pa.RecordBatch.from_arrays(arrays, schema=self.output.schema)]

    # ---- punctuation ---------------------------------------------------------
    def on_punctuation(self, punctuation: Element, port: int = 0) -> list[Element]:
        p = punctuation
        ow = self._overwritten
        if isinstance(p, Punctuation):
            if p.attr not in ow:
                return [p]
            if p.attr in self.monotone:
                return [Punctuation(p.attr, int(self.monotone[p.attr](p.value)))]
        elif isinstance(p, GroupPunctuation):
            if p.attr not in ow and not (set(p.keys.schema.names) & ow):
                return [p]
        elif isinstance(p, JointPunctuation):
            if all(a not in ow or a in self.monotone for a in p.attrs):
                return [JointPunctuation(tuple(
                    (a, int(self.monotone[a](v)) if a in ow else v) for a, v in p.bounds))]
        else:
            return [p]
        self.metrics.count("punctuations_dropped", 1)
        return []


def apply_reference(
    rows: list[dict[str, Any]], functions: Mapping[str, Callable[[dict[str, Any]], Any]]
) -> list[dict[str, Any]]:
    """Tuple-at-a-time reference: each row extended by ``name = f(row)`` (on the input row)."""
    return [{**r, **{c: f(r) for c, f in functions.items()}} for r in rows]
