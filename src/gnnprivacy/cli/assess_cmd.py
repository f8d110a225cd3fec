"""``gnnprivacy assess RUN_RECORD``: the privacy report card of a trained model.

Example:

```
gnnprivacy train --method heterpoisson --dataset cora --epsilon 2 --runs-dir runs
gnnprivacy assess runs/<run_id>.json --json
```
"""

from __future__ import annotations

import json

import click


@click.command("assess")
@click.argument("record", type=click.Path(exists=True, dir_okay=False))
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
@click.option("--no-baseline", is_flag=True, help="Skip the non-private baseline.")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True)
@click.option("--format", "fmt", type=click.Choice(["text", "markdown", "html"]), default="text",
              show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the card as JSON.")
@click.option("--no-save", is_flag=True,
              help="Do not keep the card beside the record (RUNS/cards/<run_id>.json, where "
                   "`gnnprivacy report` shows it as a section).")
def assess_command(record, data_root, audit_runs, lira_models, lira_query,
                   lira_per_node_variance, lira_game, no_link_stealing, no_baseline, seed, fmt,
                   as_json, no_save) -> None:
    """Privacy report card: claimed epsilon (unit, relation, scope), audited epsilon,
    membership-inference and link-stealing AUCs, utility against a non-private baseline."""
    from pathlib import Path

    from gnnprivacy.auditing.report_card import (card_to_html, card_to_markdown, report_card,
                                                 save_card)
    from gnnprivacy.errors import GnnPrivacyError

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
    if as_json:
        click.echo(json.dumps(card, indent=2, default=str))
    elif fmt == "html":
        click.echo(card_to_html(card))
    else:
        click.echo(card_to_markdown(card))
