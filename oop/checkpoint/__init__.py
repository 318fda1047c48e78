"""Durable, safe-to-load checkpoints of a running plan.

>>> from oop.checkpoint import CheckpointStore, save, load  # doctest: +SKIP
>>> ex, sink = stream.executor()                              # doctest: +SKIP
>>> ex.run(stop_after_rounds=100)                             # doctest: +SKIP
>>> save(ex, CheckpointStore("ckpts"))                        # doctest: +SKIP
>>> ex2, sink2 = same_query().executor()                      # doctest: +SKIP
>>> load(ex2, CheckpointStore("ckpts"))                       # doctest: +SKIP
>>> ex2.run()                                                 # doctest: +SKIP

:func:`save` encodes :meth:`Executor.checkpoint` (operator states, operator
metrics, rounds) with :mod:`oop.checkpoint.codec` -- a tagged JSON tree and
raw arrays / Arrow IPC, never pickle -- and writes it atomically with
:class:`CheckpointStore`. :func:`load` reads the newest good checkpoint,
checks that it was written by the same query (:func:`plan_fingerprint`) and
resumes the executor from it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from oop.checkpoint.codec import decode, encode, register
from oop.checkpoint.cut import Checkpoint
from oop.checkpoint.fingerprint import describe_difference, plan_description, plan_fingerprint
from oop.checkpoint.store import FORMAT_VERSION, CheckpointStore
from oop.errors import CheckpointError

__all__ = ["save", "load", "CheckpointStore", "CheckpointError", "FORMAT_VERSION",
           "encode", "decode", "register", "plan_fingerprint", "plan_description"]

#: manifest keys that :func:`save` sets (user fields cannot override them)
RESERVED = ("format", "oop_version", "fingerprint", "created", "rounds", "plan")


def save(executor: Any, store: CheckpointStore,
         extra_manifest: dict[str, Any] | None = None) -> Path:
    """Write ``executor``'s current cut (call between rounds) to ``store``; returns the file.

    ``extra_manifest``: free JSON-serializable fields kept in the manifest (e.g. the
    command line); raises :class:`CheckpointError` naming any state that cannot be encoded.
    """
    cp = executor.checkpoint()
    tree, arrays = encode({"states": cp.states, "metrics": cp.metrics}, root="")
    lines = plan_description(executor)
    manifest = {k: v for k, v in (extra_manifest or {}).items() if k not in RESERVED}
    manifest.update({"fingerprint": plan_fingerprint(executor), "rounds": int(cp.rounds),
                     "plan": lines})
    return store.write(tree, arrays, manifest)


def load(executor: Any, store: CheckpointStore) -> dict[str, Any] | None:
    """Resume the freshly built ``executor`` from the newest good checkpoint in ``store``.

    Returns the checkpoint's manifest, or None when the store holds no checkpoint
    (the executor is left untouched: start from the beginning). Raises
    :class:`CheckpointError` for another query's checkpoint or a newer format.
    """
    lines = plan_description(executor)
    found = store.latest(fingerprint=plan_fingerprint(executor),
                         describe=lambda man: describe_difference(lines, man.get("plan")))
    if found is None:
        return None
    manifest, tree, arrays = found
    payload = decode(tree, arrays, root="")
    if not isinstance(payload, dict) or "states" not in payload:
        raise CheckpointError(f"checkpoint in {store.directory} holds no operator states")
    try:
        executor.resume(Checkpoint(int(manifest["rounds"]), payload["states"],
                                   payload.get("metrics") or {}))
    except (KeyError, TypeError, IndexError, AttributeError) as exc:
        raise CheckpointError(
            f"checkpoint in {store.directory} (written by oop {manifest.get('oop_version')}) "
            f"does not fit this oop's operators ({type(exc).__name__}: {exc}); delete it to "
            "start over"
        ) from exc
    return manifest
