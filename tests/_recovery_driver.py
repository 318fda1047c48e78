"""A library job for the crash-recovery tests: plans ``oop replay`` cannot express.

Run as ``python tests/_recovery_driver.py PLAN A_DIR B_DIR OUT/ LATE/ CKPT_DIR EVERY``
(PYTHONPATH = the repository root). ``PLAN`` is one of

* ``adaptive`` -- AdaptWID sliding window (2 s, slide 500 ms) over A, count and sum by ``k``;
* ``join``     -- band join of A and B on ``k`` (``|a.ts - b.ts| <= 50 ms``);
* ``keyed-join-3threads`` -- that join as a FULL OUTER join on 2 key partitions
  (KeyedJoin, one thread each: what ``oop sql --threads 3`` plans for it);
* ``union``    -- Meld of A and B, then a tumbling 1 s window, count and sum by ``k``.

The results go to the part folder OUT/, the late rows of both sources to LATE/;
``Stream.sink(..., checkpoint_dir=CKPT_DIR, checkpoint_every=EVERY)`` makes the
run restartable exactly once (CKPT_DIR ``-``: a plain run without checkpoints, the
reference). Exit codes as ``oop replay``: 0 done, 2 a one-line
error, 130 / 143 stopped by SIGINT / SIGTERM after a checkpoint.
"""

from __future__ import annotations

import sys
from typing import Any

PUNCTUATION = "bounded:3s+cadence:5000rows"
BATCH = 5000


def _source(folder: str, name: str) -> Any:
    import oop
    from oop.io.files import FileSource

    return oop.from_connector(FileSource(folder, name=name), time="ts", unit="ms",
                              punctuation=oop.parse_punctuation(PUNCTUATION), late="side",
                              batch_size=BATCH, name=name)


def build(plan: str, a_dir: str, b_dir: str) -> Any:
    """The plan named ``plan`` over the folders ``a_dir`` (and ``b_dir``)."""
    from oop import agg
    from oop.window.specs import parse_window

    a = _source(a_dir, "a")
    aggs = [agg.count(), agg.sum("v")]
    if plan == "adaptive":
        return a.adaptive_window(parse_window("sliding:2s,500ms", "ms"), aggs, by="k")
    b = _source(b_dir, "b")
    if plan == "join":
        return a.join(b, on="k", band=("50ms", "50ms"))
    if plan == "keyed-join-3threads":
        return a.join(b, on="k", band=("50ms", "50ms"), how="full", workers=2, ordered=True,
                      keyed=True)
    if plan == "union":
        return a.meld(b).window(parse_window("tumbling:1s", "ms"), aggs, by="k")
    raise SystemExit(f"unknown plan {plan!r}")


def main(argv: list[str]) -> int:
    from oop.errors import Interrupted, OopError

    plan, a_dir, b_dir, out, late, ckpt, every = argv
    try:
        stream = build(plan, a_dir, b_dir)
        if ckpt == "-":  # the uninterrupted reference run
            stream.sink(out, late=late)
        else:
            stream.sink(out, late=late, checkpoint_dir=ckpt, checkpoint_every=every)
    except Interrupted as e:  # the job already said so on stderr, in one line
        return e.code
    except (OopError, FileNotFoundError) as e:
        print(f"driver: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
