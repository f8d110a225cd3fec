"""``gnnprivacy assess RUN_RECORD | MODEL``: the privacy report card of a trained model.

A run record (or a built-in method's saved ``<run_id>.model.pt``) gets the built-in card; a
model saved with ``gp.save_model`` gets the card of `gnnprivacy.auditing.model_card` on the
dataset the file names (membership thresholds, link stealing, the claim).

Example:

```
gnnprivacy train --method heterpoisson --dataset cora --epsilon 2 --runs-dir runs
gnnprivacy assess runs/<run_id>.json --json
gnnprivacy assess net.pt --data-root data        # a model saved by gp.save_model
```
"""

from __future__ import annotations

import json

import click


@click.command("assess")
@click.argument("record", type=click.Path(exists=True, dir_okay=False), metavar="RECORD|MODEL")
@click.option("--data-root", type=click.Path(file_okay=False), default=None,
              help="Dataset root (default: the record's).")
@click.option("--audit-runs", type=click.IntRange(min=2), default=10_000, show_default=True,
              help="Runs per world of the mechanism-only audit.")
@click.option("--lira-models", type=click.IntRange(min=0), default=0, show_default=True,
              help="Train this many models for LiRA (0: skip; expensive).")
@click.option("--lira-query", default="full", show_default=True,
              help="LiRA's query graph: full | 0hop (each node alone) | full+0hop.")
@click.option("--lira-per-node-variance", is_flag=True,
              help="LiRA with per-node variances (for many models) instead of a global one.")
@click.option("--lira-game", type=click.Choice(["induced", "labels"]), default=None,
              help="Membership game (default: labels for the local-DP methods, else induced).")
@click.option("--no-link-stealing", is_flag=True, help="Skip the link-stealing attack.")
@click.option("--import", "imports", multiple=True, metavar="MODULE",
              help="Import MODULE first (repeatable): the module defining a saved user model's "
                   "class; a model file never chooses what is imported.")
@click.option("--no-baseline", is_flag=True, help="Skip the non-private baseline.")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True)
@click.option("--format", "fmt", type=click.Choice(["text", "markdown", "html"]), default="text",
              show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the card as JSON.")
@click.option("--no-save", is_flag=True,
              help="Do not keep the card beside the record (RUNS/cards/<run_id>.json, where "
                   "`gnnprivacy report` shows it as a section).")
def assess_command(record, data_root, audit_runs, lira_models, lira_query,
                   lira_per_node_variance, lira_game, no_link_stealing, imports, no_baseline,
                   seed, fmt, as_json, no_save) -> None:
    """Privacy report card: claimed epsilon (unit, relation, scope), audited epsilon,
    membership-inference and link-stealing AUCs, utility against a non-private baseline."""
    from pathlib import Path

    from gnnprivacy.auditing.report_card import report_card, save_card
    from gnnprivacy.errors import GnnPrivacyError

    from gnnprivacy.training.persist import FORMAT
    from gnnprivacy.training.user_model import USER_FORMAT, model_file_format

    fmt_of_file = model_file_format(record) if not record.endswith(".json") else None
    if fmt_of_file == USER_FORMAT:
        try:
            card = _assess_user_model(record, data_root=data_root, seed=seed,
                                      link_stealing=not no_link_stealing, imports=imports)
        except (GnnPrivacyError, ValueError) as exc:
            raise click.ClickException(str(exc)) from None
        _echo(card, fmt, as_json)
        return
    if record.endswith(".pt") and fmt_of_file != FORMAT:
        raise click.ClickException(f"invalid path: expected a run record (.json) or a model "
                                   f"saved by gnnprivacy (format {FORMAT} or {USER_FORMAT}), "
                                   f"got {record} (format: {fmt_of_file})")
    try:
        card = report_card(record, data_root=data_root, audit_runs=audit_runs,
                           lira_models=lira_models, lira_query=lira_query,
                           lira_fixed_variance=not lira_per_node_variance, lira_game=lira_game,
                           link_stealing=not no_link_stealing,
                           baseline=not no_baseline, seed=seed)
    except (GnnPrivacyError, ValueError) as exc:
        raise click.ClickException(str(exc)) from None
    if not no_save:
        save_card(card, Path(record).parent)
    _echo(card, fmt, as_json)


def _echo(card: dict, fmt: str, as_json: bool) -> None:
    from gnnprivacy.auditing.report_card import card_to_html, card_to_markdown

    if as_json:
        click.echo(json.dumps(card, indent=2, default=str))
    elif fmt == "html":
        click.echo(card_to_html(card))
    else:
        click.echo(card_to_markdown(card))


def _assess_user_model(path: str, *, data_root, seed: int, link_stealing: bool,
                       imports: tuple[str, ...] = ()) -> dict:
    """The card of a model saved by ``gp.save_model``, on the dataset its file names."""
    from pathlib import Path

    from gnnprivacy.auditing.model_card import assess_model
    from gnnprivacy.datasets import load_dataset
    from gnnprivacy.errors import InvalidParameterError
    from gnnprivacy.training.user_model import load_model

    saved = load_model(path, imports=imports)
    if not saved.dataset:
        raise InvalidParameterError("dataset", "the dataset saved with the model "
                                    "(gp.save_model(..., dataset={'name': ...}))", None)
    options = {k: v for k, v in saved.dataset.items() if k != "name"}
    data = load_dataset(saved.dataset["name"], root=data_root, **options)
    return assess_model(saved.model, data, privacy=saved.privacy, seed=seed,
                        link_stealing=link_stealing, name=Path(path).name)
