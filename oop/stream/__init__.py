"""Stream model: elements, time columns, late policy and the fluent API."""
