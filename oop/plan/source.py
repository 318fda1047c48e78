"""Sources: where a disordered feed enters the engine.

A :class:`Source` replays a feed -- an iterable of ``pyarrow.RecordBatch``
(optionally interleaved with :class:`~oop.stream.elements.Punctuation`
records carried by the feed itself) -- in arrival order. For each batch it:

1. checks the schema against the stream's schema (the first batch's, or
   the declared one) and the time column's nulls;
2. splits off *late* rows -- those below the last punctuation this source
   emitted -- and applies the late policy (drop with a count, side output,
   raise; ``update`` forwards them, counted as ``late_forwarded``, for a
   window that revises its results); null-time rows go the same way
   (``drop``/``raise``/``update`` raise);
3. emits the on-time batch at once (no waiting for order);
4. asks the punctuation generator for a new bound and emits
   ``P(time, v)`` if it grew (never a duplicate, never backwards).

Accounting: ``tuples_in == tuples_out + late (dropped or routed)``.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator

import pyarrow as pa

from oop.errors import (
    ConfigError,
    EmptyInputError,
    NullTimeError,
    PunctuationOrderError,
    SchemaMismatchError,
)
from oop.operators.base import Operator, StreamInfo
from oop.progress.watermark import HighWatermark, LowWatermark, time_bounds
from oop.punctuation.base import GeneratorConfig, PunctuationGenerator
from oop.punctuation.ordered import Ordered
from oop.stream.elements import INT64_MIN, Element, Punctuation
from oop.stream.late import LatePolicy, split_late
from oop.stream.timecol import TimeSpec, check_time_column, null_time_mask, time_values

__all__ = ["Source", "FeedItem"]

FeedItem = pa.RecordBatch | Punctuation


def _one_line(schema: pa.Schema) -> str:
    """``ts: int64, v: string`` -- a schema on one line, for error messages."""
    return ", ".join(f"{f.name}: {f.type}" for f in schema)


class Source(Operator):
    """A feed replayed in arrival order, with punctuation and a late policy.

    ``feed`` is a zero-argument callable returning a fresh iterable of feed
    items, so a checkpointed run can be resumed by skipping what was consumed.
    """

    n_inputs = 0

    def __init__(
        self,
        feed: Callable[[], Iterable[FeedItem]],
        *,
        time: str,
        unit: str = "ms",
        punctuation: GeneratorConfig | None = None,
        late: LatePolicy | str = LatePolicy.DROP,
        schema: pa.Schema | None = None,
        name: str = "source",
        resumable: bool = True,
    ) -> None:
        super().__init__(name)
        self.feed = feed
        self.time = time
        self.unit = unit
        self.punctuation_config = punctuation or Ordered()
        self.late_policy = LatePolicy.parse(late)
        self.declared_schema = schema
        self.resumable = resumable
        self.generator: PunctuationGenerator | None = None
        self.lwm = LowWatermark(time, stream=name)
        self.hwm = HighWatermark(time)
        self.position = 0  # feed items consumed
        self._iter: Iterator[FeedItem] | None = None
        self._first: FeedItem | None = None
        self.exhausted = False

    # ---- opening: the schema comes from the declaration or the first batch --
    def open(self, inputs: Any = ()) -> StreamInfo:
        schema = self.declared_schema
        self._iter = iter(self.feed())
        if schema is None:
            for item in self._iter:
                self._first = item
                if isinstance(item, pa.RecordBatch):
                    schema = item.schema
                    break
            if schema is None:
                raise EmptyInputError(
                    f"source {self.name!r}: the input has no batches and no schema was declared; "
                    "pass schema=... to replay an empty input"
                )
        spec = check_time_column(schema, self.time, self.name)
        if spec is not None:  # Arrow timestamp: its own unit wins
            self.unit = spec.unit
        tspec = TimeSpec(self.time, self.unit)
        self.generator = self.punctuation_config.build(tspec)
        self.inputs = []
        self._ended = []
        self.output = StreamInfo(self.name, schema, {self.time: self.unit}, self.time)
        return self.output

    @property
    def time_spec(self) -> TimeSpec:
        return TimeSpec(self.time, self.unit)

    # ---- pulling -----------------------------------------------------
    def skip(self, n: int) -> None:
        """Skip the first ``n`` feed items (resume after a checkpoint)."""
        for _ in range(n - self.position):
            if self._next() is None:
                break

    def _next(self) -> FeedItem | None:
        if self._first is not None:
            item, self._first = self._first, None
        else:
            assert self._iter is not None
            item = next(self._iter, None)
        if item is None:
            self.exhausted = True
        else:
            self.position += 1
        return item

    def pull(self) -> list[Element] | None:
        """Read one feed item; return the elements it produces, or None at the end."""
        item = self._next()
        if item is None:
            return None
        if isinstance(item, Punctuation):
            return self._external_punctuation(item)
        if not isinstance(item, pa.RecordBatch):
            raise TypeError(
                f"source {self.name!r}: feed item {self.position} is {type(item).__name__}; "
                "feeds yield pyarrow.RecordBatch or oop.Punctuation"
            )
        return self.on_batch(item)

    def _external_punctuation(self, p: Punctuation) -> list[Element]:
        if p.attr != self.time:
            raise PunctuationOrderError(
                f"source {self.name!r}: feed punctuation on {p.attr!r} but the stream's "
                f"progressing attribute is {self.time!r}"
            )
        return self._punctuate(p.value, strict=True)

    def _punctuate(self, v: int | None, strict: bool = False) -> list[Element]:
        if v is None:
            return []
        grew = self.lwm.advance(v) if strict else self.lwm.try_advance(v)
        return [Punctuation(self.time, self.lwm.value)] if grew else []

    # ---- the batch path ---------------------------------------------
    def on_batch(self, batch: pa.RecordBatch, port: int = 0) -> list[Element]:
        assert self.output is not None and self.generator is not None
        if not batch.schema.equals(self.output.schema, check_metadata=False):
            raise SchemaMismatchError(
                f"source {self.name!r}: batch {self.position} has schema "
                f"({_one_line(batch.schema)}) but the stream's schema is "
                f"({_one_line(self.output.schema)}); give every batch the same schema "
                "(cast it) or split the feed into separate sources"
            )
        self.metrics.tuples_in += batch.num_rows  # sources count their own input
        self.metrics.batches_in += 1
        out: list[Element] = []
        batch = self._route_null_times(batch)
        times = time_values(batch, self.time, self.name)
        bound = self.lwm.value
        extra = self.generator.late_bound()
        if extra is not None and extra > bound:
            bound = extra
        lo, hi = time_bounds(times) if len(times) else (bound, INT64_MIN)
        fast = lo >= bound
        if fast:
            # fast path (one fused min/max pass): nothing in the batch is late
            on_time = batch
            if hi > self.hwm.value:
                self.hwm.value = hi
        elif self.late_policy is LatePolicy.UPDATE:
            # late tuples are forwarded: a downstream operator with late="update"
            # revises the results they belong to (or counts them late itself)
            late_times = times[times < bound]
            self.generator.on_late(late_times)
            self.metrics.count("late_forwarded", len(late_times))
            on_time = batch
            self.hwm.observe(times)
        else:
            all_times = times
            on_time, late, times = split_late(
                batch, times, bound, self.late_policy, self.name, self.time
            )
            if late is not None:
                self.generator.on_late(all_times[all_times < bound])
                self._route_late(late)
            if on_time.num_rows:
                self.hwm.observe(times)
        if on_time.num_rows:
            out.append(on_time)
        if fast and len(times):
            v = self.generator.on_batch_stats(on_time, times, lo, hi)
        else:
            v = self.generator.on_batch(on_time, times)
        out.extend(self._punctuate(v))
        gauges = self.generator.gauges()
        if gauges:
            self.metrics.gauges.update(gauges)
        return out

    def _route_null_times(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        mask = null_time_mask(batch, self.time)
        if mask is None:
            return batch
        if self.late_policy is not LatePolicy.SIDE_OUTPUT:
            raise NullTimeError(
                f"source {self.name!r}: {int(mask.sum())} row(s) of batch {self.position} have a "
                f"null {self.time!r}; fill or filter them first, or choose late='side_output' "
                "to route them to the late stream"
            )
        self._route_late(batch.filter(pa.array(mask)))
        return batch.filter(pa.array(~mask))

    def _route_late(self, late: pa.RecordBatch) -> None:
        self.route_late(late, self.late_policy)

    def on_idle(self, clock: int) -> list[Element]:
        assert self.generator is not None
        out = self._punctuate(self.generator.on_idle(clock))
        gauges = self.generator.gauges()
        if gauges:
            self.metrics.gauges.update(gauges)
        return out

    def flush(self) -> list[Element]:
        return []

    def fresh(self) -> "Source":
        """A new, unopened source over the same feed (for running a plan again)."""
        if not self.resumable:
            raise ConfigError(
                f"source {self.name!r} reads a one-shot Python iterator that an earlier run "
                "consumed; build the stream again with a new iterator, or use from_batches / "
                "from_arrow / from_parquet to run it more than once"
            )
        return super().fresh()  # type: ignore[return-value]

    # ---- checkpointing ----------------------------------------------
    def snapshot(self) -> Any:
        assert self.generator is not None
        return {
            "position": self.position,
            "exhausted": self.exhausted,
            "lwm": self.lwm.value,
            "hwm": self.hwm.value,
            "generator": self.generator.snapshot(),
            "late": {k: list(v) for k, v in self.side_outputs.items()},
        }

    def restore(self, state: Any) -> None:
        assert self.generator is not None
        if not self.resumable:
            raise ValueError(
                f"source {self.name!r} reads a one-shot Python iterator and cannot resume; "
                "build it from a table, a list of batches or a Parquet path instead"
            )
        self.skip(state["position"])
        # an exhausted source already sent end-of-stream: do not send it twice on resume
        self.exhausted = bool(state.get("exhausted", self.exhausted))
        self.lwm.value = state["lwm"]
        self.hwm.value = state["hwm"]
        self.generator.restore(state["generator"])
        self.side_outputs = {k: list(v) for k, v in state["late"].items()}

    def _check(self) -> None:
        m = self.metrics
        assert m.tuples_in == m.tuples_out + m.late_total, (m.tuples_in, m.tuples_out, m.late)


