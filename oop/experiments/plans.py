"""The OOP and IOP plans the experiments compare, built from the engine's operators.

One place maps an experiment's logical query to operators, so every study
builds its OOP and IOP plans the same way (*pluggable disorder handling*,
DESIGN §4):

* OOP: :func:`oop_window` -- WID / Paned-WID window aggregation directly on
  the disordered (or melded) stream; it emits on punctuation.
* IOP: :func:`merge` (order-preserving union), :func:`sort_buffer` (slack /
  heartbeat sorting) and :func:`iop_window` (the buffering window aggregate
  that needs ordered input).
"""

from __future__ import annotations

from typing import Any, Sequence

__all__ = ["oop_window", "iop_window", "sort_buffer", "merge", "meld", "state_of"]


def oop_window(stream: Any, kind: Any, aggs: Any, by: Sequence[str] | None = None,
               method: str = "wid", name: str = "wid") -> Any:
    """OOP window aggregation (WID, or ``method="paned"`` for Paned-WID)."""
    from oop.window.aggregate import WindowAggregate

    return stream.via(WindowAggregate(kind, aggs, by=list(by) if by else (), method=method,
                                      name=name))


def iop_window(stream: Any, kind: Any, aggs: Any, by: Sequence[str] | None = None,
               name: str = "buffering") -> Any:
    """IOP buffering window aggregate over an ordered stream (materialises each extent)."""
    from oop.iop_baseline.buffering_window import BufferingWindow

    return stream.via(BufferingWindow(kind, aggs, by=tuple(by) if by else (), name=name))


def sort_buffer(stream: Any, mode: str, slack: Any = 0, name: str = "sort") -> Any:
    """IOP sort buffer: ``mode`` = "punctuation" | "tuples" | "time" with its slack."""
    from oop.iop_baseline.sort_buffer import SortBuffer, SortSpec

    return stream.via(SortBuffer(SortSpec(mode, slack), name=name))


def merge(streams: Sequence[Any], name: str = "merge") -> Any:
    """IOP order-preserving union."""
    from oop.iop_baseline.merge import Merge

    first, *rest = streams
    return first.via(Merge(len(streams), name=name), *rest)


def meld(streams: Sequence[Any], name: str = "meld") -> Any:
    """OOP union (no buffering; punctuation = min over inputs)."""
    first, *rest = streams
    return first.meld(*rest, name=name) if rest else first


def state_of(result: Any, names: Sequence[str]) -> tuple[int, int]:
    """``(peak items, peak bytes)`` summed over the named operators' own peaks."""
    items = byts = 0
    for n in names:
        m = result.metrics.get(n)
        if m is not None:
            items += int(m.peak_state_items)
            byts += int(m.peak_state_bytes)
    return items, byts
