"""Adapters: each turns one kind of source into the normalized tables. They know the clouds; nothing
after them does."""
