"""Data-transfer lines, as every reader gives them: the four `x_Transfer*` columns, set only on a line whose
transfer kind (inter_region, inter_zone, internet, ...) the reader recognised, NULL on every other line."""

from __future__ import annotations


def transfer_columns(kind: str, direction: str, source: str, destination: str | None) -> dict[str, str]:
    """SQL of the transfer columns from the reader's expressions for the line's transfer kind (NULL when it is no
    transfer), its direction ('in' or 'out'), and its source and destination regions (None: the export never
    names the destination)."""
    def when_transfer(expr: str) -> str:
        return f"CASE WHEN ({kind}) IS NOT NULL THEN {expr} END"

    return {
        "x_TransferKind": kind,
        "x_TransferDirection": when_transfer(direction),
        "x_TransferFrom": when_transfer(source),
        "x_TransferTo": when_transfer(destination) if destination is not None else "CAST(NULL AS VARCHAR)",
    }
