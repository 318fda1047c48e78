"""Stream model (the foundation every operator builds on): elements, time columns, late policy."""
