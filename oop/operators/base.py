"""The operator contract: push-based, columnar, punctuation-driven (DESIGN §3, §5).

An operator has ``n_inputs`` input ports and one output stream. The executor
pushes elements into it and forwards whatever it returns:

* :meth:`Operator.open` -- called once with the :class:`StreamInfo` of each
  input; validates column names and types and returns the output StreamInfo.
* :meth:`Operator.on_batch` -- a ``pyarrow.RecordBatch`` arrived on ``port``;
  return the output elements it releases at once (possibly none).
* :meth:`Operator.on_punctuation` -- a punctuation arrived on ``port``; return
  results it completes, then the punctuation it forwards. State covered by
  the punctuation is purged here.
* :meth:`Operator.on_end` -- ``port`` ended; when every input has ended the
  operator flushes what it holds and the executor appends end-of-stream.
* :meth:`Operator.state_size`, :meth:`Operator.snapshot`,
  :meth:`Operator.restore` -- deterministic state accounting and
  checkpointing at a punctuation boundary.

The executor, not the operator, maintains the common counters of
:class:`~oop.metrics.OperatorMetrics` (tuples/batches/punctuations in and
out, state size and peak, latency). Operators only count late tuples.
Operators must not do per-tuple Python work on batches: use Arrow compute or
numba kernels.
"""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Sequence

import pyarrow as pa

from oop.errors import ConfigError, SchemaMismatchError, UnknownColumnError
from oop.metrics import OperatorMetrics, StateSize
from oop.stream.elements import Element
from oop.stream.late import LatePolicy, split_late

__all__ = ["Operator", "StreamInfo", "require_columns", "require_union_compatible",
           "resolve_window_time"]


@dataclass(frozen=True)
class StreamInfo:
    """What an operator knows about a stream before data flows.

    ``times`` maps each progressing attribute to its unit (``"ms"`` ...).
    ``time`` is the primary progressing attribute (the one sources
    punctuate). ``name`` is used in error messages.
    """

    name: str
    schema: pa.Schema
    times: dict[str, str] = field(default_factory=dict)
    time: str | None = None

    def with_schema(self, schema: pa.Schema, name: str | None = None) -> "StreamInfo":
        """Same progressing attributes that survive in ``schema``, new schema."""
        times = {a: u for a, u in self.times.items() if a in schema.names}
        time = self.time if self.time in times else None
        return replace(self, schema=schema, times=times, time=time, name=name or self.name)

    def unit(self, attr: str | None = None) -> str:
        a = attr or self.time
        if a is None or a not in self.times:
            raise UnknownColumnError(
                f"stream {self.name!r} has no progressing attribute {a!r}; "
                f"it has {sorted(self.times)}"
            )
        return self.times[a]


def require_columns(info: StreamInfo, columns: Sequence[str], operator: str) -> None:
    """Raise :class:`UnknownColumnError` naming the operator when a column is missing."""
    missing = [c for c in columns if c not in info.schema.names]
    if missing:
        raise UnknownColumnError(
            f"{operator}: stream {info.name!r} has no column(s) {missing}; "
            f"its columns are {info.schema.names}"
        )


def resolve_window_time(op_name: str, time_config: str | None, info: StreamInfo) -> str:
    """The progressing attribute a window operator builds its windows on.

    ``time_config`` is the operator's ``time=`` argument: ``None`` takes the
    stream's primary progressing attribute (``info.time``), a name must be
    one of ``info.times`` (windows need punctuation on their attribute to
    close, 004 §5.1.1). Raises :class:`ConfigError` naming the operator, the
    stream, its progressing attributes and the fix. O(1).

    >>> info = StreamInfo("s", pa.schema([("ts", pa.int64()), ("x", pa.int64())]),
    ...                   {"ts": "ms"}, "ts")
    >>> resolve_window_time("agg", None, info)
    'ts'
    >>> resolve_window_time("agg", "x", info)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    oop.errors.ConfigError: agg: time='x' is not a progressing attribute of stream 's'; ...
    """
    if time_config is None:
        if info.time is None:
            raise ConfigError(
                f"{op_name}: stream {info.name!r} has no progressing attribute to window on "
                "(declare one with a source's time= or Stream.derive_time)"
            )
        return info.time
    if time_config not in info.times:
        raise ConfigError(
            f"{op_name}: time={time_config!r} is not a progressing attribute of stream "
            f"{info.name!r}; its progressing attributes are {sorted(info.times)} (derive one "
            "with Stream.derive_time, or leave time=None for the primary one)"
        )
    return time_config


def require_union_compatible(inputs: Sequence[StreamInfo], operator: str,
                             union: str = "a union") -> None:
    """Raise :class:`SchemaMismatchError` unless all ``inputs`` share input 0's schema and time.

    Used by every n-ary union (Meld, the order-preserving Merge).
    """
    first = inputs[0]
    for i, info in enumerate(inputs[1:], start=1):
        if not info.schema.equals(first.schema, check_metadata=False):
            raise SchemaMismatchError(
                f"{operator}: input {i} (stream {info.name!r}) has schema {info.schema} but "
                f"input 0 (stream {first.name!r}) has {first.schema}; project/cast the inputs "
                "to one schema before the union"
            )
        if info.time != first.time:
            raise SchemaMismatchError(
                f"{operator}: input {i} (stream {info.name!r}) progresses on {info.time!r} "
                f"but input 0 on {first.time!r}; {union} needs one progressing attribute"
            )


class Operator(ABC):
    """Base class of every push-based operator. See the module docstring."""

    n_inputs: int = 1
    # per-run late target: when set, side-output late rows are handed to it as they are
    # routed instead of accumulating in ``side_outputs["late"]`` (set by Stream.sink and
    # Stream.iter_batches on every operator of the plan)
    late_sink: Callable[[pa.RecordBatch], None] | None = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # Record the constructor arguments of every operator (outermost __init__ call
        # only) so that :meth:`fresh` can rebuild it: a plan that already ran is re-run
        # on fresh operators instead of on their spent state.
        super().__init_subclass__(**kwargs)
        init = cls.__dict__.get("__init__")
        if init is None or getattr(init, "_oop_records_ctor", False):
            return

        @functools.wraps(init)
        def __init__(self: "Operator", *args: Any, **kw: Any) -> None:
            if "_ctor" not in self.__dict__:
                self.__dict__["_ctor"] = (args, dict(kw))
            init(self, *args, **kw)

        __init__._oop_records_ctor = True  # type: ignore[attr-defined]
        cls.__init__ = __init__  # type: ignore[method-assign]

    def fresh(self) -> "Operator":
        """A new, unopened operator built with the same constructor arguments."""
        ctor = self.__dict__.get("_ctor")
        if ctor is None:
            raise TypeError(
                f"{self.name}: cannot rebuild this operator for a new run (its constructor "
                "arguments were not recorded); build the plan again"
            )
        args, kw = ctor
        return type(self)(*args, **kw)

    def __init__(self, name: str | None = None) -> None:
        self.name = name or type(self).__name__
        self.metrics = OperatorMetrics(self.name)
        self.inputs: list[StreamInfo] = []
        self.output: StreamInfo | None = None
        self._ended: list[bool] = []
        # side outputs (e.g. late tuples) that the run result exposes by name
        self.side_outputs: dict[str, list[pa.RecordBatch]] = {}

    # ---- lifecycle -------------------------------------------------
    def open(self, inputs: Sequence[StreamInfo]) -> StreamInfo:
        """Validate inputs and return the output StreamInfo. Default: pass input 0 through."""
        if len(inputs) != self.n_inputs and self.n_inputs >= 0:
            raise ValueError(f"{self.name}: expects {self.n_inputs} input(s), got {len(inputs)}")
        self.inputs = list(inputs)
        self._ended = [False] * len(inputs)
        self.output = self.infer_output(self.inputs)
        return self.output

    def infer_output(self, inputs: Sequence[StreamInfo]) -> StreamInfo:
        """The output StreamInfo; override when the schema changes."""
        return inputs[0]

    def check_schema(self, batch: pa.RecordBatch, port: int) -> None:
        """Raise :class:`SchemaMismatchError` when ``batch`` does not match input ``port``."""
        expected = self.inputs[port].schema
        if not batch.schema.equals(expected, check_metadata=False):
            raise SchemaMismatchError(
                f"{self.name}: batch on input {port} (stream {self.inputs[port].name!r}) has "
                f"schema {batch.schema} but the stream declared {expected}; cast the batch "
                "to the declared schema before pushing it"
            )

    # ---- element handlers ------------------------------------------
    @abstractmethod
    def on_batch(self, batch: pa.RecordBatch, port: int = 0) -> list[Element]:
        """Handle a data batch; return the elements released at once."""

    def on_punctuation(self, punctuation: Element, port: int = 0) -> list[Element]:
        """Handle a punctuation. Default (stateless, one input): forward it unchanged."""
        return [punctuation]

    def on_end(self, port: int = 0) -> list[Element]:
        """Input ``port`` ended. Default: when all inputs ended, flush via :meth:`flush`."""
        self._ended[port] = True
        if all(self._ended):
            return self.flush()
        return []

    def flush(self) -> list[Element]:
        """Everything still held, at end of stream. Default: nothing."""
        return []

    def route_late(self, late: pa.RecordBatch, policy: Any, counted_as: str | None = None) -> None:
        """Account for late rows already split off: side-output them under
        ``side_output`` (to :attr:`late_sink` when set, else to ``side_outputs["late"]``),
        and count them under ``counted_as`` (default: the policy's name)."""
        if policy is LatePolicy.SIDE_OUTPUT:
            if self.late_sink is not None:
                self.late_sink(late)
            else:
                self.side_outputs.setdefault("late", []).append(late)
        self.metrics.count_late(counted_as or policy.value, late.num_rows)

    def drop_late_rows(self, batch: pa.RecordBatch, times: Any, bound: int,
                       late: LatePolicy | None, time: str) -> tuple[pa.RecordBatch, Any]:
        """Split off the rows with ``times < bound`` and route them by ``late``.

        ``late=None`` (no policy configured on the operator) drops them and
        counts them as ``late_dropped``; otherwise :class:`LatePolicy` applies
        (``raise`` raises naming the stream and the column). Returns the
        on-time rows and their times (numpy int64). O(rows), vectorized.
        """
        policy = late or LatePolicy.DROP
        on_time, rows, times = split_late(batch, times, bound, policy, self.inputs[0].name, time)
        if rows is not None:
            self.route_late(rows, policy, "late_dropped" if late is None else None)
        return on_time, times

    # ---- state -------------------------------------------------------
    def state_size(self) -> StateSize:
        """Deterministic size of held state. Stateless operators hold nothing."""
        return StateSize()

    def snapshot(self) -> Any:
        """A picklable copy of the state, taken at a punctuation boundary."""
        return {"ended": list(self._ended)}

    def restore(self, state: Any) -> None:
        """Load a :meth:`snapshot` into a freshly opened operator."""
        self._ended = list(state["ended"])

    def _check(self) -> None:
        """Assert internal invariants (stateful operators override)."""
