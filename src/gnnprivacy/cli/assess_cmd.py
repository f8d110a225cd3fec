"""``gnnprivacy assess RUN_RECORD | MODEL [MODEL ...]``: the privacy report card of a trained
model.

A run record (or a built-in method's saved ``<run_id>.model.pt``) gets the built-in card; a
model saved with ``gp.save_model`` gets the card of `gnnprivacy.auditing.model_card` on the
dataset the file names (membership thresholds, link stealing, the claim). A graph-level model
(the built-in ``graph``/``dpsgd-graph`` task's saved classifier, or a user's graph model saved
with ``dataset={"name": "proteins", "task": "graph", "seed": 0}``) is assessed on the graph
set and its split (graphs as the unit; link stealing does not apply). Several models
saved with one dataset get one card comparing them (`gnnprivacy.auditing.model_card.
assess_models`, the code path of ``gp.assess([...], data)``).

Example:

```
gnnprivacy train --method heterpoisson --dataset cora --epsilon 2 --runs-dir runs
gnnprivacy assess runs/<run_id>.json --json
gnnprivacy assess net.pt --data-root data        # a model saved by gp.save_model
gnnprivacy assess plain.pt eps1.pt eps8.pt --format html > card.html   # one card, 3 models
gnnprivacy train --task graph --dataset proteins --method dpsgd-graph --epsilon 1 --runs-dir runs
gnnprivacy assess runs/<run_id>.model.pt --data-root data   # a graph classifier
```
"""

from __future__ import annotations

import json

import click

from gnnprivacy.cli.options import import_option, importable_from_cwd


@click.command("assess")
@click.argument("records", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False),
                metavar="RECORD|MODEL [MODEL ...]")
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
@click.option("--link-attacks", default="2,3,6", show_default=True, metavar="LIST",
              callback=lambda ctx, param, text: _attack_list(text),
              help="A saved user model: He et al.'s attacker-knowledge link-stealing variants "
                   "beside Attack-0 (2: node features, 3: part of the graph, 6: both; empty: "
                   "Attack-0 only).")
@import_option
@click.option("--no-baseline", is_flag=True, help="Skip the non-private baseline.")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True)
@click.option("--format", "fmt", type=click.Choice(["text", "markdown", "html"]), default="text",
              show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the card as JSON.")
@click.option("-q", "--quiet", is_flag=True,
              help="Do not print the stages on stderr as they run.")
@click.option("--no-save", is_flag=True,
              help="Do not keep the card beside the record (RUNS/cards/<run_id>.json, where "
                   "`gnnprivacy report` shows it as a section).")
def assess_command(records, data_root, audit_runs, lira_models, lira_query,
                   lira_per_node_variance, lira_game, no_link_stealing, link_attacks, imports,
                   no_baseline, seed, fmt, as_json, quiet, no_save) -> None:
    """Privacy report card: a verdict per question in plain words, then the evidence:
    claimed epsilon (unit, relation, scope), audited epsilon, membership-inference and
    link-stealing AUCs, utility against a non-private baseline. Several models saved by
    gp.save_model with one dataset: one card comparing them. Each stage is printed on
    stderr as it runs (-q: not)."""
    import contextlib

    printer = None if quiet else _stage_printer()
    if printer is not None:            # before the imports: they take seconds on a busy machine
        printer("loading torch, PyG and the library")
    from gnnprivacy.auditing.card_progress import reporting

    with reporting(printer) if printer is not None else contextlib.nullcontext():
        _assess(records, data_root, audit_runs, lira_models, lira_query,
                lira_per_node_variance, lira_game, no_link_stealing, link_attacks, imports,
                no_baseline, seed, fmt, as_json, no_save)


def _stage_printer():
    import time

    start = time.perf_counter()

    def report(text: str) -> None:
        click.echo(f"assess [{time.perf_counter() - start:5.1f} s] {text}", err=True)
    return report


def _assess(records, data_root, audit_runs, lira_models, lira_query, lira_per_node_variance,
            lira_game, no_link_stealing, link_attacks, imports, no_baseline, seed, fmt,
            as_json, no_save) -> None:
    from pathlib import Path

    from gnnprivacy.auditing.report_card import report_card, save_card, saved_models_card
    from gnnprivacy.errors import GnnPrivacyError

    from gnnprivacy.training.persist import FORMAT
    from gnnprivacy.training.user_model import USER_FORMAT, model_file_format

    imports = importable_from_cwd(imports)
    formats = [model_file_format(r) if not r.endswith(".json") else None for r in records]
    if len(records) > 1 or formats[0] == USER_FORMAT:
        if any(f != USER_FORMAT for f in formats):
            bad = next(r for r, f in zip(records, formats) if f != USER_FORMAT)
            raise click.ClickException(
                f"invalid path: expected models saved by gp.save_model (format {USER_FORMAT}) "
                f"to assess several in one card, got {bad} (format: "
                f"{formats[records.index(bad)]})")
        try:
            card = saved_models_card(records, data_root=data_root, seed=seed,
                                     link_stealing=not no_link_stealing,
                                     link_attacks=link_attacks, imports=imports)
        except (GnnPrivacyError, ValueError) as exc:
            raise click.ClickException(str(exc)) from None
        _echo(card, fmt, as_json)
        return
    record, fmt_of_file = records[0], formats[0]
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


def _attack_list(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(a) for a in text.split(",") if a.strip())
    except ValueError:
        raise click.BadParameter(f"a comma list of attack numbers (e.g. 2,3,6), got {text!r}",
                                 param_hint="--link-attacks") from None


def _echo(card: dict, fmt: str, as_json: bool) -> None:
    from gnnprivacy.auditing.report_card import card_to_html, card_to_markdown

    if as_json:
        from gnnprivacy.auditing.card_verdicts import card_verdicts

        if "cards" not in card:          # the verdicts in plain words, as the text shows them
            card = {**card, "verdicts": [{"question": q, "answer": a}
                                         for q, a in card_verdicts(card)]}
        click.echo(json.dumps(card, indent=2, default=str))
    elif fmt == "html":
        click.echo(card_to_html(card))
    else:
        click.echo(card_to_markdown(card))
