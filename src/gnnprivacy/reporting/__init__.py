"""Run records (one JSON file per run) and, later, aggregation, tables, plots and reports."""

from gnnprivacy.reporting.record import RunRecord, read_record, write_json_atomic

__all__ = ["RunRecord", "read_record", "write_json_atomic"]
