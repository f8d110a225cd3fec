"""Run records and the result store: `record` (`RunRecord`, its JSON form, atomic writes) and
`store` (`ResultStore`: the runs directory, its index and the claims that keep concurrent
writers apart). Written by the drivers, read by `gnnprivacy.reporting`; imports no torch."""

from __future__ import annotations

from gnnprivacy.records.record import RunRecord, read_record, write_json_atomic
from gnnprivacy.records.store import ResultStore

__all__ = ["RunRecord", "read_record", "write_json_atomic", "ResultStore"]
