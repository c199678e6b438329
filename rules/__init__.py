"""The rule pack: one module per rule, named by its ID."""
