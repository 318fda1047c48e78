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

With a cadence (a bound every N rows of the arrival order), a batch with a
cadence point inside is split there for the generator and the late check; when
none of its rows was late (or null-timed, or ahead), it is emitted whole with
its punctuations after it, which is valid because a punctuation only bounds the
tuples after it.

Accounting: ``tuples_in == tuples_out + late (dropped or routed)``.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator

import numpy as np
import pyarrow as pa

from oop.io.protocol import IDLE
from oop.errors import (
    ConfigError,
    EmptyInputError,
    LateTupleError,
    NullTimeError,
    PunctuationOrderError,
    SchemaMismatchError,
)
from oop.operators.base import Operator, StreamInfo
from oop.progress.watermark import HighWatermark, LowWatermark, time_bounds
from oop.punctuation.base import GeneratorConfig, PunctuationGenerator
from oop.punctuation.ordered import Ordered
from oop.stream.elements import INT64_MAX, INT64_MIN, Element, Punctuation
from oop.punctuation.cadence import cadence_of
from oop.stream.late import LatePolicy, split_late
from oop.stream.timecol import TimeSpec, check_time_column, null_time_mask, time_values

_NO_TIMES = np.empty(0, dtype=np.int64)  # for on_batch_stats of a generator not reading them
_NO_TIMES.setflags(write=False)

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
        connector: Any = None,
        max_ahead: str | int | None = None,
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
        self.rows_read = 0  # input rows consumed: the source's offset in rows
        self.cadence: int | None = None
        self._silent = False  # the last pull found a live feed with nothing to deliver
        self.connector = connector  # an oop.io SourceConnector, when the feed polls one
        self.max_ahead_spec = max_ahead
        self.max_ahead: int | None = None  # in the time column's unit, set at open
        self._reset_segment()
        self._iter: Iterator[FeedItem] | None = None
        self._first: FeedItem | None = None
        self.exhausted = False

    # ---- opening: the schema comes from the declaration or the first batch --
    def open(self, inputs: Any = ()) -> StreamInfo:
        schema = self.declared_schema
        self._iter = iter(self.feed())
        if schema is None:
            for item in self._iter:
                if item is IDLE:
                    continue
                self._first = item
                if isinstance(item, pa.RecordBatch):
                    schema = item.schema
                    break
            if schema is None:
                raise EmptyInputError(
                    f"source {self.name!r}: the input has no batches and no schema was declared; "
                    "pass schema=... to replay an empty input"
                )
        dups = sorted({n for n in schema.names if schema.names.count(n) > 1})
        if dups:
            raise SchemaMismatchError(
                f"source {self.name!r}: the input has duplicate column name(s) {dups}; "
                "rename them (e.g. in the CSV header) so that every column can be told apart")
        spec = check_time_column(schema, self.time, self.name)
        if spec is not None:  # Arrow timestamp: its own unit wins
            self.unit = spec.unit
        tspec = TimeSpec(self.time, self.unit)
        config, self.cadence = cadence_of(self.punctuation_config)
        if self.max_ahead_spec is not None:
            self.max_ahead = tspec.duration(self.max_ahead_spec)
            if self.max_ahead < 0:
                raise ConfigError(f"source {self.name!r}: max_ahead must be >= 0, got "
                                  f"{self.max_ahead_spec!r}")
        self.generator = config.build(tspec)
        self._reset_segment()
        self.inputs = []
        self._ended = []
        self.output = StreamInfo(self.name, schema, {self.time: self.unit}, self.time)
        return self.output

    # ---- pulling -----------------------------------------------------
    def skip(self, n: int) -> None:
        """Skip the first ``n`` feed items (resume after a checkpoint of the same chunking)."""
        for _ in range(n - self.position):
            if self._next() is None:
                break

    def skip_rows(self, rows: int, position: int = 0) -> None:
        """Skip the first ``rows`` input rows, whatever the chunking (resume after a checkpoint).

        A batch that straddles the cut is sliced; the rest of it is read next. Feed
        punctuation records before the cut were already applied and are skipped, and so
        are row-less items after it up to feed item ``position`` (the checkpointed run's).
        Cost: reads (and discards) the skipped part of the feed once.
        """
        done = 0
        while done < rows:
            item = self._next()
            if item is None:
                return
            if not isinstance(item, pa.RecordBatch):
                continue
            if done + item.num_rows > rows:
                cut = rows - done
                self._first = item.slice(cut)
                self.position -= 1
                done = rows
            else:
                done += item.num_rows
        self.rows_read = rows
        while self.position < position:  # row-less items the checkpointed run had consumed too
            item = self._next()
            if item is None:
                return
            if isinstance(item, pa.RecordBatch) and item.num_rows:
                self._first = item
                self.position -= 1
                return

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
        self._silent = item is IDLE
        if item is IDLE:  # a live feed has nothing now: close the segment held so far
            return self._close_segment() if self._seg_rows else []
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
        self.rows_read += batch.num_rows
        if self.cadence is None:  # punctuate after every physical batch
            out, _ = self._piece(batch)
            out.extend(self._close_segment())
            return out
        out = []
        start, n = 0, batch.num_rows
        whole = True  # every piece forwarded whole (none had a late, null-time or ahead row)
        while start < n:  # cut at the cadence points: rows k * cadence of the arrival order
            take = min(n - start, self.cadence - self._seg_rows)
            piece = batch if take == n else batch.slice(start, take)
            got, clean = self._piece(piece)
            whole = whole and clean
            out.extend(got)
            self._seg_rows += take
            start += take
            if self._seg_rows >= self.cadence:
                out.extend(self._close_segment())
        if whole and len(out) > 2:
            return _pieces_first(batch, out)
        return out

    def _piece(self, batch: pa.RecordBatch) -> tuple[list[Element], bool]:
        """Split the late rows off ``batch`` (the bound holds until the segment closes),
        forward the on-time rows, and keep their times for the generator. Also says
        whether ``batch`` was forwarded whole (no row late, without a time or ahead)."""
        assert self.generator is not None
        given = batch
        batch = self._route_null_times(batch)
        times = time_values(batch, self.time, self.name)
        if self.max_ahead is not None and self.lwm.value != INT64_MIN and len(times):
            batch, times = self._route_ahead(batch, times)
        on_time_whole = batch is given
        bound = self.lwm.value
        extra = self.generator.late_bound()
        if extra is not None and extra > bound:
            bound = extra
        lo, hi = time_bounds(times) if len(times) else (bound, INT64_MIN)
        clean = lo >= bound and on_time_whole
        if lo >= bound:
            # fast path (one fused min/max pass): nothing in the batch is late
            on_time = batch
            if hi > self.hwm.value:
                self.hwm.value = hi
            if len(times):
                self._seg_lo = min(self._seg_lo, lo)
                self._seg_hi = max(self._seg_hi, hi)
        elif self.late_policy is LatePolicy.UPDATE:
            # late tuples are forwarded: a downstream operator with late="update"
            # revises the results they belong to (or counts them late itself)
            late_times = times[times < bound]
            self._seg_late.append(late_times)
            self.metrics.count("late_forwarded", len(late_times))
            on_time = batch
            self.hwm.observe(times)
            self._seg_exact = False
        else:
            all_times = times
            on_time, late, times = split_late(
                batch, times, bound, self.late_policy, self.name, self.time
            )
            if late is not None:
                self._seg_late.append(all_times[all_times < bound])
                self._route_late(late)
            if on_time.num_rows:
                self.hwm.observe(times)
            self._seg_exact = False
        if on_time.num_rows:
            self._seg_batches.append(on_time)
            self._seg_times.append(times)
            return [on_time], clean
        return [], clean

    def _route_ahead(self, batch: pa.RecordBatch, times: np.ndarray
                     ) -> tuple[pa.RecordBatch, np.ndarray]:
        """The ``max_ahead`` guard: rows further ahead of the punctuation than that (a bad
        clock) do not reach the generator and follow the late policy, counted as ``ahead``."""
        assert self.max_ahead is not None
        limit = self.lwm.value + self.max_ahead
        if int(times.max()) <= limit:
            return batch, times
        mask = times > limit
        if self.late_policy is LatePolicy.RAISE:
            i = int(np.argmax(mask))
            raise LateTupleError(
                f"source {self.name!r}: {self.time}={int(times[i])} is more than max_ahead "
                f"({self.max_ahead_spec}) ahead of the punctuation {self.lwm.value}; fix the "
                "clock of the feed, raise --max-ahead, or choose --late drop or side")
        policy = LatePolicy.SIDE_OUTPUT if self.late_policy is LatePolicy.SIDE_OUTPUT \
            else LatePolicy.DROP
        self.route_late(batch.filter(pa.array(mask)), policy, counted_as="ahead")
        keep = ~mask
        return batch.filter(pa.array(keep)), times[keep]

    def _close_segment(self) -> list[Element]:
        """Give the segment's rows to the generator (late ones first) and punctuate."""
        assert self.generator is not None
        late, batches, times_l = self._seg_late, self._seg_batches, self._seg_times
        exact, lo, hi = self._seg_exact, self._seg_lo, self._seg_hi
        self._reset_segment()
        for t in late:
            if len(t):
                self.generator.on_late(t)
        if not batches:
            v = None
        else:
            g = self.generator
            stats = exact and lo <= hi  # the on-time rows' bounds are known (and some exist)
            if len(batches) == 1:
                batch, times = batches[0] if g.reads_rows else None, times_l[0]
            else:  # columns and times are concatenated only for a generator that reads them
                batch = pa.concat_batches(batches) if g.reads_rows else None
                times = _NO_TIMES if stats and not g.reads_times else np.concatenate(times_l)
            v = g.on_batch_stats(batch, times, lo, hi) if stats else g.on_batch(batch, times)
        out = self._punctuate(v)
        gauges = self.generator.gauges()
        if gauges:
            self.metrics.gauges.update(gauges)
        return out

    def _reset_segment(self) -> None:
        self._seg_rows = 0
        self._seg_late: list[np.ndarray] = []
        self._seg_batches: list[pa.RecordBatch] = []
        self._seg_times: list[np.ndarray] = []
        self._seg_exact = True  # no late rows: lo/hi are the on-time rows' bounds
        self._seg_lo = INT64_MAX
        self._seg_hi = INT64_MIN

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
        """The executor saw no elements from this source in a round. With a cadence, only a
        live feed that really had nothing (its connector said IDLE) asks the generator:
        a round of late or empty batches is not silence, and must not move punctuation
        in a way that depends on the chunking."""
        assert self.generator is not None
        if self.cadence is not None and not self._silent:
            return []
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
            "rows": self.rows_read,
            "offset": None if self.connector is None else self.connector.offset(),
            "exhausted": self.exhausted,
            "lwm": self.lwm.value,
            "hwm": self.hwm.value,
            "generator": self.generator.snapshot(),
            "segment": {
                "rows": self._seg_rows, "late": list(self._seg_late),
                "batches": list(self._seg_batches), "times": list(self._seg_times),
                "exact": self._seg_exact, "lo": self._seg_lo, "hi": self._seg_hi,
            },
        }

    def restore(self, state: Any) -> None:
        assert self.generator is not None
        if not self.resumable:
            raise ValueError(
                f"source {self.name!r} reads a one-shot Python iterator and cannot resume; "
                "build it from a table, a list of batches or a Parquet path instead"
            )
        if self.connector is not None and state.get("offset") is not None:
            self.connector.seek(state["offset"])
            self.rows_read = int(state["rows"])
        elif "rows" in state:
            self.skip_rows(int(state["rows"]), int(state["position"]))
        else:
            self.skip(state["position"])
        # an exhausted source already sent end-of-stream: do not send it twice on resume
        self.exhausted = bool(state.get("exhausted", self.exhausted))
        self.lwm.value = state["lwm"]
        self.hwm.value = state["hwm"]
        self.generator.restore(state["generator"])
        # late rows routed before the cut are output, not state: a checkpoint holds none
        self.side_outputs = {}
        seg = state.get("segment")
        if seg is not None:
            self._seg_rows = int(seg["rows"])
            self._seg_late = [np.array(t, dtype=np.int64) for t in seg["late"]]
            self._seg_batches = list(seg["batches"])
            self._seg_times = [np.array(t, dtype=np.int64) for t in seg["times"]]
            self._seg_exact = bool(seg["exact"])
            self._seg_lo, self._seg_hi = int(seg["lo"]), int(seg["hi"])

    def _check(self) -> None:
        m = self.metrics
        assert m.tuples_in == m.tuples_out + m.late_total, (m.tuples_in, m.tuples_out, m.late)


def _pieces_first(batch: pa.RecordBatch, out: list[Element]) -> list[Element]:
    """``batch`` whole, then the punctuations of ``out`` (its pieces and the punctuations
    closing the cadence segments cut in it), when every piece was forwarded whole.

    Valid because a punctuation only bounds the tuples *after* it: each piece passed the
    late check against every punctuation before it, and moving a tuple ahead of a
    punctuation lifts a bound from it. Every window result is the same (a window closed by
    a punctuation holds no tuple of a later piece), so operators see one batch instead of
    one per piece: with input batches and cadence both 65,536 rows but files not a
    multiple of it, the window got ~2 batches per input batch.
    """
    return [batch, *(e for e in out if isinstance(e, Punctuation))]
