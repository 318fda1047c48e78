"""Durable checkpoint files: atomic writes, checksums, fallback to the last good one.

One checkpoint is one file ``ckpt-NNNNNNNN.oopckpt`` in the store's folder:

=========================  ==============================================
``OOPCKPT\\n``              magic (8 bytes)
u32 little-endian           format version (:data:`FORMAT_VERSION`)
u64 + bytes                 manifest JSON
u64 + bytes                 state tree JSON (see :mod:`oop.checkpoint.codec`)
u64 + bytes                 array index JSON: ``[[ref, length], ...]``
bytes                       the arrays, concatenated in index order
32 bytes                    SHA-256 of everything above
=========================  ==============================================

:meth:`CheckpointStore.write` writes to a hidden temporary name, fsyncs it,
renames it into place and fsyncs the folder, so a crash leaves either the
old set of checkpoints or the new one. :meth:`CheckpointStore.latest` loads
the newest file whose checksum holds; a damaged newer one is skipped with a
warning (``warnings.warn`` and the ``on_warning`` callback).

Fault injection for tests: ``OOP_FAULT=checkpoint-write-mid`` kills the
process (SIGKILL) after half of the temporary file is written,
``checkpoint-before-rename`` after it is complete and synced but before the
rename, ``checkpoint-after-rename`` after the rename but before the folder sync.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import re
import signal
import struct
import warnings
from pathlib import Path
from typing import Any, Callable, Iterator

from oop.errors import CheckpointError
from oop.version import __version__

__all__ = ["CheckpointStore", "FORMAT_VERSION", "MAGIC", "oop_version"]

MAGIC = b"OOPCKPT\n"
#: bumped when the file layout or the tree encoding changes incompatibly
FORMAT_VERSION = 3
"""2: window stores tag their layout; AdaptWID state is typed (``oop.adapt.state``) and keeps
the variance shift. 3: the WID / Paned-WID, partitioned-rows and session window states are
typed (``oop.window.state``). Older files are refused with an error that says so."""
_NAME = re.compile(r"^ckpt-(\d{8,})\.oopckpt$")
_TMP = re.compile(r"^\.ckpt-\d{8,}\.oopckpt\.tmp-\d+$")
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_DIGEST = 32


def oop_version() -> str:
    """``oop.__version__``."""
    return __version__


def _fault(point: str) -> None:
    """Die like a killed process at a named point when ``OOP_FAULT`` asks for it."""
    if os.environ.get("OOP_FAULT") == point:
        os.kill(os.getpid(), signal.SIGKILL)
        os._exit(137)  # pragma: no cover - where SIGKILL is not delivered at once


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


class CheckpointStore:
    """Numbered checkpoint files in ``directory`` (created if missing); keeps the newest ``keep``.

    ``on_warning`` receives a one-line message when a damaged checkpoint is skipped
    (a CLI prints it on stderr); ``warnings.warn`` is always called too.
    """

    def __init__(self, directory: str | os.PathLike[str], keep: int = 3,
                 on_warning: Callable[[str], None] | None = None) -> None:
        if keep < 1:
            raise ValueError(f"CheckpointStore: keep must be at least 1, got {keep}")
        self.directory = Path(directory)
        self.keep = keep
        self.on_warning = on_warning

    # ---- listing ------------------------------------------------------------------
    def _numbered(self) -> list[tuple[int, Path]]:
        if not self.directory.is_dir():
            return []
        out = []
        for p in self.directory.iterdir():
            m = _NAME.match(p.name)
            if m:
                out.append((int(m.group(1)), p))
        return sorted(out)

    def paths(self) -> list[Path]:
        """The checkpoint files, oldest first."""
        return [p for _, p in self._numbered()]

    # ---- writing ------------------------------------------------------------------
    def write(self, tree: Any, arrays: dict[str, Any], manifest: dict[str, Any]) -> Path:
        """Write the next checkpoint atomically and prune old ones; returns its path.

        ``manifest`` gets ``format``, ``oop_version`` and ``created`` filled in when
        missing; it must be JSON-serializable (as must ``tree``).
        """
        self.directory.mkdir(parents=True, exist_ok=True)
        self._remove_temporaries()
        numbered = self._numbered()
        n = numbered[-1][0] + 1 if numbered else 1
        man = {"format": FORMAT_VERSION, "oop_version": oop_version(),
               "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
               **manifest}
        man["format"] = FORMAT_VERSION
        final = self.directory / f"ckpt-{n:08d}.oopckpt"
        tmp = self.directory / f".{final.name}.tmp-{os.getpid()}"
        chunks = list(self._chunks(man, tree, arrays))
        total = sum(len(c) for c in chunks) + _DIGEST
        h = hashlib.sha256()
        try:
            with open(tmp, "wb") as f:
                written = 0
                for c in chunks:
                    if written + len(c) >= total // 2 and os.environ.get("OOP_FAULT") == \
                            "checkpoint-write-mid":
                        f.write(c[: max(0, total // 2 - written)])
                        f.flush()
                        os.fsync(f.fileno())
                        _fault("checkpoint-write-mid")
                    f.write(c)
                    h.update(c)
                    written += len(c)
                f.write(h.digest())
                f.flush()
                os.fsync(f.fileno())
            _fault("checkpoint-before-rename")
            os.replace(tmp, final)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        _fault("checkpoint-after-rename")
        _fsync_dir(self.directory)
        self.prune()
        return final

    @staticmethod
    def _chunks(man: dict[str, Any], tree: Any, arrays: dict[str, Any]) -> Iterator[Any]:
        def js(x: Any) -> bytes:
            try:
                return json.dumps(x, allow_nan=False, separators=(",", ":")).encode()
            except (TypeError, ValueError) as exc:
                raise CheckpointError(f"checkpoint data is not JSON-serializable: {exc}") from None

        mb, tb = js(man), js(tree)
        blobs = [(k, memoryview(v).cast("B") if not isinstance(v, bytes) else v)
                 for k, v in arrays.items()]
        ib = js([[k, len(b)] for k, b in blobs])
        yield MAGIC + _U32.pack(FORMAT_VERSION)
        for b in (mb, tb, ib):
            yield _U64.pack(len(b))
            yield b
        for _, b in blobs:
            yield b

    def _remove_temporaries(self) -> None:
        """Leftovers of a writer killed mid-write (a store has one writer at a time)."""
        for p in self.directory.iterdir():
            if _TMP.match(p.name):
                p.unlink(missing_ok=True)

    def prune(self) -> None:
        """Delete all but the newest ``keep`` checkpoint files."""
        numbered = self._numbered()
        for _, p in numbered[: max(0, len(numbered) - self.keep)]:
            p.unlink(missing_ok=True)
        if numbered[: max(0, len(numbered) - self.keep)]:
            _fsync_dir(self.directory)

    # ---- reading ------------------------------------------------------------------
    def _warn(self, msg: str) -> None:
        warnings.warn(msg, RuntimeWarning, stacklevel=3)
        if self.on_warning is not None:
            self.on_warning(msg)

    @staticmethod
    def read(path: Path) -> tuple[dict[str, Any], Any, dict[str, Any]]:
        """``(manifest, tree, arrays)`` of one file.

        Raises :class:`CheckpointError`: ``newer`` (``older``) in the message for a file
        of a newer (older) format, otherwise the file is damaged (bad magic, short, checksum).
        """
        data = memoryview(path.read_bytes())
        head = len(MAGIC) + _U32.size
        if len(data) < head or bytes(data[: len(MAGIC)]) != MAGIC:
            raise CheckpointError(f"{path}: not an oop checkpoint (bad magic)")
        (fmt,) = _U32.unpack_from(data, len(MAGIC))
        if fmt > FORMAT_VERSION:
            raise _NewerFormat(
                f"checkpoint {path} was written by a newer oop (format {fmt} > "
                f"{FORMAT_VERSION}); upgrade oop to resume from it"
            )
        if fmt < FORMAT_VERSION:
            raise _NewerFormat(
                f"checkpoint {path} was written by an older oop (format {fmt} < "
                f"{FORMAT_VERSION}: operator state changed); finish that run with the oop "
                "that wrote it, or delete the --checkpoint-dir to start over"
            )
        if len(data) < head + _DIGEST or \
                hashlib.sha256(data[:-_DIGEST]).digest() != bytes(data[-_DIGEST:]):
            raise CheckpointError(f"{path}: checksum mismatch (truncated or corrupt)")
        pos = head
        parts = []
        try:
            for _ in range(3):
                (n,) = _U64.unpack_from(data, pos)
                pos += _U64.size
                parts.append(json.loads(bytes(data[pos: pos + n])))
                pos += n
            man, tree, index = parts
            arrays: dict[str, Any] = {}
            for ref, n in index:
                arrays[ref] = data[pos: pos + n]
                pos += n
        except (struct.error, ValueError, TypeError) as exc:
            raise CheckpointError(f"{path}: malformed ({exc})") from None
        if pos != len(data) - _DIGEST or not isinstance(man, dict):
            raise CheckpointError(f"{path}: malformed (layout)")
        return man, tree, arrays

    def latest(self, fingerprint: str | None = None,
               describe: Callable[[dict[str, Any]], str] | None = None,
               ) -> tuple[dict[str, Any], Any, dict[str, Any]] | None:
        """The newest good checkpoint as ``(manifest, tree, arrays)``, or None if there is none.

        Damaged files are skipped with a warning. A file of another format raises
        :class:`CheckpointError`; so does one whose manifest ``fingerprint`` differs
        from ``fingerprint`` (when given). ``describe(manifest)`` may add what differs.
        """
        for _, path in reversed(self._numbered()):
            try:
                man, tree, arrays = self.read(path)
            except _NewerFormat:
                raise
            except (CheckpointError, OSError) as exc:
                self._warn(f"oop: skipping damaged checkpoint {exc}; trying an older one")
                continue
            if fingerprint is not None and man.get("fingerprint") != fingerprint:
                what = describe(man) if describe is not None else ""
                raise CheckpointError(
                    f"checkpoint in {self.directory} was written by another query "
                    f"({what or 'the plan fingerprint differs'}); use another "
                    "--checkpoint-dir or delete it"
                )
            return man, tree, arrays
        return None


class _NewerFormat(CheckpointError):
    """A checkpoint file of another format than this oop reads (newer or older): raised,
    never skipped as damaged."""
