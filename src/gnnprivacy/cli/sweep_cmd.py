"""``gnnprivacy sweep``: run (or resume) a grid of runs from a sweep YAML file."""

from __future__ import annotations

import sys

import click

from gnnprivacy.errors import GnnPrivacyError
from gnnprivacy.experiments.executors import EXECUTORS


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
        click.option("--quiet", "-q", is_flag=True, help="no progress bar or log on stderr"),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def run_and_summarise(spec, *, runs_dir: str, executor: str, address, workers, data_root, quiet: bool):
    """Run ``spec`` with a progress bar on stderr, print a summary; returns the SweepResult."""
    from gnnprivacy.cli.progress import progress_factory
    from gnnprivacy.experiments.sweep import run_sweep

    log = (lambda m: None) if quiet else (lambda m: click.echo(m, err=True))
    try:
        with progress_factory(enabled=not quiet and sys.stderr.isatty()) as progress:
            result = run_sweep(spec, runs_dir=runs_dir, executor=executor, workers=workers, address=address,
                               data_root=data_root, progress=progress, log=log)
    except (GnnPrivacyError, ValueError) as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"sweep {result.name}: {result.total} runs; {result.skipped} already finished, "
               f"{len(result.succeeded)} ran, {len(result.failed)} failed (records in {runs_dir})")
    for run_id, error in result.failed:
        click.echo(f"  FAILED {run_id}: {error}", err=True)
    return result


@click.command("sweep")
@click.option("-c", "--config", "config_file", required=True, type=click.Path(dir_okay=False),
              help="sweep YAML: name, base, grid, seeds, seed")
@click.option("--runs", "runs_dir", default="runs", show_default=True, type=click.Path(file_okay=False),
              help="results store (one JSON record per run); finished runs there are skipped")
@executor_options
def sweep_command(config_file, runs_dir, executor, address, workers, data_root, quiet):
    """Run every configuration of a sweep's grid, repeated over seeds.

    Each run has a deterministic id (a hash of its resolved configuration), so running the same
    sweep again skips what finished and redoes what did not. Failed runs are listed at the end
    (and in RUNS/<id>.failed.json) and make the exit code 1.
    """
    from gnnprivacy.experiments.sweep import load_sweep

    try:
        spec = load_sweep(config_file)
    except (GnnPrivacyError, ValueError) as exc:
        raise click.ClickException(str(exc)) from None
    result = run_and_summarise(spec, runs_dir=runs_dir, executor=executor, address=address, workers=workers,
                               data_root=data_root, quiet=quiet)
    if not result.ok:
        sys.exit(1)
