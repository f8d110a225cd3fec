"""Run records, aggregation over seeds, tables, plots and the HTML/Markdown report."""

from gnnprivacy.reporting.record import RunRecord, read_record, write_json_atomic

__all__ = ["RunRecord", "read_record", "write_json_atomic", "write_report", "build_report",
           "group_rows", "summarize", "load_references"]


def __getattr__(name):
    # Report rendering pulls in matplotlib; import it only when asked for.
    if name in ("write_report", "build_report"):
        from gnnprivacy.reporting import html

        return getattr(html, name)
    if name in ("group_rows", "summarize"):
        from gnnprivacy.reporting import aggregate

        return getattr(aggregate, name)
    if name == "load_references":
        from gnnprivacy.reporting.reference_values import load_references

        return load_references
    raise AttributeError(name)
