"""oop -- an out-of-order stream processing engine for disordered feeds.

Streams are *progressing streams* (004 ch. 4): tuples arrive in any order and
low-watermark punctuation says how far each stream has progressed. Operators
never wait for order; they emit results and purge state on punctuation.

The public names are loaded on first use (PEP 562): ``import oop`` costs a
few milliseconds and does not import numba, pyarrow or pandas; ``oop.Stream``
or ``from oop import Tumbling`` imports the module that defines it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from oop.lazy import lazy_names

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
        Session,
        SlideByTuple,
        Sliding,
        Tumbling,
        agg,
    )


from oop.version import __version__

#: public name -> (defining module, attribute; ``None``: the module itself)
_LAZY: dict[str, tuple[str, str | None]] = {
    "Stream": ("oop.api", "Stream"),
    "from_arrow": ("oop.api", "from_arrow"),
    "from_batches": ("oop.api", "from_batches"),
    "from_iter": ("oop.api", "from_iter"),
    "from_connector": ("oop.api", "from_connector"),
    "from_socket": ("oop.api", "from_socket"),
    "from_pandas": ("oop.api", "from_pandas"),
    "from_parquet": ("oop.api", "from_parquet"),
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


__getattr__, __dir__ = lazy_names("oop", _LAZY, globals())
