"""``gnnprivacy report``: Markdown and self-contained HTML report of a runs directory."""

from __future__ import annotations

import click

from gnnprivacy.errors import GnnPrivacyError


@click.command("report")
@click.argument("runs_dir", type=click.Path(exists=True, file_okay=False), required=False)
@click.option("--runs-dir", "runs_dir_option", type=click.Path(exists=True, file_okay=False), default=None,
              help="the runs directory (same as the RUNS_DIR argument)")
@click.option("-o", "--output", "out_dir", required=True, type=click.Path(file_okay=False),
              help="folder for report.md, report.html and plots/")
@click.option("--title", default=None, help="report title (default: the runs folder's name)")
@click.option("--metric", "metrics", multiple=True, default=("test_accuracy",), show_default=True,
              help="metric(s) to tabulate and plot (repeatable)")
@click.option("--reference", "references", multiple=True,
              help="only these published tables (ids of reporting/references/*.yaml; default: all)")
@click.option("--force", is_flag=True, help="let -o replace report files that gnnprivacy did not write there")
def report_command(runs_dir, runs_dir_option, out_dir, title, metrics, references, force):
    """Aggregate RUNS_DIR over seeds (mean ± std, 95% CI) with the papers' numbers beside ours.

    Unreadable (e.g. truncated) records are skipped with a warning naming the file. A rerun
    replaces the files an earlier report wrote; any other file there is kept unless --force."""
    from pathlib import Path

    from gnnprivacy.cli.results_cmd import _pick_dir
    from gnnprivacy.reporting.html import write_report

    runs_dir = _pick_dir(runs_dir, runs_dir_option)
    try:
        paths = write_report(runs_dir, out_dir, title=title or f"gnnprivacy report: {Path(runs_dir).name}",
                             metrics=tuple(metrics), reference_ids=list(references) or None, force=force)
    except GnnPrivacyError as exc:
        raise click.ClickException(str(exc)) from None
    for p in paths:
        click.echo(str(p))
    _warn_skipped(runs_dir)


def _warn_skipped(runs_dir) -> None:
    import warnings

    from gnnprivacy.records.store import ResultStore

    store = ResultStore(runs_dir)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        store.valid_record_paths()
    for path, problem in store.skipped:
        click.echo(f"warning: skipped run record {path}: {problem} (a sweep rerun redoes this run)", err=True)
