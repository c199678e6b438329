"""Quoting for the SQL the auditor writes: identifiers and string literals."""


def q(ident: str) -> str:
    """An identifier, double-quoted."""
    return '"' + ident.replace('"', '""') + '"'


def lit(text: str) -> str:
    """A string literal, single-quoted."""
    return "'" + text.replace("'", "''") + "'"
