"""Stream model (the foundation every operator builds on): elements, time columns, late policy."""

#: rows per source batch unless a caller says otherwise (here, not in
#: :mod:`oop.api`, so the CLI can show it without importing the engine)
DEFAULT_BATCH_SIZE = 65_536
