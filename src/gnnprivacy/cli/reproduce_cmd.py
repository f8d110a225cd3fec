"""``gnnprivacy reproduce``: run a packaged paper-table sweep and render its report."""

from __future__ import annotations

import sys

import click

from gnnprivacy.cli.sweep_cmd import (echo_sweep_result, executor_options, pick_runs_dir, run_and_summarise,
                                      runs_dir_option, sweep_progress)
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
@click.option("--all", "run_all", is_flag=True,
              help="run every paper reproduction and write one report with verdicts (reports/reproduction)")
@click.option("--quick", is_flag=True, help="the small CI variant (one seed, fewer steps, fewer budgets)")
@click.option("--report-only", is_flag=True, help="with --all: run nothing, report on the runs already there")
@click.option("--docs", "docs_page", default=None, type=click.Path(dir_okay=False),
              help="with --all: also write this Markdown page (figures in a folder named after it)")
@runs_dir_option(None, "results store (default: runs/<name>[-quick]; with --all: the folder holding "
                       "one such store per reproduction, default runs); finished runs there are skipped")
@click.option("-o", "--output", "report_dir", default=None, type=click.Path(file_okay=False),
              help="report folder (default: reports/<name>[-quick]; with --all: reports/reproduction"
                   "[-quick])")
@click.option("--report", "report_alias", default=None, hidden=True, type=click.Path(file_okay=False))
@click.option("--force", is_flag=True, help="let -o (and --docs) replace files that gnnprivacy did not write there")
@executor_options
def reproduce_command(name, list_only, run_all, quick, report_only, docs_page, runs_dir, runs_alias, report_dir,
                      report_alias, force, executor, address, workers, data_root, quiet):
    """Reproduce a paper table NAME (see --list), or with --all every paper: run the sweeps, then
    write a report with the published numbers beside ours. Exit code 1 if any run failed (the
    report is still written)."""
    from gnnprivacy.experiments.reproduce import get_reproduction
    from gnnprivacy.reporting.html import check_report_outputs, write_report

    if list_only:
        _print_list(data_root)
        return
    if report_alias is not None and report_dir is not None and report_alias != report_dir:
        raise click.UsageError("give -o/--output once (--report is its old spelling)")
    if run_all:
        if name:
            raise click.UsageError("give a reproduction NAME or --all, not both")
        _reproduce_all(quick, report_only, docs_page, pick_runs_dir(runs_dir, runs_alias) or "runs",
                       report_dir or report_alias or ("reports/reproduction" + ("-quick" if quick else "")),
                       executor, address, workers, data_root, quiet, force)
        return
    if report_only or docs_page:
        raise click.UsageError("--report-only and --docs go with --all")
    if not name:
        raise click.UsageError("give a reproduction NAME or --all (see `gnnprivacy reproduce --list`)")
    try:
        repro = get_reproduction(name)
    except GnnPrivacyError as exc:
        raise click.ClickException(str(exc)) from None
    spec = repro.spec(quick=quick)
    runs_dir = pick_runs_dir(runs_dir, runs_alias) or f"runs/{spec.name}"
    report_dir = report_dir or report_alias or f"reports/{spec.name}"
    try:
        check_report_outputs(runs_dir, report_dir, force)  # before any run
    except GnnPrivacyError as exc:
        raise click.ClickException(str(exc)) from None
    result = run_and_summarise(spec, runs_dir=runs_dir, executor=executor, address=address, workers=workers,
                               data_root=data_root, quiet=quiet)
    try:
        paths = write_report(runs_dir, report_dir, title=f"Reproduction {spec.name}: {repro.description}",
                             reference_ids=list(repro.references),  # none: no paper table
                             metrics=repro.report_metrics, missing_metrics_ok=True, force=force)
    except GnnPrivacyError as exc:
        raise click.ClickException(f"no report: {exc}") from None
    for p in paths:
        click.echo(f"report: {p}")
    if not result.ok:
        sys.exit(1)


def _reproduce_all(quick, report_only, docs_page, runs_root, report_dir, executor, address, workers, data_root,
                   quiet, force=False):
    from gnnprivacy.experiments.reproduce import reproduce_all

    command = ("gnnprivacy reproduce --all" + (" --quick" if quick else "")
               + (f" --data-root {data_root}" if data_root else "") + (f" --docs {docs_page}" if docs_page else ""))
    with sweep_progress(quiet) as (progress, log):
        run = reproduce_all(quick=quick, runs_root=runs_root, out_dir=report_dir, docs_page=docs_page,
                            report_only=report_only, executor=executor, workers=workers, address=address,
                            data_root=data_root, progress=progress, log=log, command=command, force=force)
    for name, result in run.results.items():
        if result is not None:
            echo_sweep_result(result, name)
        elif name in run.skipped:
            click.echo(f"{name}: skipped, {run.skipped[name]}")
    counts, unjudged = run.report.counts, run.report.unjudged
    for paper in sorted(set(counts) | set(unjudged)):
        parts = [f"{n} {v}" for v, n in counts.get(paper, {}).items()]
        if unjudged.get(paper):
            parts.append(f"{unjudged[paper]} without a verdict (one run)")
        click.echo(f"paper {paper}: " + ", ".join(parts))
    for p in run.paths:
        click.echo(f"report: {p}")
    if not run.ok:
        sys.exit(1)
