"""``gnnprivacy sweep``: run (or resume) a grid of runs from a sweep YAML file."""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager

import click

from gnnprivacy.errors import GnnPrivacyError
from gnnprivacy.experiments.executors import EXECUTORS


def runs_dir_option(default: str | None, help_text: str):
    """``--runs-dir`` (one name across subcommands) with ``--runs`` kept as a hidden alias."""
    def decorate(command):
        command = click.option("--runs", "runs_alias", default=None, hidden=True,
                               type=click.Path(file_okay=False))(command)
        return click.option("--runs-dir", "runs_dir", default=default, show_default=default is not None,
                            type=click.Path(file_okay=False), help=help_text)(command)
    return decorate


def pick_runs_dir(runs_dir, runs_alias):
    """The runs directory from ``--runs-dir`` or its alias ``--runs`` (not both, unless equal)."""
    if runs_alias is not None and runs_dir not in (None, "runs") and runs_dir != runs_alias:
        raise click.UsageError("give --runs-dir once (--runs is its old spelling)")
    return runs_alias if runs_alias is not None else runs_dir


def executor_options(command):
    """The options shared by ``sweep`` and ``reproduce``: executor, address, workers, data root."""
    options = [
        click.option("--executor", type=click.Choice(EXECUTORS), default="local", show_default=True,
                     help="local: a process pool on this machine; ray: Ray tasks"),
        click.option("--address", default=None, help="Ray cluster address (default: start a local Ray)"),
        click.option("--workers", type=click.IntRange(min=1), default=None,
                     help="parallel runs (default: the number of CPUs)"),
        click.option("--data-root", type=click.Path(file_okay=False), default=None,
                     help="folder with the raw datasets (overrides the sweep's data_root)"),
        click.option("--quiet", "-q", is_flag=True,
                     help="print only the summary: no progress, log, warnings or PyG messages"),
    ]
    for option in reversed(options):
        command = option(command)
    return command


@contextmanager
def sweep_progress(quiet: bool):
    """``(progress, log)`` for running sweeps: progress on stderr (a bar on a terminal, log lines
    otherwise, with the workers' step lines), nothing with ``quiet``; the library's errors become
    one-line click errors."""
    from gnnprivacy.experiments.progress import progress_factory, quiet_mode
    from gnnprivacy.experiments.sweep import STEP_PROGRESS_ENV

    log = (lambda m: None) if quiet else (lambda m: click.echo(m, err=True))
    if not quiet and not sys.stderr.isatty():  # logs, not a terminal: workers write step lines too
        os.environ[STEP_PROGRESS_ENV] = "1"
    try:
        with quiet_mode(quiet), progress_factory(enabled=not quiet) as progress:
            yield progress, log
    except (GnnPrivacyError, ValueError) as exc:
        raise click.ClickException(str(exc)) from None


def echo_sweep_result(result, label: str, runs_dir: str | None = None) -> None:
    """One summary line for a `SweepResult` (``label: N runs; ...``), then its failed runs and
    the runs another process still holds, on stderr."""
    others = f", {len(result.elsewhere)} being run by another process" if result.elsewhere else ""
    where = f" (records in {runs_dir})" if runs_dir is not None else ""
    click.echo(f"{label}: {result.total} runs; {result.skipped} already finished, "
               f"{len(result.succeeded)} ran, {len(result.failed)} failed{others}{where}")
    for run_id, error in result.failed:
        click.echo(f"  FAILED {run_id}: {error}", err=True)
    if result.elsewhere:
        holders = ", ".join(sorted(set(result.holders)))
        click.echo(f"  NOT FINISHED here: {len(result.elsewhere)} run(s) claimed by {holders}; run this "
                   "sweep again once that process has ended to count them", err=True)


def run_and_summarise(spec, *, runs_dir: str, executor: str, address, workers, data_root, quiet: bool):
    """Run ``spec`` with progress (`sweep_progress`), print a summary; returns the SweepResult."""
    from gnnprivacy.experiments.sweep import run_sweep

    with sweep_progress(quiet) as (progress, log):
        result = run_sweep(spec, runs_dir=runs_dir, executor=executor, workers=workers, address=address,
                           data_root=data_root, progress=progress, log=log)
    echo_sweep_result(result, f"sweep {result.name}", runs_dir)
    return result


def _print_template(ctx, param, value):
    if not value or ctx.resilient_parsing:
        return
    from gnnprivacy.experiments.sweep import SWEEP_TEMPLATE

    click.echo(SWEEP_TEMPLATE, nl=False)
    ctx.exit()


@click.command("sweep")
@click.option("--template", is_flag=True, expose_value=False, is_eager=True, callback=_print_template,
              help="print a commented, runnable sweep YAML and exit (gnnprivacy sweep --template > s.yaml)")
@click.option("-c", "--config", "config_file", required=True, type=click.Path(dir_okay=False),
              help="sweep YAML: name, base, grid, seeds, seed (see --template); the bundled "
                   "reproduction configs work too")
@runs_dir_option("runs", "results store (one JSON record per run); finished runs there are skipped")
@executor_options
def sweep_command(config_file, runs_dir, runs_alias, executor, address, workers, data_root, quiet):
    """Run every configuration of a sweep's grid, repeated over seeds.

    Each run has a deterministic id (a hash of its resolved configuration), so running the same
    sweep again skips what finished and redoes what did not. Failed runs are listed at the end
    (and in RUNS_DIR/<id>.failed.json) and make the exit code 1. Several sweeps may share one
    runs directory: each run is claimed before it starts, so they share the work.

    \b
    Start from the template:
      gnnprivacy sweep --template > sweep.yaml
      gnnprivacy sweep -c sweep.yaml --runs-dir runs/my-sweep
    """
    from gnnprivacy.experiments.sweep import load_sweep

    runs_dir = pick_runs_dir(runs_dir, runs_alias)
    try:
        spec = load_sweep(config_file)
    except (GnnPrivacyError, ValueError) as exc:
        raise click.ClickException(str(exc)) from None
    result = run_and_summarise(spec, runs_dir=runs_dir, executor=executor, address=address, workers=workers,
                               data_root=data_root, quiet=quiet)
    if not result.ok:
        sys.exit(1)
