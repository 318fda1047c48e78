"""oop -- an out-of-order stream processing engine for disordered feeds.

Streams are *progressing streams* (004 ch. 4): tuples arrive in any order and
low-watermark punctuation says how far each stream has progressed. Operators
never wait for order; they emit results and purge state on punctuation.
"""

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
from oop.api import (
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
    SlideByTuple,
    Sliding,
    Tumbling,
    agg,
)

from oop.version import __version__


def __getattr__(name: str) -> object:
    """Lazy attributes: ``oop.sql`` (streaming SQL, :mod:`oop.sql`; imports sqlglot on first use)."""
    if name == "sql":
        import importlib

        return importlib.import_module("oop.sql")
    raise AttributeError(f"module 'oop' has no attribute {name!r}")


__all__ = [
    "Stream",
    "from_arrow",
    "from_batches",
    "from_iter",
    "from_connector",
    "from_socket",
    "from_pandas",
    "from_parquet",
    "Punctuation",
    "GroupPunctuation",
    "JointPunctuation",
    "EndOfStream",
    "END_OF_STREAM",
    "LatePolicy",
    "Ordered",
    "BoundedDelay",
    "BoundedTuples",
    "External",
    "Idle",
    "Adaptive",
    "Granular",
    "parse_punctuation",
    "Select",
    "Project",
    "Apply",
    "DupElim",
    "Meld",
    "Tumbling",
    "Sliding",
    "Landmark",
    "RowSliding",
    "PartitionedRows",
    "SlideByTuple",
    "agg",
    "sql",
    "OopError",
    "ConfigError",
    "EmptyInputError",
    "LateTupleError",
    "NullTimeError",
    "PunctuationOrderError",
    "SchemaMismatchError",
    "TimeTypeError",
    "UnknownColumnError",
]
