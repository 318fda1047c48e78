"""Operators: one module per operator, each stating its punctuation rule."""
