"""``gnnprivacy tune -c tune.yaml``: hyperparameter search whose privacy cost is counted."""

from __future__ import annotations

import click

from gnnprivacy.errors import GnnPrivacyError


@click.command("tune")
@click.option("--config", "-c", "config_file", required=True, type=click.Path(dir_okay=False),
              help="tune YAML file (base, grid, epsilon, trials, score_noise, seed, compare)")
@click.option("--runs-dir", "--runs", "runs_dir", default="runs", show_default=True,
              type=click.Path(file_okay=False),
              help="where the tune record (tune-NAME.json) and the trial records go")
@click.option("--data-root", type=click.Path(file_okay=False), default=None, help="dataset folder (overrides base.data_root)")
@click.option("--compare/--no-compare", default=None,
              help="also select without accounting (every setting at the full epsilon)")
@click.option("--reproducible-selection", is_flag=True, default=None,
              help="draw K, the settings, trial seeds and score noise from the config's seed "
                   "instead of the OS CSPRNG (recorded as a public selection: the total "
                   "epsilon then does not hold against anyone who knows the seed)")
@click.option("--plan", "plan_only", is_flag=True,
              help="print the per-trial training epsilon and the total, run nothing")
@click.option("--quiet", "-q", is_flag=True, help="no log on stderr")
def tune_command(config_file, runs_dir, data_root, compare, reproducible_selection, plan_only,
                 quiet):
    """Tune hyperparameters with a random number of trials (Papernot & Steinke, ICLR 2022).

    Each trial draws a setting from the grid, trains it like `gnnprivacy train` at a per-trial
    epsilon, and scores it on the validation nodes with Gaussian noise; only the best trial is
    released. Its record (RUNS/tune-NAME.json) holds the total epsilon (training + selection,
    composed from the trials that ran) beside the per-trial training epsilon that ignores the
    selection. The selection's randomness comes from the OS CSPRNG unless
    --reproducible-selection.
    """
    from gnnprivacy.experiments.tune import load_tune_spec, tune

    log = (lambda m: None) if quiet else (lambda m: click.echo(m, err=True))
    try:
        spec = load_tune_spec(config_file)
        if plan_only:
            from gnnprivacy.experiments.tune import plan_spec

            plan = plan_spec(spec, data_root=data_root)
            click.echo(f"per-trial training epsilon {plan['training_epsilon']:.4g}, total "
                       f"{plan['total_epsilon']:.4g} at delta {plan['delta']:.3g} "
                       f"(target {spec.epsilon:g}, E[K] = {spec.distribution().mean():.3g})")
            return
        out = tune(spec, runs_dir=runs_dir, data_root=data_root, compare=compare,
                   reproducible_selection=reproducible_selection, log=log)
    except (ValueError, GnnPrivacyError) as exc:
        raise click.ClickException(str(exc)) from None
    t = out["tuning"]
    if out.get("released") is None and "metrics" not in out:
        click.echo(f"K = 0 trials drawn: nothing released (total epsilon {t['total_epsilon']:.4g})")
        return
    line = (f"{out['method']} on {out['dataset']}: chosen {t['chosen_setting']}  test accuracy "
            f"{out['metrics'].get('test_accuracy', float('nan')):.4f}  total epsilon "
            f"{t['total_epsilon']:.4g} (training {t['training_epsilon_per_trial']:.4g}, "
            f"target {t['target_epsilon']:g})  delta {t['delta']:.3g}")
    click.echo(line)
    if t["selection"].get("selection public"):
        click.echo(f"selection public (reproducible from seed {t['selection']['seed']}): the "
                   "total epsilon does not hold against anyone who knows the seed")
    if "comparison" in out:
        c = out["comparison"]
        click.echo(f"without accounting: chosen {c['chosen_setting']}  test accuracy "
                   f"{c['test_accuracy']:.4f}  epsilon {c['nominal_epsilon']:g} per run, "
                   f"selection not counted")
    click.echo(f"record: {runs_dir}/tune-{t['name']}.json")
