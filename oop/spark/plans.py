"""Sharded plans on Spark (001 Quill plans over :mod:`oop.spark.sharded`).

* :func:`local_global_window` -- local-then-global aggregation: every source
  shard aggregates its own rows into *partial* windows in the task that reads
  them (no shuffle of raw rows), the partials are re-distributed by
  ``(*by, window_start)`` and merged by :class:`~oop.spark.combine.CombinePartials`
  (count per shard, then sum). Needs aggregates with a super-aggregate
  (count, sum, min, max).
* :func:`keyed_window` -- re-distribute rows by key, full window aggregation
  per shard (any aggregate; each group lives in exactly one shard).
* :func:`sharded_window` -- picks one of the two (what ``oop replay --spark
  --shards N`` runs) and collects the result (shard outputs melded).
* :func:`shuffle_band_join` / :func:`broadcast_band_join` -- band join with
  equality keys: both sides re-distributed by the key, or the (small) right
  side broadcast to every shard of the left.
* :func:`bot_filter` -- the 001 query: per-user sliding count > X marks bot
  windows; clicks anti-joined against them (band over the window extent);
  per-ad hopping count of the sanitised clicks.

Every movement forwards punctuation to all shards; the shards' outputs are
re-combined with Meld (min of punctuations).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from oop.api import DEFAULT_BATCH_SIZE, Stream
from oop.errors import ConfigError
from oop.punctuation.base import GeneratorConfig
from oop.spark.combine import CombinePartials
from oop.spark.sharded import ShardedResult, ShardedStream, shard

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

__all__ = ["local_global_window", "keyed_window", "sharded_window", "shuffle_band_join",
           "broadcast_band_join", "bot_filter"]


def local_global_window(s: ShardedStream, kind: Any, aggs: Sequence[Any], by: Sequence[str] = (),
                        shards: int | None = None, method: str = "auto",
                        threads: int = 1) -> ShardedStream:
    """Partial windows per source shard, merged per ``(*by, window_start)`` after a shuffle.
    ``threads``: key partitions inside each task (:mod:`oop.window.threaded`)."""
    aggs = list(aggs)
    bad = [a.name for a in aggs if a.spec.combine_op is None]
    if bad:
        raise ConfigError(f"local-then-global aggregation needs count/sum/min/max; {bad} have no "
                          "super-aggregate here -- use keyed_window")
    by = tuple(by)
    m = shards or s.shards
    local = s.query(lambda st: st.window(kind, aggs, by=by, method=method, name="local",
                                         threads=threads),
                    name="local")
    partials = [(a.name, a.fn) for a in aggs]
    return local.redistribute(m, [*by, "window_start"]).query(
        lambda st: st.via(CombinePartials(by, partials, name="global")), name="global")


def _global_on_driver(s: ShardedStream, kind: Any, aggs: Sequence[Any], by: Sequence[str],
                      method: str, threads: int = 1) -> ShardedResult:
    """Partial windows per shard in Spark; shard outputs melded on the driver and merged there."""
    import time as _time

    from oop.plan.executor import Node
    from oop.plan.source import Source
    from oop.punctuation.external import External
    from oop.spark.meld import Side
    from oop.stream.elements import INT64_MAX, Punctuation

    t0 = _time.perf_counter()
    by = tuple(by)
    local = s.query(lambda st: st.window(kind, list(aggs), by=by, method=method, name="local",
                                         threads=threads),
                    name="local")
    assert local.time is not None
    side = Side(local.producers, local.schema)

    def feed() -> Any:
        for batch, v in local._melded_feed(side, bounded=False):
            if batch.num_rows:
                yield batch
            if v is not None and v != INT64_MAX:
                yield Punctuation(local.time or "", v)

    src = Source(feed, time=local.time, unit=local.unit, punctuation=External(),
                 schema=local.schema, name="partials")
    res = Stream(Node(src)).via(CombinePartials(by, [(a.name, a.fn) for a in aggs],
                                                name="global")).run()
    return ShardedResult(res.table, list(res.punctuations), side.tuples_in,
                         side.late + res.late_total, _time.perf_counter() - t0, local.producers)


def keyed_window(s: ShardedStream, kind: Any, aggs: Sequence[Any], by: Sequence[str],
                 shards: int | None = None, method: str = "auto",
                 threads: int = 1) -> ShardedStream:
    """Rows re-distributed by ``by``; the full window aggregation in each shard
    (``threads`` key partitions inside each task)."""
    if not by:
        raise ConfigError("keyed_window needs at least one key column (by=...)")
    m = shards or s.shards
    return s.redistribute(m, list(by)).query(
        lambda st: st.window(kind, list(aggs), by=tuple(by), method=method, name="window",
                            threads=threads),
        name="window")


def sharded_window(
    df: "DataFrame | str | Sequence[str]",
    *,
    time: str,
    unit: str,
    kind: Any,
    aggs: Sequence[Any],
    by: Sequence[str] = (),
    shards: int,
    punctuation: GeneratorConfig | str | None = None,
    arrival: str | None = None,
    late: str = "drop",
    batch_size: int = DEFAULT_BATCH_SIZE,
    method: str = "auto",
    spread_input: bool = True,
    split: str = "file",
    tasks: int | None = None,
    shard_per: str = "fragment",
    global_on: str = "shards",
    threads: int = 1,
) -> ShardedResult:
    """The window query sharded over ``shards`` Spark tasks; returns the melded result.

    count/sum/min/max run local-then-global; other aggregates run keyed
    (and need ``by``). ``df`` is a DataFrame, or Parquet file/folder paths:

    * paths and local-then-global -- the **file path**
      (:func:`oop.spark.files.shard_files`): each Spark task reads its
      Parquet fragments (``split`` = file | row_group; ``shard_per`` =
      fragment | task, see :func:`~oop.spark.files.shard_files`) with
      pyarrow and aggregates them locally; only partials go through Spark.
      The result's ``path`` is ``"files"``. With ``global_on="driver"`` the
      partials are not shuffled: the shard outputs are melded on the driver
      and merged there by one CombinePartials (one Spark stage less; for
      outputs that fit the driver) -- ``path`` ``"files+driver"``;
    * a DataFrame (or a keyed plan over paths) -- the ``mapInArrow`` path
      (:func:`oop.spark.sharded.shard`). With ``spread_input=False`` the
      DataFrame's own partitions (e.g. Parquet file splits) are the source
      shards -- no shuffle of raw rows before the local aggregation;
      ``shards`` then only sizes the global stage. ``path`` is ``"mapInArrow"``.

    ``threads``: the window inside each task runs on that many key partitions
    (:mod:`oop.window.threaded`); ``shards`` keeps its meaning.
    """
    from dataclasses import replace as _replace

    # only the columns the query reads cross into Python (Spark SQL prunes the same way)
    needed = list(dict.fromkeys([time, *by, *(a.column for a in aggs if a.column),
                                 *([arrival] if arrival else [])]))
    local_global = all(a.spec.combine_op is not None for a in aggs)
    if not local_global and not by:
        raise ConfigError(
            "sharded window: aggregates other than count/sum/min/max need --key to shard by"
        )
    if isinstance(df, (str, Path, list, tuple)):
        from oop.spark.files import parquet_paths, shard_files
        from oop.spark.session import get_spark

        spark = get_spark()
        if local_global:
            src = shard_files(spark, df, time=time, unit=unit, punctuation=punctuation,
                              arrival=arrival, columns=needed, late=late, batch_size=batch_size,
                              split=split, tasks=tasks, shard_per=shard_per)
            if global_on == "driver":
                return _replace(_global_on_driver(src, kind, aggs, by, method, threads),
                                path="files+driver")
            res = local_global_window(src, kind, aggs, by, shards, method, threads).collect()
            return _replace(res, path="files")
        df = spark.read.parquet(*parquet_paths(df))
    df = df.select(*needed)
    src = shard(df, time=time, unit=unit, punctuation=punctuation, arrival=arrival,
                shards=shards if spread_input else None, late=late, batch_size=batch_size)
    if local_global:
        out = local_global_window(src, kind, aggs, by, shards, method, threads)
    else:
        out = keyed_window(src, kind, aggs, by, shards, method, threads)
    return _replace(out.collect(), path="mapInArrow")


def _band_plan(on: Any, band: tuple[Any, Any], how: str) -> Any:
    def plan(left: Stream, right: Stream) -> Stream:
        return left.join(right, on=on, band=band, how=how, name="join")
    return plan


def shuffle_band_join(left: ShardedStream, right: ShardedStream, *, on: str | Sequence[str],
                      band: tuple[Any, Any], shards: int, how: str = "inner") -> ShardedStream:
    """Both sides re-distributed by the key ``on``; OA-Join per shard."""
    keys = [on] if isinstance(on, str) else list(on)
    return left.redistribute(shards, keys).query(
        _band_plan(on, band, how), right.redistribute(shards, keys), name="join")


def broadcast_band_join(left: ShardedStream, right: ShardedStream, *, on: str | Sequence[str],
                        band: tuple[Any, Any], shards: int | None = None,
                        how: str = "inner") -> ShardedStream:
    """The left side round-robin over the shards, the right side broadcast to all of them.

    Correct for inner/semi/anti/left joins (every left row meets all right
    rows in exactly one shard); a right/full outer join would repeat the
    unmatched right rows per shard and is refused.
    """
    if how in ("right", "full"):
        raise ConfigError(f"broadcast join cannot compute a {how} outer join (the broadcast side "
                          "is repeated in every shard); use shuffle_band_join")
    m = shards or left.shards
    return left.reshard(m).query(_band_plan(on, band, how), right.broadcast(m), name="join")


def bot_filter(
    clicks: ShardedStream,
    *,
    user: str,
    ad: str,
    bot_range: Any,
    bot_slide: Any,
    threshold: int,
    hop: Any,
    shards: int,
) -> ShardedStream:
    """001's bot filter: drop clicks of users with > ``threshold`` clicks in a sliding window.

    w0 = clicks re-distributed by user; w1 = per-user ``Sliding(bot_range,
    bot_slide)`` count > threshold (bot windows); w2 = clicks of w0 with no
    bot window of their user containing their time (anti band-join against
    the window extent); result = per-ad ``Tumbling(hop)`` count of w2.
    """
    from oop.window import Sliding, Tumbling, agg

    t = clicks.time
    if t is None:
        raise ConfigError("bot_filter: the clicks need a time column")
    w0 = clicks.redistribute(shards, [user])

    def bots(st: Stream) -> Stream:
        import pyarrow.compute as pc

        w = st.window(Sliding(bot_range, bot_slide), [agg.count()], by=(user,), name="per_user")
        w = w.select(lambda b: pc.greater(b["count"], threshold), name="is_bot")
        return w.project([user, "window_start", "window_end"], name="bot_windows")

    w1 = w0.query(bots, name="bots")
    rng = Sliding(bot_range, bot_slide).resolve(clicks.unit).r

    def sanitize(l: Stream, r: Stream) -> Stream:
        # the bot windows progress on window_end e; a click at t lies in [e - range, e)
        # iff t + 1 <= e <= t + range: the band (-1, range) on (t, e)
        return l.join(r, on=[user], band=(-1, rng), how="anti", name="not_bot")

    w2 = w0.query(sanitize, w1.redistribute(shards, [user]), name="sanitized")
    return w2.redistribute(shards, [ad]).query(
        lambda st: st.window(Tumbling(hop), [agg.count()], by=(ad,), name="per_ad"),
        name="per_ad")
