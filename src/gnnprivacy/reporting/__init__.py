"""Run records, aggregation over seeds, tables, plots and the HTML/Markdown report.

Report rendering (``write_report``, ``build_report``) pulls in matplotlib and loads on first
use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gnnprivacy._lazy import lazy_exports
from gnnprivacy.records.record import RunRecord, read_record, write_json_atomic

if TYPE_CHECKING:
    from gnnprivacy.reporting.aggregate import group_rows, summarize
    from gnnprivacy.reporting.html import build_report, write_report
    from gnnprivacy.reporting.reference_values import load_references

__all__ = ["RunRecord", "read_record", "write_json_atomic", "write_report", "build_report",
           "group_rows", "summarize", "load_references"]

__getattr__, __dir__ = lazy_exports(__name__, __file__, globals())
