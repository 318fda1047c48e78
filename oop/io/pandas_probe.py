"""Keep pyarrow from importing pandas in a process that never sees pandas objects.

pyarrow imports pandas (~75 MiB of resident memory, ~0.3 s) the first time it
converts between numpy and Arrow (``pa.array(ndarray)``, ``Array.to_numpy``,
``np.asarray(array)``), only to ask whether its input is a pandas object or
to look up ``pandas.NaT``. Both lookups run once per process and remember a
failed import. :func:`skip_pandas_probe` makes them fail once, with pandas
import blocked for that moment, so they answer "no pandas" and never ask
again; nothing else changes. A later explicit use (``Table.to_pandas``,
``Table.from_pandas``, ``import pandas``) still imports pandas on demand.

For processes that read files and write files (``oop replay``): afterwards
pyarrow does not recognise pandas' own scalars (``pd.NaT``, ``pd.NA``,
``pd.Timestamp``) inside Python lists as nulls or timestamps, and
``pa.array(series)`` reads a pandas Series as a plain sequence. Do not call
it where pandas objects reach pyarrow (the PySpark path).
"""

from __future__ import annotations

import importlib.abc
import sys
from typing import Any

__all__ = ["skip_pandas_probe"]


class _BlockPandas(importlib.abc.MetaPathFinder):
    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name == "pandas" or name.startswith("pandas."):
            raise ImportError("pandas is not used by this process (oop.io.pandas_probe)")
        return None


def skip_pandas_probe() -> bool:
    """Answer pyarrow's two pandas probes with "no pandas"; True if they were answered.

    False when pandas is already imported (nothing to save) or the probes
    already ran. O(1); idempotent.
    """
    if "pandas" in sys.modules:
        return False
    import numpy as np
    import pyarrow as pa
    import pyarrow.lib

    shim = getattr(pyarrow.lib, "_pandas_api", None)
    block = _BlockPandas()
    sys.meta_path.insert(0, block)
    try:
        if shim is not None:
            shim.have_pandas  # Python side: pa.array / is-pandas checks  # noqa: B018
        # C++ side: the first numpy conversion looks up pandas.NaT & co. once
        pa.array(np.zeros(1, np.int64)).to_numpy(zero_copy_only=False)
    finally:
        sys.meta_path.remove(block)
    return "pandas" not in sys.modules
