"""The report: Markdown (``report.md`` + ``plots/*.png``) and one self-contained HTML page.

`write_report` reads a runs directory, aggregates over seeds
(`aggregate`), builds the tables (`tables`)
and privacy-utility plots (`plots`) with the published numbers
(`reference_values`) beside ours, and writes both documents. The HTML
page has inline CSS and its plots embedded as ``data:image/png;base64`` URIs: no external asset,
so it can be mailed or archived as one file. Every file is written atomically, with the
permissions the user's umask gives a new file (not the 0600 of a temporary file).

Unknown metrics are an error listing the metrics the runs have; the References section lists
only the published tables that concern a dataset of the runs; results of a ``--quick``
reproduction are badged in the report's header, in every table and in every plot title.
"""

from __future__ import annotations

import base64
import html
import os
import warnings
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from gnnprivacy._validation import check_choice
from gnnprivacy.errors import InvalidParameterError, UnknownNameError
from gnnprivacy.reporting.plots import Plot
from gnnprivacy.reporting.tables import QUICK_BADGE, QUICK_NOTE, Table, to_html, to_markdown

_CSS = """
body{font-family:-apple-system,'Segoe UI',Helvetica,Arial,sans-serif;margin:2em auto;max-width:1200px;
color:#222;background:#fff;padding:0 1em}
h1{font-size:1.6em;border-bottom:2px solid #345;padding-bottom:.2em}h2{font-size:1.25em;margin-top:1.6em}
table{border-collapse:collapse;margin:1em 0 .3em;font-size:.85em}caption{font-weight:bold;text-align:left;
padding:.3em 0}th,td{border:1px solid #bbb;padding:.3em .6em;text-align:left;vertical-align:top}
th{background:#e8f0f8}tbody tr:nth-child(even){background:#f7f7f7}.note{font-size:.8em;color:#555;margin:0 0 1em}
.plots{display:flex;flex-wrap:wrap;gap:1em}figure{margin:0;border:1px solid #ddd;padding:.4em}
figcaption{font-size:.8em;color:#444}.failed{color:#b00}
"""


@dataclass
class Report:
    """Everything a report shows, independent of the output format."""

    title: str
    runs_dir: str
    n_records: int
    n_groups: int
    sections: list[tuple[str, list[Table]]] = field(default_factory=list)
    plots: list[Plot] = field(default_factory=list)
    failures: list[dict] = field(default_factory=list)
    references: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    groups: list = field(default_factory=list)  #: the aggregated configurations behind the tables
    created: str = field(default_factory=lambda: datetime.now(timezone.utc).isoformat(timespec="seconds"))


def build_report(runs_dir: str | os.PathLike, *, title: str = "gnnprivacy report",
                 metrics: tuple[str, ...] = ("test_accuracy",), reference_ids: list[str] | None = None,
                 missing_metrics_ok: bool = False, plots: str = "panels") -> Report:
    """Aggregate a runs directory into a `Report` (raises if it holds no finished run).

    ``metrics`` no run has raise ``UnknownNameError``, or are left out with
    ``missing_metrics_ok`` (a reproduction whose controls only some runs compute).
    ``plots="panels"`` draws one figure per configuration (beside the papers' points);
    ``"methods"`` draws every method on one figure per metric
    (`gnnprivacy.reporting.method_plot.methods_plot`, what the demo shows).
    """
    from gnnprivacy.records.store import ResultStore, UnreadableRecordWarning
    from gnnprivacy.reporting.aggregate import group_rows
    from gnnprivacy.reporting.reference_values import load_references
    from gnnprivacy.reporting.tables import (budget_partitions, comparison_tables, privacy_table,
                                             results_tables)

    check_choice("plots", plots, ("panels", "methods"))
    store = ResultStore(runs_dir)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnreadableRecordWarning)  # listed in the report instead
        rows = store.rows()
    if not rows:
        raise InvalidParameterError("runs_dir", "a folder holding at least one finished run record", str(runs_dir))
    available = sorted({k[len("metrics."):] for r in rows for k in r if k.startswith("metrics.")})
    if missing_metrics_ok:
        metrics = tuple(m for m in metrics if m in available) or ("test_accuracy",)
    for m in metrics:
        if m not in available:
            raise UnknownNameError(f"metric (the runs in {runs_dir} have)", m, available)
    groups = group_rows(rows)
    datasets = {g.get("dataset") for g in groups}
    refs = [r for r in load_references(reference_ids) if _concerns(r, datasets)]
    report = Report(title, str(runs_dir), len(rows), len(groups), failures=store.failures(),
                    references=[f"{r.id}: {r.citation}" for r in refs], groups=groups)
    for path, problem in store.skipped:
        report.notes.append(f"Skipped unreadable run record {path}: {problem}.")
    left_out = data_notes(groups)
    report.notes += left_out
    for note in left_out:
        warnings.warn(note, ReportDataWarning, stacklevel=2)
    if any(g.quick for g in groups):
        report.notes.insert(0, QUICK_NOTE + ".")
        report.title = f"{report.title} {QUICK_BADGE}"
    if not refs:
        report.notes.append("No published table concerns these datasets; no reference values are shown."
                            if reference_ids is None else
                            "This reproduction has no published table to compare with (the paper "
                            "gives its results as plots only); no reference values are shown."
                            if not reference_ids else
                            f"The published tables ({', '.join(reference_ids)}) are on datasets other "
                            "than these runs' (the combined reproduction report lists each cell and "
                            "why it is not run); no reference values are shown.")
    parts = budget_partitions(groups)
    ours = [t for m in metrics for part in parts for t in results_tables(part, m, refs)]
    report.sections.append(("Results (ours, aggregated over seeds)", ours))
    compared = comparison_tables(groups, refs)
    if compared:
        report.sections.append(("Published results beside ours (the papers' layout)", compared))
    report.sections.append(("Privacy spent", [privacy_table(groups)]))
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        report.notes.append("Plots skipped: matplotlib is not installed (pip install 'gnnprivacy[report]').")
    else:
        report.plots = _plots(plots, groups, parts, metrics, refs)
    return report


def _plots(kind: str, groups, parts, metrics, refs) -> list[Plot]:
    if kind == "methods":
        from gnnprivacy.reporting.method_plot import methods_plot

        return [p for m in metrics if (p := methods_plot(groups, m)) is not None]
    from gnnprivacy.reporting.plots import privacy_utility_plots

    return [p for m in metrics for part in parts for p in privacy_utility_plots(part, m, refs)]


class ReportDataWarning(UserWarning):
    """Some runs were left out of a report's summaries (repeats, non-finite metrics)."""


def data_notes(groups) -> list[str]:
    """One note per group that left runs out: repeats of a configuration and seed counted once,
    and runs whose metric is not finite (so a summary's ``n`` is below the group's run count)."""
    notes = []
    for g in groups:
        name = f"{g.get('method')} on {g.get('dataset')}"
        if g.repeats:
            notes.append(f"{len(g.repeats)} run(s) of {name} repeat the configuration and seed of another "
                         f"run and are counted once ({', '.join(g.repeats[:5])}"
                         f"{', ...' if len(g.repeats) > 5 else ''}).")
        for metric, ids in g.nonfinite.items():
            notes.append(f"{metric} of {name} is missing or not finite (e.g. NaN) in {len(ids)} of "
                         f"{g.n} run(s), left out of its summary ({', '.join(ids[:5])}"
                         f"{', ...' if len(ids) > 5 else ''}).")
    return notes


def _concerns(ref, datasets: set) -> bool:
    """Whether a published table has a cell about one of ``datasets``."""
    return any(v.match is not None and v.match.get("dataset") in datasets for v in ref.values())


def render_markdown(report: Report, plot_dir: str = "plots") -> str:
    """Markdown; plots are referenced as ``plots/<file>.png`` (written by `write_report`)."""
    out = [f"# {report.title}", "",
           f"{report.n_records} finished runs in `{report.runs_dir}`, {report.n_groups} configurations; "
           f"generated {report.created}.", ""] + [f"> {n}\n" for n in report.notes]
    for i, (heading, tables) in enumerate(report.sections):
        out += [f"## {heading}", ""] + [to_markdown(t) for t in tables]
        if i == 0 and report.plots:
            out += ["## Privacy-utility plots", ""]
            out += [f"![{p.title}]({plot_dir}/{p.filename})\n" for p in report.plots]
    refs = [f"- {r}" for r in report.references] or ["- none: no published table concerns these datasets"]
    out += _failures_md(report) + ["## References", ""] + refs + [""]
    return "\n".join(out)


def _failures_md(report: Report) -> list[str]:
    if not report.failures:
        return []
    lines = ["## Failed runs", ""]
    lines += [f"- `{f['run_id']}`: {f.get('error', '')}" for f in report.failures]
    return lines + [""]


def render_html(report: Report) -> str:
    """One self-contained HTML page (inline CSS, plots as base64 data URIs)."""
    esc = html.escape
    body = [f"<h1>{esc(report.title)}</h1>",
            f"<p>{report.n_records} finished runs in <code>{esc(report.runs_dir)}</code>, "
            f"{report.n_groups} configurations; generated {esc(report.created)}.</p>"]
    body += [f'<p class="note">{esc(n)}</p>' for n in report.notes]
    for i, (heading, tables) in enumerate(report.sections):
        body.append(f"<h2>{esc(heading)}</h2>")
        body += [to_html(t) for t in tables]
        if i == 0 and report.plots:
            body += _plots_html(report.plots)
    if report.failures:
        body.append('<h2 class="failed">Failed runs</h2><ul>')
        body += [f"<li><code>{esc(f['run_id'])}</code>: {esc(str(f.get('error', '')))}</li>" for f in report.failures]
        body.append("</ul>")
    refs = [esc(r) for r in report.references] or ["none: no published table concerns these datasets"]
    body.append("<h2>References</h2><ul>" + "".join(f"<li>{r}</li>" for r in refs) + "</ul>")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{esc(report.title)}</title><style>{_CSS}</style></head>\n<body>\n"
            + "\n".join(body) + "\n</body></html>\n")


def _plots_html(plots: list[Plot]) -> list[str]:
    return ["<h2>Privacy-utility plots</h2>"] + figures_html(plots)


def figures_html(plots: list[Plot]) -> list[str]:
    """The plots as one ``<div class="plots">`` of figures with embedded PNGs."""
    out = ['<div class="plots">']
    for p in plots:
        data = base64.b64encode(p.png).decode("ascii")
        out.append(f'<figure><img alt="{html.escape(p.title)}" src="data:image/png;base64,{data}">'
                   f"<figcaption>{html.escape(p.title)}</figcaption></figure>")
    return out + ["</div>"]


def write_plots(out, under: str, plots: list[Plot]) -> list[Path]:
    """Write each plot's PNG into ``under/`` of the `~gnnprivacy._files.OutputFolder` ``out``
    (atomically) and drop the PNGs an earlier report wrote there; a file there that gnnprivacy
    did not write is never deleted (and replaced only with ``--force``)."""
    out.check([f"{under}/{p.filename}" for p in plots])
    paths = [out.write(f"{under}/{p.filename}", p.png) for p in plots]
    out.remove_stale(under, {f"{under}/{p.filename}" for p in plots})
    return paths


def report_files(report: Report | None = None) -> list[str]:
    """The files (relative to the report folder) a report writes: ``report.md``, ``report.html``
    and its plots."""
    plots = [f"plots/{p.filename}" for p in report.plots] if report is not None else []
    return ["report.md", "report.html"] + plots


def check_report_dir(runs_dir, out_dir) -> None:
    """Refuse a report folder that is the runs directory it reports on (the input)."""
    a, b = Path(runs_dir), Path(out_dir)
    if a.exists() and b.exists() and os.path.samefile(a, b):
        raise InvalidParameterError("output", "a folder other than the runs directory the report reads",
                                    str(out_dir))


def check_report_outputs(runs_dir, out_dir, force: bool = False) -> None:
    """Before any work: ``out_dir`` is not ``runs_dir``, and a report there replaces no
    ``report.md`` or ``report.html`` that gnnprivacy did not write (unless ``force``)."""
    from gnnprivacy._files import OutputFolder

    check_report_dir(runs_dir, out_dir)
    OutputFolder(out_dir, name="output", force=force).check(report_files())


def _card_sections(runs_dir) -> list[tuple[str, str]]:
    """(Markdown, HTML) of the privacy report cards saved under ``runs_dir/cards``."""
    from gnnprivacy.auditing.report_card import card_to_html, card_to_markdown, load_cards

    return [(card_to_markdown(c), card_to_html(c)) for c in load_cards(runs_dir)]


def write_report(runs_dir: str | os.PathLike, out_dir: str | os.PathLike, *, title: str = "gnnprivacy report",
                 metrics: tuple[str, ...] = ("test_accuracy",), reference_ids: list[str] | None = None,
                 missing_metrics_ok: bool = False, plots: str = "panels", force: bool = False) -> list[Path]:
    """Write ``report.md`` (+ ``plots/``) and ``report.html`` into ``out_dir``; returns their paths.

    ``plots``: ``"panels"`` or ``"methods"``, as in `build_report`. A rerun replaces what an
    earlier report wrote there; a file there that gnnprivacy did not write is refused unless
    ``force`` (see `gnnprivacy._files.OutputFolder`), and ``out_dir`` may not be ``runs_dir``.

    Raises:
        InvalidParameterError: ``runs_dir`` holds no finished run, ``out_dir`` is not writable,
            is ``runs_dir``, or holds a ``report.md``, ``report.html`` or plot gnnprivacy did not
            write (without ``force``).
    """
    from gnnprivacy._files import OutputFolder, check_writable_dir

    check_writable_dir(out_dir, name="output", create=False)  # before reading the runs: fails at once
    check_report_outputs(runs_dir, out_dir, force)
    out = OutputFolder(out_dir, name="output", force=force)
    report = build_report(runs_dir, title=title, metrics=metrics, reference_ids=reference_ids,
                          missing_metrics_ok=missing_metrics_ok, plots=plots)
    out.check(report_files(report))  # every file before the first write
    try:
        write_plots(out, "plots", report.plots)
        md_text, html_text = render_markdown(report), render_html(report)
        cards = _card_sections(runs_dir)
        if cards:
            md_text += "\n" + "\n".join(c[0] for c in cards)
            html_text = html_text.replace("\n</body></html>", "\n" + "\n".join(c[1] for c in cards)
                                          + "\n</body></html>", 1)
        md = out.write("report.md", md_text.encode("utf-8"))
        page = out.write("report.html", html_text.encode("utf-8"))
    except OSError as exc:
        raise InvalidParameterError("output", f"a writable directory ({exc.strerror or exc})", str(out_dir)) from None
    return [md, page]
