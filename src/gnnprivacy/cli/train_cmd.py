"""``gnnprivacy train``: one run of any registered method, with a JSON record."""

from __future__ import annotations


import click

from gnnprivacy.cli.options import add_options, collect_fields, merge_aliases
from gnnprivacy.errors import GnnPrivacyError, WriteFailedError
from gnnprivacy.method.config import RUN_FIELDS, RunConfig, config_to_dict, load_yaml_config, resolve_config
from gnnprivacy.method.registry import list_methods
from gnnprivacy.records.record import dumps


def _method_table() -> str:
    lines = [f"  {m.name:<14} {'private ' if m.private else 'baseline'}  {m.description}" for m in list_methods()]
    return "\n".join(lines)


def echo_result_warnings(record) -> None:
    """The record's warnings about its result (``warnings`` and ``info.warnings``) as
    ``warning: ...`` lines on stderr: what ``-q`` still prints, having silenced the log."""
    for note in [*record.warnings, *record.info.get("warnings", [])]:
        click.echo(f"warning: {note}", err=True)


def privacy_summary(record) -> str:
    """``epsilon 7.99 (node-level, add_or_remove)  delta 1e-05``: the relation stands beside
    epsilon so that runs under different neighbouring relations are not read as equals."""
    if record.epsilon == float("inf"):
        return "epsilon inf (not private)"
    unit = record.privacy.get("unit")
    relation = record.privacy.get("relation")
    scope = ", ".join(str(v) for v in ((f"{unit}-level" if unit else None), relation) if v)
    delta = "-" if record.delta is None else f"{record.delta:.3g}"
    return f"epsilon {record.epsilon:.4g}" + (f" ({scope})" if scope else "") + f"  delta {delta}"


def _fields():
    groups = [("common", RunConfig)] + [(m.name, m.params) for m in list_methods()]
    return collect_fields(groups)


def _train(config_file, print_config, as_json, quiet, save_model, force, **options):
    try:
        if save_model is not None and not print_config:  # before any work: it destroys nothing
            from gnnprivacy._files import check_output_file

            check_output_file(save_model, name="--save-model", force=force, reads=(config_file,),
                              create_folder=True)
        values = load_yaml_config(config_file) if config_file else {}
        values.update({k: v for k, v in merge_aliases(options).items() if v is not None})
        config, params = resolve_config(values)
    except (ValueError, GnnPrivacyError) as exc:
        raise click.UsageError(str(exc)) from None
    if print_config:
        _print_resolved(config, params)
        return
    from gnnprivacy.experiments.progress import progress_factory, quiet_mode
    from gnnprivacy.method.runner import run

    log = (lambda m: None) if quiet else (lambda m: click.echo(m, err=True))
    resolved = config_to_dict(config, params)
    try:
        # a bar on a terminal, plain "[progress] step t/T, elapsed, ETA" lines in logs
        with quiet_mode(quiet), progress_factory(enabled=not quiet) as progress:
            record = run(resolved, progress=progress, log=log, model_path=save_model)
    except GnnPrivacyError as exc:
        if isinstance(exc, WriteFailedError):  # the command line's fault guard prints the record
            raise
        raise click.ClickException(str(exc)) from None
    if quiet:  # -q drops progress and chatter, not what the reader of the result must know
        echo_result_warnings(record)
    if as_json:
        click.echo(dumps(record.summary()))
        return
    click.echo(f"{record.method} on {record.dataset}: {headline_metric(record)}  "
               f"{privacy_summary(record)}  ({record.timings['total_seconds']:.1f} s)")
    click.echo(f"record: {config.runs_dir}/{record.run_id}.json")
    model_file = record.info.get("model_file")
    if model_file:
        shown = model_file if save_model else f"{config.runs_dir}/{model_file}"
        hint = (f"gnnprivacy assess {shown}" if record.info.get("task") == "graph"
                else f"gnnprivacy predict {shown} --dataset ...")
        click.echo(f"model: {shown}  ({hint})")


def headline_metric(record) -> str:
    """The result a reader looks at first: test accuracy, or a link task's test AUC and
    Hits@50 (it has no accuracy)."""
    m = record.metrics
    if "test_accuracy" not in m and "test_auc" in m:
        hits = m.get("test_hits@50")
        return f"test AUC {m['test_auc']:.4f}" + ("" if hits is None else f", Hits@50 {hits:.4f}")
    return f"test accuracy {m.get('test_accuracy', float('nan')):.4f}"


def _print_resolved(config, params) -> None:
    """The configuration with every default resolved for the dataset (loads the data)."""
    import yaml

    from gnnprivacy.method.resolve import resolved_values
    from gnnprivacy.method.data import load_run_data

    try:
        values = resolved_values(config, params, load_run_data(config))
    except GnnPrivacyError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(yaml.safe_dump(values, sort_keys=False), nl=False)


def _build_train_command():
    fields = _fields()
    doc = ("Train a model with one method and write a JSON run record.\n\n"
           "Options come from the common run config and from each method's parameters; an option\n"
           "that the chosen method does not take is an error. `-c FILE` reads a YAML mapping of the\n"
           "same names (CLI options override it).\n\n\b\nMethods:\n" + _method_table())
    command = add_options(_train, fields, common=set(RUN_FIELDS))
    command = click.option("--quiet", "-q", is_flag=True, help="no progress or log on stderr (warnings about the "
                           "result, such as a small training split, still print)")(command)
    command = click.option("--save-model", type=click.Path(dir_okay=False), default=None,
                           help="where to save the trained model (default: "
                                "RUNS_DIR/<run_id>.model.pt beside the record)")(command)
    command = click.option("--force", is_flag=True,
                           help="let --save-model replace an existing run record, model or "
                                "checkpoint")(command)
    command = click.option("--json", "as_json", is_flag=True,
                           help="print a machine-readable result on stdout")(command)
    command = click.option("--print-config", is_flag=True,
                           help="print the configuration as YAML, every default resolved for the dataset, and exit")(command)
    command = click.option("-c", "--config", "config_file", type=click.Path(dir_okay=False),
                           help="YAML file of options")(command)
    return click.command("train", help=doc)(command)


train_command = _build_train_command()
