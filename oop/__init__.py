"""oop -- an out-of-order stream processing engine for disordered feeds.

Streams are *progressing streams* (004 ch. 4): tuples arrive in any order and
low-watermark punctuation says how far each stream has progressed. Operators
never wait for order; they emit results and purge state on punctuation.

The public names are loaded on first use (PEP 562): ``import oop`` costs a
few milliseconds and does not import numba, pyarrow or pandas; ``oop.Stream``
or ``from oop import Tumbling`` imports the module that defines it.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the eager imports, for type checkers and IDEs
    import oop.sql as sql
    from oop.errors import (
        ConfigError,
        EmptyInputError,
        LateTupleError,
        NullTimeError,
        OopError,
        PunctuationOrderError,
        SchemaMismatchError,
        TimeTypeError,
        UnknownColumnError,
    )
    from oop.operators.apply import Apply
    from oop.operators.dupelim import DupElim
    from oop.operators.meld import Meld
    from oop.operators.project import Project
    from oop.operators.select import Select
    from oop.punctuation import (
        Adaptive,
        BoundedDelay,
        BoundedTuples,
        External,
        Granular,
        Idle,
        Ordered,
        parse_punctuation,
    )
    from oop.stream.api import (
        Stream,
        from_arrow,
        from_batches,
        from_connector,
        from_iter,
        from_pandas,
        from_parquet,
        from_socket,
    )
    from oop.stream.elements import (
        END_OF_STREAM,
        EndOfStream,
        GroupPunctuation,
        JointPunctuation,
        Punctuation,
    )
    from oop.stream.late import LatePolicy
    from oop.window import (
        Landmark,
        PartitionedRows,
        RowSliding,
        Session,
        SlideByTuple,
        Sliding,
        Tumbling,
        agg,
    )


__version__ = "0.1.0"

#: public name -> (defining module, attribute; ``None``: the module itself)
_LAZY: dict[str, tuple[str, str | None]] = {
    "Stream": ("oop.stream.api", "Stream"),
    "from_arrow": ("oop.stream.api", "from_arrow"),
    "from_batches": ("oop.stream.api", "from_batches"),
    "from_iter": ("oop.stream.api", "from_iter"),
    "from_connector": ("oop.stream.api", "from_connector"),
    "from_socket": ("oop.stream.api", "from_socket"),
    "from_pandas": ("oop.stream.api", "from_pandas"),
    "from_parquet": ("oop.stream.api", "from_parquet"),
    "Punctuation": ("oop.stream.elements", "Punctuation"),
    "GroupPunctuation": ("oop.stream.elements", "GroupPunctuation"),
    "JointPunctuation": ("oop.stream.elements", "JointPunctuation"),
    "EndOfStream": ("oop.stream.elements", "EndOfStream"),
    "END_OF_STREAM": ("oop.stream.elements", "END_OF_STREAM"),
    "LatePolicy": ("oop.stream.late", "LatePolicy"),
    "Ordered": ("oop.punctuation", "Ordered"),
    "BoundedDelay": ("oop.punctuation", "BoundedDelay"),
    "BoundedTuples": ("oop.punctuation", "BoundedTuples"),
    "External": ("oop.punctuation", "External"),
    "Idle": ("oop.punctuation", "Idle"),
    "Adaptive": ("oop.punctuation", "Adaptive"),
    "Granular": ("oop.punctuation", "Granular"),
    "parse_punctuation": ("oop.punctuation", "parse_punctuation"),
    "Select": ("oop.operators.select", "Select"),
    "Project": ("oop.operators.project", "Project"),
    "Apply": ("oop.operators.apply", "Apply"),
    "DupElim": ("oop.operators.dupelim", "DupElim"),
    "Meld": ("oop.operators.meld", "Meld"),
    "Tumbling": ("oop.window", "Tumbling"),
    "Sliding": ("oop.window", "Sliding"),
    "Landmark": ("oop.window", "Landmark"),
    "RowSliding": ("oop.window", "RowSliding"),
    "PartitionedRows": ("oop.window", "PartitionedRows"),
    "Session": ("oop.window", "Session"),
    "SlideByTuple": ("oop.window", "SlideByTuple"),
    "agg": ("oop.window", "agg"),
    "sql": ("oop.sql", None),
    "OopError": ("oop.errors", "OopError"),
    "ConfigError": ("oop.errors", "ConfigError"),
    "EmptyInputError": ("oop.errors", "EmptyInputError"),
    "LateTupleError": ("oop.errors", "LateTupleError"),
    "NullTimeError": ("oop.errors", "NullTimeError"),
    "PunctuationOrderError": ("oop.errors", "PunctuationOrderError"),
    "SchemaMismatchError": ("oop.errors", "SchemaMismatchError"),
    "TimeTypeError": ("oop.errors", "TimeTypeError"),
    "UnknownColumnError": ("oop.errors", "UnknownColumnError"),
}

__all__ = list(_LAZY)


def __getattr__(name: str) -> object:
    """Import the module defining public ``name`` on first use and cache the value here.

    Subpackages load the same way (``oop.window`` after a bare ``import oop``).
    """
    if name not in _LAZY:
        if not name.startswith("_") and importlib.util.find_spec(f"oop.{name}") is not None:
            return importlib.import_module(f"oop.{name}")
        raise AttributeError(f"module 'oop' has no attribute {name!r}")
    module, attr = _LAZY[name]
    value = importlib.import_module(module)
    if attr is not None:
        value = getattr(value, attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
