"""NetFlow-like packet streams, deterministic by seed, generated in bounded chunks.

Schema (:data:`PACKET_SCHEMA`): ``srcIP, destIP`` (int64, an IPv4 address as
an integer; ``srcIP`` is the *group id*), ``srcPort, destPort`` (int32),
``len`` (int32, bytes, a bimodal 40..1500 packet-size mix) and ``ts`` (int64
milliseconds of event time).

The ordered stream has ``ts_i = start + floor(i * 1000 / rate)``: ``rate``
tuples per second of event time. Group skew (the ``srcIP`` column):

* :class:`Uniform` -- ``groups`` equally likely groups;
* :class:`Zipf` -- ``P(group k) ~ 1 / (k + 1) ** s`` over ``groups`` groups;
* :class:`DSMix` -- the DS1--DS5 mixes of 004 Table 6-2 (§6.3.5): small groups
  hold one record, medium groups about 15, large groups about 300; ``small``
  percent of the data goes to small groups, 20 % to medium groups, the rest to
  large ones. The mix is drawn per *period* of tuples (default: one second of
  event time, the window of Q6-7); large and medium group ids persist from
  period to period, small groups are fresh ids (a group with one record).

Generation is chunked: rows ``[k * CHUNK, (k + 1) * CHUNK)`` are drawn from a
random generator seeded by ``(seed, k)``, so the stream is the same whatever
batch size it is read with, and 10M+ rows stream through bounded memory.

>>> p = Packets(n=10, rate=1000, groups=4, seed=1)
>>> t = p.table()
>>> t.column_names
['srcIP', 'destIP', 'srcPort', 'destPort', 'len', 'ts']
>>> t.column("ts").to_pylist()
[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
>>> p.table().equals(t)  # deterministic by seed
True
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Iterable, Iterator, Union

import numpy as np
import pyarrow as pa

from oop.errors import ConfigError

__all__ = [
    "PACKET_SCHEMA",
    "CHUNK",
    "Uniform",
    "Zipf",
    "DSMix",
    "DS_MIXES",
    "Skew",
    "Packets",
    "rebatch",
    "concat_batches",
]

CHUNK = 65_536

PACKET_SCHEMA = pa.schema(
    [
        ("srcIP", pa.int64()),
        ("destIP", pa.int64()),
        ("srcPort", pa.int32()),
        ("destPort", pa.int32()),
        ("len", pa.int32()),
        ("ts", pa.int64()),
    ]
)

# distinct sub-streams of randomness for each use, so adding one never shifts another
_GROUPS, _COLS, _MIX = 1, 2, 3


@dataclass(frozen=True)
class Uniform:
    """Every one of the ``groups`` groups equally likely."""


@dataclass(frozen=True)
class Zipf:
    """Zipf skew: ``P(group k) ~ 1 / (k + 1) ** s`` for ``k`` in ``[0, groups)``."""

    s: float = 1.0

    def __post_init__(self) -> None:
        if not self.s >= 0:
            raise ConfigError(f"Zipf: exponent s must be >= 0 (0 is uniform), got {self.s!r}")


@dataclass(frozen=True)
class DSMix:
    """Small/medium/large group mix of 004 Table 6-2 (DS1..DS5: ``small`` = 1, 3, 5, 7, 9 %).

    ``period`` is the number of tuples over which the mix holds (None: one
    second of event time, i.e. ``rate`` tuples).
    """

    small: float = 0.05
    medium: float = 0.20
    medium_size: int = 15
    large_size: int = 300
    period: int | None = None

    def __post_init__(self) -> None:
        if not (0 <= self.small and 0 <= self.medium and self.small + self.medium < 1):
            raise ConfigError(
                f"DSMix: small ({self.small}) and medium ({self.medium}) are fractions of the "
                "data and must leave some for the large groups (small + medium < 1)"
            )
        if self.medium_size < 1 or self.large_size < 1:
            raise ConfigError("DSMix: group sizes must be >= 1 record")
        if self.period is not None and self.period < 1:
            raise ConfigError(f"DSMix: period must be >= 1 tuple, got {self.period}")

    @staticmethod
    def ds(i: int) -> "DSMix":
        """The mix of data set ``DS<i>`` (i in 1..5)."""
        if i not in (1, 2, 3, 4, 5):
            raise ConfigError(f"DSMix.ds: data sets are DS1..DS5, got DS{i}")
        return DSMix(small=(2 * i - 1) / 100)

    def layout(self, period: int) -> tuple[int, int, int, int, int]:
        """``(n_small, medium_tuples, medium_groups, large_tuples, large_groups)`` for one period."""
        n_small = int(round(self.small * period))
        m = int(round(self.medium * period))
        gm = max(1, int(round(m / self.medium_size))) if m else 0
        l_ = period - n_small - m
        gl = max(1, int(round(l_ / self.large_size))) if l_ else 0
        return n_small, m, gm, l_, gl


DS_MIXES: dict[str, DSMix] = {f"DS{i}": DSMix.ds(i) for i in range(1, 6)}

Skew = Union[Uniform, Zipf, DSMix]


@lru_cache(maxsize=16)
def _zipf_cdf(groups: int, s: float) -> np.ndarray:
    w = 1.0 / np.power(np.arange(1, groups + 1, dtype=np.float64), s)
    cdf = np.cumsum(w)
    return cdf / cdf[-1]


@dataclass(frozen=True)
class Packets:
    """An ordered packet stream of ``n`` rows; see the module docstring.

    ``rate`` is tuples per second of event time (``ts`` in ms from ``start``).
    ``groups`` is the number of ``srcIP`` groups for :class:`Uniform` and
    :class:`Zipf` (a :class:`DSMix` derives its own); ``dests`` bounds the
    number of distinct ``destIP`` values (None: the whole 10.0.0.0/8). Cost: O(n) time,
    O(CHUNK) memory while streaming.
    """

    n: int
    rate: float = 4000.0
    groups: int = 1000
    skew: Skew = field(default_factory=Uniform)
    seed: int = 0
    start: int = 0
    dests: int | None = None

    def __post_init__(self) -> None:
        if self.n < 0:
            raise ConfigError(f"Packets: n must be >= 0 rows, got {self.n}")
        if not self.rate > 0:
            raise ConfigError(f"Packets: rate must be > 0 tuples per second, got {self.rate}")
        if self.groups < 1:
            raise ConfigError(f"Packets: groups must be >= 1, got {self.groups}")
        if self.dests is not None and self.dests < 1:
            raise ConfigError(f"Packets: dests (distinct destIPs) must be >= 1, got {self.dests}")

    schema = PACKET_SCHEMA

    @property
    def duration_ms(self) -> int:
        """Event time covered: ``ts`` of the last row + 1 - start."""
        return int(np.floor((self.n - 1) * 1000.0 / self.rate)) + 1 if self.n else 0

    def ts_of(self, i: np.ndarray) -> np.ndarray:
        """Event time of rows ``i`` of the ordered stream."""
        return self.start + np.floor(i.astype(np.float64) * (1000.0 / self.rate)).astype(np.int64)

    # ---- generation ----------------------------------------------------
    def _rng(self, k: int, what: int) -> np.random.Generator:
        return np.random.default_rng([self.seed, k, what])

    def _src(self, lo: int, hi: int, k: int) -> np.ndarray:
        sk = self.skew
        if isinstance(sk, Uniform):
            return self._rng(k, _GROUPS).integers(0, self.groups, hi - lo, dtype=np.int64)
        if isinstance(sk, Zipf):
            u = self._rng(k, _GROUPS).random(hi - lo)
            idx = np.searchsorted(_zipf_cdf(self.groups, float(sk.s)), u, side="right")
            return np.minimum(idx, self.groups - 1).astype(np.int64)
        if isinstance(sk, DSMix):
            period = sk.period or max(1, int(round(self.rate)))
            out = np.empty(hi - lo, dtype=np.int64)
            for p in range(lo // period, (hi - 1) // period + 1):
                ids = self._period_ids(sk, period, p)
                a, b = max(lo, p * period), min(hi, (p + 1) * period)
                out[a - lo : b - lo] = ids[a - p * period : b - p * period]
            return out
        raise ConfigError(f"Packets: unknown skew {sk!r}; use Uniform(), Zipf(s) or DSMix(...)")

    @staticmethod
    @lru_cache(maxsize=8)
    def _period_ids_cached(sk: DSMix, period: int, p: int, seed: int) -> np.ndarray:
        rng = np.random.default_rng([seed, p, _MIX])
        n_small, m, gm, l_, gl = sk.layout(period)
        parts = []
        if l_:
            parts.append(rng.integers(0, gl, l_, dtype=np.int64))
        if m:
            parts.append(gl + rng.integers(0, gm, m, dtype=np.int64))
        if n_small:
            parts.append(gl + gm + p * n_small + np.arange(n_small, dtype=np.int64))
        ids = np.concatenate(parts) if parts else np.empty(0, np.int64)
        rng.shuffle(ids)
        return ids

    def _period_ids(self, sk: DSMix, period: int, p: int) -> np.ndarray:
        return self._period_ids_cached(sk, period, p, self.seed)

    def chunk(self, k: int) -> pa.RecordBatch:
        """Rows ``[k * CHUNK, min(n, (k + 1) * CHUNK))`` of the ordered stream."""
        lo, hi = k * CHUNK, min(self.n, (k + 1) * CHUNK)
        m = max(0, hi - lo)
        rng = self._rng(k, _COLS)
        hi_dest = 167772160 + (self.dests if self.dests else 16777215)
        dest = rng.integers(167772160, hi_dest, m, dtype=np.int64)  # in 10.0.0.0/8
        sport = rng.integers(1024, 65535, m, dtype=np.int32)
        dport = rng.choice(np.array([80, 443, 53, 22, 25, 8080], np.int32), m)
        small = rng.random(m) < 0.5
        length = np.where(small, rng.integers(40, 100, m), rng.integers(500, 1501, m))
        return pa.RecordBatch.from_arrays(
            [
                pa.array(self._src(lo, hi, k) if m else np.empty(0, np.int64)),
                pa.array(dest),
                pa.array(sport),
                pa.array(dport),
                pa.array(length.astype(np.int32)),
                pa.array(self.ts_of(np.arange(lo, hi, dtype=np.int64))),
            ],
            schema=PACKET_SCHEMA,
        )

    def chunks(self) -> Iterator[pa.RecordBatch]:
        """The ordered stream in generation chunks of :data:`CHUNK` rows."""
        for k in range((self.n + CHUNK - 1) // CHUNK):
            yield self.chunk(k)

    def batches(self, batch_size: int = CHUNK) -> Iterator[pa.RecordBatch]:
        """The ordered stream in batches of ``batch_size`` rows (the last may be shorter)."""
        return rebatch(self.chunks(), batch_size)

    def table(self) -> pa.Table:
        """The whole ordered stream, materialised (for small ``n``)."""
        return pa.Table.from_batches(list(self.chunks()), schema=PACKET_SCHEMA)


def concat_batches(parts: list[pa.RecordBatch], schema: pa.Schema) -> pa.RecordBatch:
    """One RecordBatch holding ``parts`` in order (a copy unless there is one part)."""
    if len(parts) == 1:
        return parts[0]
    if not parts:
        return pa.RecordBatch.from_pylist([], schema=schema)
    t = pa.Table.from_batches(parts, schema=schema).combine_chunks()
    return t.to_batches()[0]


def rebatch(batches: Iterable[pa.RecordBatch], batch_size: int) -> Iterator[pa.RecordBatch]:
    """Re-cut a stream of batches into batches of exactly ``batch_size`` rows (last shorter).

    Empty input batches are skipped; slices are zero-copy except where an
    output batch spans two inputs. Memory: O(batch_size + one input batch).
    """
    if batch_size < 1:
        raise ConfigError(f"batch_size must be >= 1 row, got {batch_size}")
    carry: list[pa.RecordBatch] = []
    have = 0
    for b in batches:
        if not b.num_rows:
            continue
        if have:
            need = batch_size - have
            carry.append(b.slice(0, need))
            have += min(need, b.num_rows)
            b = b.slice(need)
            if have < batch_size:
                continue
            yield concat_batches(carry, b.schema)
            carry, have = [], 0
        off = 0
        while b.num_rows - off >= batch_size:
            yield b.slice(off, batch_size)
            off += batch_size
        if off < b.num_rows:
            carry, have = [b.slice(off)], b.num_rows - off
    if have:
        yield concat_batches(carry, carry[0].schema)
