"""Shared machinery of the order-preserving (IOP) band joins OPOB and OPIB (004 §7.3).

The in-order joins assume each input arrives ordered on its progressing
attribute (IOP plans put a sort buffer in front of each input). Input ``i``'s
*frontier* ``f_i`` is the larger of its last tuple time and its last
punctuation: every later tuple of ``i`` has ``time >= f_i``. A tuple below
``f_i`` (or below an earlier tuple of its own batch) breaks the order
assumption: it is *late* -- dropped and counted (``late="drop"``), routed to
the late side output, or an error (``late="raise"``).

They reuse OA-Join's output schema, key hashing, hash state and numba probe
kernel (:mod:`oop.join.state`), so the comparison with OA-Join measures the
order-preserving strategy, not a different hash table. Only inner joins.
Output: ordered on S0's time; punctuation ``P(S0.ts, v)`` only.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from oop.errors import ConfigError
from oop.join.keys import key_hashes
from oop.join.oa_join import OAJoin
from oop.join.spec import JoinConfig
from oop.stream.elements import INT64_MAX, INT64_MIN, Element, Punctuation
from oop.stream.late import LatePolicy
from oop.stream.timecol import time_values

__all__ = ["InOrderJoin"]


class InOrderJoin(OAJoin):
    """Base of OPOB / OPIB: frontiers, order check, probing one ordered block."""

    def __init__(self, config: JoinConfig) -> None:
        if config.how != "inner":
            raise ConfigError(
                f"{config.name}: the order-preserving baselines implement inner joins only, "
                f"got how={config.how!r}; use OA-Join (Stream.join) for outer/semi/anti"
            )
        super().__init__(config, workers=1)
        self.f = [INT64_MIN, INT64_MIN]
        self._p_out = INT64_MIN

    # ---- input ---------------------------------------------------------
    def _ordered(self, batch: pa.RecordBatch, port: int) -> tuple[pa.RecordBatch, np.ndarray]:
        """Drop (count / route / raise) tuples that break input order; advance ``f_port``."""
        self.check_schema(batch, port)
        ts = time_values(batch, self.time_attrs[port], self.inputs[port].name)
        if len(ts) == 0:
            return batch, ts
        run = np.maximum.accumulate(np.concatenate(([self.f[port]], ts)))[:-1]
        late = ts < run
        if late.any():
            pol = self.config.late
            if pol is LatePolicy.RAISE:
                from oop.errors import LateTupleError

                i = int(np.argmax(late))
                raise LateTupleError(
                    f"{self.name}: input {port} ({self.inputs[port].name!r}) is not ordered: "
                    f"{self.time_attrs[port]}={int(ts[i])} after {int(run[i])}; put a sort buffer "
                    "(iop-sort) in front of the in-order join, or choose late='drop'"
                )
            self.route_late(batch.filter(pa.array(late)), pol)
            batch = batch.filter(pa.array(~late))
            ts = ts[~late]
        if len(ts):
            self.f[port] = max(self.f[port], int(ts[-1]))
        return batch, np.ascontiguousarray(ts, dtype=np.int64)

    def _probe_block(self, batch: pa.RecordBatch, ts: np.ndarray, port: int,
                     keep_probe_order: bool) -> pa.RecordBatch | None:
        """Join ``batch`` (input ``port``) with the stored tuples of the other input."""
        o = 1 - port
        kh, valid, _ = key_hashes(batch, self.keys[port])
        bk = self.pred.bucket_keys(kh, ts)
        lo, hi = self.pred.intervals(port, ts)
        st = self.states[0][o]
        pi, ei = st.probe(lo, hi, kh, bk, valid)
        if len(pi) == 0:
            return None
        order, orows = st.take(ei)
        pi = pi[order]
        prows = batch.take(pa.array(pi))
        joined = self._joined(prows, orows) if port == 0 else self._joined(orows, prows)
        mask = self._verify(joined)
        if mask is not None:
            joined = joined.filter(pa.array(mask))
            pi = pi[mask]
        if keep_probe_order and joined.num_rows:
            joined = joined.take(pa.array(np.argsort(pi, kind="stable")))
        return joined if joined.num_rows else None

    def _store_rows(self, port: int, batch: pa.RecordBatch, ts: np.ndarray, thr: int) -> None:
        if batch.num_rows == 0:
            return
        kh, valid, _ = key_hashes(batch, self.keys[port])
        keep = valid & (ts >= thr)
        if keep.any():
            idx = np.flatnonzero(keep)
            rows = batch if len(idx) == batch.num_rows else batch.take(pa.array(idx))
            self.states[0][port].insert(rows, ts[idx], kh[idx])

    def _punct(self, v: int) -> list[Element]:
        if INT64_MIN < v < INT64_MAX and v > self._p_out:
            self._p_out = v
            return [Punctuation(self.out_time[0], v)]
        return []

    def on_punctuation(self, punctuation: Element, port: int = 0) -> list[Element]:
        if not isinstance(punctuation, Punctuation) or punctuation.attr != self.time_attrs[port]:
            return []
        if punctuation.value <= self.f[port]:
            return []
        self.f[port] = int(punctuation.value)
        return self._progress()

    def on_end(self, port: int = 0) -> list[Element]:
        self._ended[port] = True
        self.f[port] = INT64_MAX
        return self._progress()

    def _progress(self) -> list[Element]:  # pragma: no cover - abstract
        raise NotImplementedError

    def snapshot(self) -> Any:
        return {**super().snapshot(), "f": list(self.f), "p_out": self._p_out}

    def restore(self, state: Any) -> None:
        super().restore(state)
        self.f = list(state["f"])
        self._p_out = state["p_out"]
