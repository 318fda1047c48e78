"""Stream model: elements, time columns, late policy and the fluent API."""

#: rows per source batch unless a caller says otherwise (here, not in
#: :mod:`oop.stream.api`, so the CLI can show it without importing the engine)
DEFAULT_BATCH_SIZE = 65_536
