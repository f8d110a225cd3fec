"""Export index rows (see `gnnprivacy.records.store.ResultStore.rows`) as CSV, JSON or Parquet."""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path
from typing import Any

from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.records.record import dumps

FORMATS = ("table", "csv", "json", "parquet")
TABLE_COLUMNS = ("run_id", "status", "method", "dataset", "seed_index", "seed", "epsilon", "delta",
                 "metrics.test_accuracy", "error")


def columns_of(rows: list[dict[str, Any]]) -> list[str]:
    """All columns, in first-seen order (top-level, then config/metrics/privacy/timings)."""
    seen: dict[str, None] = {}
    for row in rows:
        for key in row:
            seen.setdefault(key, None)
    top = [k for k in seen if "." not in k]
    return top + sorted(k for k in seen if "." in k)


def to_csv(rows: list[dict[str, Any]]) -> str:
    """CSV text with every column (empty cells for missing values; inf written as ``inf``)."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns_of(rows), extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: "" if v is None else v for k, v in row.items()})
    return buf.getvalue()


def to_json(rows: list[dict[str, Any]]) -> str:
    """A strict-JSON list of rows (non-finite floats as ``"inf"``/``"nan"`` strings)."""
    return dumps(rows, indent=2) + "\n"


def write_parquet(rows: list[dict[str, Any]], path: str | Path) -> Path:
    """Write rows to a Parquet file (needs pyarrow); mixed-type columns are stored as strings."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise InvalidParameterError("format", "table, csv or json (Parquet needs pyarrow: "
                                    "pip install 'gnnprivacy[report]' or pip install pyarrow)", "parquet") from None
    arrays = {}
    for col in columns_of(rows):
        values = [r.get(col) for r in rows]
        try:
            arrays[col] = pa.array(values)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            arrays[col] = pa.array([None if v is None else str(v) for v in values])
    import io

    from gnnprivacy._files import atomic_write

    buffer = io.BytesIO()
    pq.write_table(pa.table(arrays), buffer)
    return atomic_write(path, buffer.getvalue(), what="Parquet export")


def table_cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return "inf" if math.isinf(value) else f"{value:.4g}"
    return str(value)
