"""Eager partial aggregates of AdaptWID, one block per open window id (004 §6.3.4.2, Fig. 6-17).

Used for holistic aggregates (bags); bounded ones use the dense lanes of
:mod:`oop.adapt.dense`. :class:`Block` is also the unit both stores emit and
the lazy path builds at a punctuation.

A :class:`Block` holds, for one window id, the partials of every eager or
transitional group with tuples in that window: sorted unique group ids, the
partial aggregates (one :data:`~oop.adapt.algebra.State` per aggregate) and
``tupcnt`` -- per partial and per source, the number of tuples whose *last*
window is this one (004: "the number of tuples that will expire when the
aggregate is released"), which is what ``winVol`` drops by when the window
closes. ``tupcnt`` has no columns when nothing monitors ``winVol`` (forced
eager / lazy) or when it is derived from the partial's row count (tumbling,
one source: see :mod:`oop.adapt.core`). Group codes are int32.

:class:`EagerStore` maps window id -> block. Because punctuation is linear,
whole blocks close at once: the Aggregate pops the block of every window the
punctuation completes.

Cost: :meth:`EagerStore.add` O(|block| + |new|) per window id and batch
(``searchsorted`` + in-place merge; new groups are interleaved in one pass);
:meth:`EagerStore.pop` O(1). Bytes are the blocks' array sizes (layout),
kept incrementally so reading them is O(1).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from oop.adapt.algebra import BlockAgg, State, state_interleave, state_nbytes, state_take

__all__ = ["Block", "EagerStore", "merge_blocks"]


@dataclass
class Block:
    """Partials of one window id: ``gids`` sorted unique, ``tupcnt`` (n, sources), ``states``."""

    gids: np.ndarray
    tupcnt: np.ndarray
    states: list[State]

    def __len__(self) -> int:
        return len(self.gids)

    @property
    def nbytes(self) -> int:
        return int(self.gids.nbytes + self.tupcnt.nbytes + sum(state_nbytes(s) for s in self.states))

    def remap_gids(self, remap: np.ndarray) -> None:
        """Renumber the group codes through ``remap`` (key compaction: increasing on the
        codes held, so ``gids`` stay sorted). A new array: an emitted view is not touched."""
        self.gids = remap[self.gids].astype(self.gids.dtype)

    def copy(self) -> "Block":
        return Block(self.gids.copy(), self.tupcnt.copy(),
                     [[x.copy() for x in s] for s in self.states])


def merge_blocks(aggs: Sequence[BlockAgg], a: Block, b: Block) -> tuple[Block, np.ndarray]:
    """``a (+) b`` keyed by group id; ``a`` is updated in place when possible.

    Returns the merged block and the group ids of ``b`` that were new to ``a``.
    """
    if len(a) == 0:
        return b, b.gids
    if len(b) == 0:
        return a, b.gids
    pos = np.searchsorted(a.gids, b.gids)
    pos_c = np.minimum(pos, len(a) - 1)
    exists = a.gids[pos_c] == b.gids
    n_exist = int(np.count_nonzero(exists))
    if n_exist == len(b):  # every group of b has a partial in a: merge in place
        if a.tupcnt.shape[1]:
            a.tupcnt[pos_c] += b.tupcnt
        for agg, sa, sb in zip(aggs, a.states, b.states):
            agg.merge_at(sa, pos_c, sb)
        return a, b.gids[:0]
    if n_exist:
        idx = pos_c[exists]
        sel_e = np.flatnonzero(exists)
        if a.tupcnt.shape[1]:
            a.tupcnt[idx] += b.tupcnt[sel_e]
        for agg, sa, sb in zip(aggs, a.states, b.states):
            agg.merge_at(sa, idx, state_take(sb, sel_e))
    new = ~exists
    nb_gids = b.gids[new]
    ins = pos[new]  # insertion points in a (sorted, since b.gids is sorted)
    n = len(a) + len(nb_gids)
    pos_b = ins + np.arange(len(nb_gids))
    keep = np.ones(n, bool)
    keep[pos_b] = False
    pos_a = np.flatnonzero(keep)
    sel = np.flatnonzero(new)
    gids = np.empty(n, a.gids.dtype)
    gids[pos_a] = a.gids
    gids[pos_b] = nb_gids
    tup = np.empty((n, a.tupcnt.shape[1]), a.tupcnt.dtype)
    tup[pos_a] = a.tupcnt
    tup[pos_b] = b.tupcnt[sel]
    states = [state_interleave(sa, pos_a, state_take(sb, sel), pos_b, n)
              for sa, sb in zip(a.states, b.states)]
    return Block(gids, tup, states), nb_gids


class EagerStore:
    """Window id -> :class:`Block`. Tracks partial count and bytes incrementally."""

    def __init__(self, aggs: Sequence[BlockAgg]) -> None:
        self.aggs = list(aggs)
        self.fixed = not any(a.holistic for a in self.aggs)
        self.blocks: dict[int, Block] = {}
        self.n_partials = 0
        self.nbytes = 0

    def add(self, wid: int, block: Block) -> np.ndarray:
        """Merge ``block`` into window ``wid``; returns the group ids that got a new partial."""
        old = self.blocks.get(wid)
        if old is None:
            merged, new = block, block.gids
            old_bytes = 0
        else:
            old_bytes = self._bytes(old)
            merged, new = merge_blocks(self.aggs, old, block)
        self.blocks[wid] = merged
        self.n_partials += len(new)
        self.nbytes += self._bytes(merged) - old_bytes
        return new

    def _bytes(self, b: Block) -> int:
        """Every column held, tupcnt included (0 columns when not held); bags by content."""
        if self.fixed:  # fixed-width partials: rows x row width
            w = b.gids.itemsize + b.tupcnt.itemsize * b.tupcnt.shape[1]
            for st in b.states:
                for x in st:
                    w += x.itemsize
            return len(b) * w
        return b.nbytes

    def held_gids(self) -> np.ndarray:
        """Group codes holding partials (sorted unique)."""
        blks = [b.gids for b in self.blocks.values()]
        return np.unique(np.concatenate(blks)) if blks else np.zeros(0, np.int32)

    def remap_gids(self, remap: np.ndarray, n_groups: int) -> None:
        """Renumber every block's group codes (key compaction; ``n_groups``, the codes
        left, sizes the dense store's map -- blocks need no map). O(partials)."""
        for b in self.blocks.values():
            b.remap_gids(remap)

    def pop(self, wid: int) -> Block | None:
        b = self.blocks.pop(wid, None)
        if b is not None:
            self.n_partials -= len(b)
            self.nbytes -= self._bytes(b)
        return b

    def snapshot(self) -> Any:
        return {w: b.copy() for w, b in self.blocks.items()}

    def restore(self, state: Any) -> None:
        self.blocks = {w: b.copy() for w, b in state.items()}
        self.n_partials = sum(len(b) for b in self.blocks.values())
        self.nbytes = sum(self._bytes(b) for b in self.blocks.values())

    def _check(self) -> None:
        n = 0
        for w, b in self.blocks.items():
            assert (np.diff(b.gids) > 0).all(), f"block {w}: group ids not sorted unique"
            assert b.tupcnt.shape[0] == len(b) and (b.tupcnt >= 0).all()
            for s in b.states:
                assert all(len(x) == len(b) for x in s), f"block {w}: misaligned state"
            n += len(b)
        assert n == self.n_partials, (n, self.n_partials)
        assert self.nbytes == sum(self._bytes(b) for b in self.blocks.values())
