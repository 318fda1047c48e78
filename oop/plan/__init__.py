"""Plans: sources, the push executor, sinks and run results."""
