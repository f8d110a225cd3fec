"""``gnnprivacy results``: list, filter and export the run records of a runs directory."""

from __future__ import annotations

import click

from gnnprivacy.errors import GnnPrivacyError
from gnnprivacy.reporting.export import FORMATS


@click.command("results")
@click.argument("runs_dir", type=click.Path(exists=True, file_okay=False), required=False)
@click.option("--runs-dir", "runs_dir_option", type=click.Path(exists=True, file_okay=False), default=None,
              help="the runs directory (same as the RUNS_DIR argument)")
@click.option("--filter", "-f", "filters", multiple=True, metavar="KEY=VALUE",
              help="keep matching runs (repeatable, all must hold); KEY is a column (method, dataset, "
                   "epsilon = spent), or a config/metrics key (config.epsilon = target, lr, test_accuracy)")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None,
              help="write to this file (required for parquet); default: stdout")
@click.option("--failed/--no-failed", default=True, show_default=True, help="include failed runs")
@click.option("--force", is_flag=True, help="let -o replace an existing run record, model or checkpoint")
def results_command(runs_dir, runs_dir_option, filters, fmt, output, failed, force):
    """List the runs in RUNS_DIR (one row per run record), filter them and export them.

    Columns: seed_index is the repeat index in a sweep (0, 1, 2 ...), seed the run seed derived
    from it. Unreadable (e.g. truncated) records are skipped with a warning naming the file."""
    runs_dir = _pick_dir(runs_dir, runs_dir_option)
    from gnnprivacy.records.store import ResultStore, filter_rows
    from gnnprivacy.reporting import export

    import warnings

    from gnnprivacy.records.store import UnreadableRecordWarning

    store = ResultStore(runs_dir)
    try:
        if output:  # before reading anything: a bad -o is one line, not a traceback after the work
            from gnnprivacy._files import check_output_file

            check_output_file(output, name="-o/--output", force=force)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UnreadableRecordWarning)  # printed below, once, plainly
            all_rows = store.rows(include_failed=failed)
        for path, problem in store.skipped:
            click.echo(f"warning: skipping run record {path}: {problem} (a sweep rerun redoes this run)", err=True)
        rows = filter_rows(all_rows, list(filters))
        if fmt == "parquet":
            if not output:
                raise click.UsageError("--format parquet needs -o FILE")
            export.write_parquet(rows, output)
            click.echo(f"{len(rows)} runs written to {output}", err=True)
            return
    except GnnPrivacyError as exc:
        raise click.ClickException(str(exc)) from None
    if fmt == "table":
        text = _table_text(rows)
    else:
        text = export.to_csv(rows) if fmt == "csv" else export.to_json(rows)
    if output:
        from gnnprivacy._files import atomic_write

        atomic_write(output, text, what="export")
        click.echo(f"{len(rows)} runs written to {output}", err=True)
    else:
        click.echo(text, nl=False)


def _pick_dir(argument, option):
    if argument and option and argument != option:
        raise click.UsageError("give the runs directory once (RUNS_DIR or --runs-dir)")
    if not (argument or option):
        raise click.UsageError("give the runs directory: gnnprivacy results RUNS_DIR")
    return argument or option


def _table_text(rows) -> str:
    import io

    from rich.console import Console
    from rich.table import Table

    from gnnprivacy.reporting.export import TABLE_COLUMNS, columns_of, table_cell

    present = set(columns_of(rows))
    cols = [c for c in TABLE_COLUMNS if c in present]
    table = Table(title=f"{len(rows)} runs", title_justify="left")
    for c in cols:
        table.add_column(c.replace("metrics.", ""), overflow="fold")
    for row in rows:
        table.add_row(*(table_cell(row.get(c)) for c in cols))
    buf = io.StringIO()
    Console(file=buf, width=200, color_system=None, force_terminal=False).print(table)
    return buf.getvalue()
