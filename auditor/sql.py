"""SQL the auditor writes in many places: quoting (identifiers, string literals) and a resource id's last segment."""


def q(ident: str) -> str:
    """An identifier, double-quoted."""
    return '"' + ident.replace('"', '""') + '"'


def lit(text: str) -> str:
    """A string literal, single-quoted."""
    return "'" + text.replace("'", "''") + "'"


def last_segment(expr: str) -> str:
    """SQL of the last segment of an id, after its last '/' or ':': the instance id an ARN or a path ends with,
    by which an inventory, a job or a split line may name what the bill names whole."""
    return f"regexp_extract({expr}, '[^/:]+$')"
