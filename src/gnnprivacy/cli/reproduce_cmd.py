"""``gnnprivacy reproduce``: run a packaged paper-table sweep and render its report."""

from __future__ import annotations

import sys

import click

from gnnprivacy.cli.sweep_cmd import executor_options, pick_runs_dir, run_and_summarise, runs_dir_option
from gnnprivacy.errors import GnnPrivacyError


def _print_list(data_root) -> None:
    """Every reproduction, and whether its datasets are available under the data root."""
    from gnnprivacy.datasets.paths import resolve_root
    from gnnprivacy.experiments.reproduce import list_reproductions

    try:
        root = resolve_root(data_root)
    except GnnPrivacyError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"Data root: {root.describe()}")
    for r in list_reproductions():
        missing = r.missing_datasets(str(root.path))
        click.echo(f"{r.name}: {r.description}")
        click.echo(f"    runs: {r.count()} (quick: {r.count(quick=True)}); "
                   f"published tables: {', '.join(r.references) or '-'}")
        click.echo("    runnable: yes" if not missing else
                   f"    runnable: no, {len(missing)} of {len(r.datasets())} datasets unavailable: "
                   f"{', '.join(missing)}")
        if r.notes:
            click.echo(f"    notes: {r.notes}")


@click.command("reproduce")
@click.argument("name", required=False)
@click.option("--list", "list_only", is_flag=True, help="list the available reproductions and exit")
@click.option("--quick", is_flag=True, help="the small CI variant (one seed, fewer steps, fewer budgets)")
@runs_dir_option(None, "results store (default: runs/<name>[-quick]); finished runs there are skipped")
@click.option("-o", "--output", "report_dir", default=None, type=click.Path(file_okay=False),
              help="report folder (default: reports/<name>[-quick])")
@click.option("--report", "report_alias", default=None, hidden=True, type=click.Path(file_okay=False))
@executor_options
def reproduce_command(name, list_only, quick, runs_dir, runs_alias, report_dir, report_alias, executor, address,
                      workers, data_root, quiet):
    """Reproduce a paper table NAME (see --list): run its sweep, then write a report with the
    published numbers beside ours. Exit code 1 if any run failed (the report is still written)."""
    from gnnprivacy.experiments.reproduce import get_reproduction
    from gnnprivacy.reporting.html import write_report

    if list_only:
        _print_list(data_root)
        return
    if not name:
        raise click.UsageError("give a reproduction NAME (see `gnnprivacy reproduce --list`)")
    try:
        repro = get_reproduction(name)
    except GnnPrivacyError as exc:
        raise click.ClickException(str(exc)) from None
    spec = repro.spec(quick=quick)
    runs_dir = pick_runs_dir(runs_dir, runs_alias) or f"runs/{spec.name}"
    if report_alias is not None and report_dir is not None and report_alias != report_dir:
        raise click.UsageError("give -o/--output once (--report is its old spelling)")
    report_dir = report_dir or report_alias or f"reports/{spec.name}"
    result = run_and_summarise(spec, runs_dir=runs_dir, executor=executor, address=address, workers=workers,
                               data_root=data_root, quiet=quiet)
    try:
        paths = write_report(runs_dir, report_dir, title=f"Reproduction {spec.name}: {repro.description}",
                             reference_ids=list(repro.references),  # none: no paper table
                             metrics=repro.report_metrics, missing_metrics_ok=True)
    except GnnPrivacyError as exc:
        raise click.ClickException(f"no report: {exc}") from None
    for p in paths:
        click.echo(f"report: {p}")
    if not result.ok:
        sys.exit(1)
