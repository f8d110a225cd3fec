"""A privacy report card for one trained model (``gnnprivacy assess RUN_RECORD``).

The card puts the evidence for a claimed ε side by side:

* **claimed**: ε and δ with the privacy unit, neighbouring relation and scope the record's
  ``privacy`` dict states, the accounting mode and what the ε does not cover;
* **audited**: the mechanism-only canary audit of the same configuration (Clopper-Pearson
  lower bound at 95% and the GDP figure);
* **membership inference**: the white-box gradient-observation attack (AUC, TPR at 1% and
  0.1% FPR) and, on request, LiRA with shadow models;
* **link stealing** (where the unit covers edges: node or edge): He et al.'s Attack-0 on the
  model's posteriors (correlation distance, linked vs unlinked pairs);
* **utility**: the record's test accuracy beside a non-private GCN on the same split.

`report_card` returns the card as a dict; `card_to_markdown` and
`card_to_html` render it.
"""

from __future__ import annotations

import html
import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np

from gnnprivacy.auditing.card_progress import stage

__all__ = ["report_card", "card_to_markdown", "card_to_html", "cards_to_html",
           "comparison_to_markdown", "comparison_to_html", "retrain_from_record", "save_card",
           "load_cards", "saved_models_card", "saved_dataset"]

_RUN_ONLY = ("runs_dir", "resume", "device")


def _values(record) -> dict:
    from gnnprivacy.method.config import RUN_FIELDS

    vals = {k: v for k, v in record.config.items() if k not in _RUN_ONLY}
    return {k: v for k, v in vals.items() if k in RUN_FIELDS or k in _param_names(record.method)}


def _param_names(method: str) -> set[str]:
    import dataclasses

    from gnnprivacy.method.registry import get_method

    return {f.name for f in dataclasses.fields(get_method(method).params)}


def retrain_from_record(record, *, data_root: str | None = None):
    """Re-run the record's configuration (same seeds) and return ``(data, trained model)``."""
    from gnnprivacy.method.config import resolve_config
    from gnnprivacy.method.context import RunContext
    from gnnprivacy.method.registry import get_method
    from gnnprivacy.method.data import load_run_data

    values = _values(record)
    if data_root is not None:
        values["data_root"] = data_root
    config, params = resolve_config(values)
    data = load_run_data(config)
    ctx = RunContext(config=config, params=params, data=data, seed=config.seed)
    result = get_method(record.method).fn(ctx)
    model = getattr(result, "model", None)
    if model is None:
        from gnnprivacy.auditing.training import make_trainer_for

        model = make_trainer_for(record.method, params, seed=ctx.seed_for("train")).fit(data)
    return data, model, params


def _read_run_or_tune_record(path: Path):
    """A run record, or a tune record (``gnnprivacy tune``: the chosen trial's run record with
    the total epsilon and a ``tuning`` section): ``(RunRecord, tuning section or None)``."""
    from gnnprivacy.records.record import RunRecord, _decode, read_record

    try:
        data = _decode(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return read_record(path), None               # its own one-line error
    if not isinstance(data, dict) or "tuning" not in data:
        return read_record(path), None
    tuning = data.pop("tuning")
    for key in ("internal", "comparison"):           # the selection's internals: not the card's
        data.pop(key, None)
    return RunRecord(**data), tuning


def saved_model_for(record, record_path: str | os.PathLike | None):
    """The model saved beside the record (``info["model_file"]``), loaded, or ``None`` when
    the run kept none (records written before models were kept)."""
    name = (record.info or {}).get("model_file")
    if not name:
        return None
    path = Path(name)
    if not path.is_absolute() and record_path is not None:
        path = Path(record_path).parent / path
    if not path.is_file():
        return None
    from gnnprivacy.training.persist import load_model_file

    return load_model_file(path)[0], path


def _model_and_data(record, record_path, data_root):
    """``(data, model, where)``: the saved model with the record's graph, or (older records)
    the model retrained from the record's seeds."""
    saved = saved_model_for(record, record_path)
    if saved is None:
        data, model, _ = retrain_from_record(record, data_root=data_root)
        return data, model, "retrained from the record's configuration and seeds (no saved model)"
    from gnnprivacy.method.config import resolve_config
    from gnnprivacy.method.data import load_run_data

    values = _values(record)
    if data_root is not None:
        values["data_root"] = data_root
    config, _ = resolve_config(values)
    return load_run_data(config), saved[0], f"the saved model {saved[1]}"


def _baseline(record, data, *, seed: int) -> dict:
    from gnnprivacy.method.builtin.nonprivate import NonPrivateParams, make_trainer
    from gnnprivacy.training.metrics import evaluate

    trainer = make_trainer("gcn", NonPrivateParams(), generator=seed).fit(data)
    logits = trainer.predict_logits(data)
    acc = evaluate(logits, data.y, data.test_mask, num_classes=trainer.num_classes_)["accuracy"]
    return {"method": "gcn (non-private)", "test_accuracy": float(acc)}


def report_card(record, *, data_root: str | None = None, audit_runs: int = 10_000,
                lira_models: int = 0, link_stealing: bool = True, baseline: bool = True,
                seed: int = 0, lira_query: str = "full", lira_fixed_variance: bool = True,
                lira_game: str | None = None) -> dict[str, Any]:
    """The privacy report card of a run record (a `RunRecord`, a path to one, or a
    saved model ``<run_id>.model.pt``, which carries its record; a model saved by
    ``gp.save_model``, the graph task's classifier among them: `saved_models_card`).

    Args:
        record: the run record.
        data_root: dataset root (default: the record's).
        audit_runs: runs per world of the mechanism-only audit.
        lira_models: train this many models for LiRA (0: skip; expensive).
        lira_query: LiRA's query graph(s) (`gnnprivacy.attacks.membership.run_membership`).
        lira_fixed_variance: LiRA's fixed (global) variance instead of per-example ones.
        lira_game: LiRA's membership game.
        link_stealing: run the link-stealing attack when the unit covers edges, against the
            model saved beside the record (records without one: retrained with its seeds).
        baseline: train a non-private GCN on the same split for the utility comparison.
        seed: seed of the audit and attacks.
    """
    from gnnprivacy.records.record import RunRecord, _decode, read_record
    from gnnprivacy.training.user_model import USER_FORMAT, model_file_format

    record_path, tuning = None, None
    stage("reading the record")
    if not isinstance(record, RunRecord):
        record_path = Path(record)
        if record_path.suffix == ".pt" and model_file_format(record_path) == USER_FORMAT:
            # a saved user model (a graph task's classifier among them): its own card
            return saved_models_card((str(record_path),), data_root=data_root, seed=seed,
                                     link_stealing=link_stealing)
        if record_path.name.endswith(".model.pt"):       # a saved model carries its record
            from gnnprivacy.training.persist import load_model_file

            record = RunRecord(**_decode(load_model_file(record_path)[1]))
            record.info = {**record.info, "model_file": record_path.name}
        else:
            record, tuning = _read_run_or_tune_record(record_path)
    if (record.info or {}).get("user_data"):
        from gnnprivacy.errors import InvalidParameterError

        raise InvalidParameterError(
            "record", "a run on a registered dataset (assess reloads the data by name; this run "
            f"trained on a user-supplied graph named {record.dataset!r} with "
            f"{(record.split or {}).get('num_nodes', '?')} nodes, which it cannot reload)", record.run_id)
    p = record.privacy or {}
    private = bool(p.get("private", math.isfinite(record.epsilon)))
    card: dict[str, Any] = {
        "run_id": record.run_id, "method": record.method, "dataset": record.dataset,
        "claimed": {"epsilon": record.epsilon, "delta": record.delta, "unit": p.get("unit"),
                    "relation": p.get("relation"),
                    "scope": p.get("scope") or ("the released model (training run)"
                                                if private else None),
                    "accounting_mode": p.get("accounting_mode") or p.get("eps_mode"),
                    "accountant": p.get("accountant"), "unaccounted": p.get("unaccounted", [])},
        "utility": {"test_accuracy": record.metrics.get("test_accuracy")}}
    if tuning is not None:           # a tune record: the claim is the total, selection included
        card["claimed"]["tuning"] = {
            k: tuning.get(k) for k in ("name", "total_epsilon", "training_epsilon_per_trial",
                                       "target_epsilon", "chosen_setting")}
    values = _values(record)
    method_params = {k: v for k, v in values.items() if k in _param_names(record.method)}
    root = data_root if data_root is not None else values.get("data_root")
    data = model = None
    if private:
        from gnnprivacy.auditing.api import audit
        from gnnprivacy.auditing.gradient_observation import gradient_observation_attack

        run_params = {k: v for k, v in values.items()
                      if k not in ("method", "dataset", "data_root")}
        stage(f"audit: the mechanism of {record.method}, {audit_runs} runs per world")
        res = audit(record.method, record.dataset, data_root=root, params=run_params,
                    runs=audit_runs, seed=seed)
        card["audit"] = {k: res.to_dict()[k] for k in (
            "mode", "epsilon_claimed", "epsilon_lower_bound", "epsilon_estimate_gdp", "runs",
            "confidence", "violation")}
        if res.mode != "exact":
            stage("membership: an attacker who watches the noisy gradients")
            g = gradient_observation_attack(record.method, record.dataset, data_root=root,
                                            params=run_params, runs=min(audit_runs, 10_000),
                                            seed=seed, n_boot=100)
            card["membership"] = {"white_box_gradient": {
                k: g[k] for k in ("auc", "accuracy", "tpr_at_1pct_fpr", "tpr_at_0.1pct_fpr")}}
    graph_task = (record.info or {}).get("task") == "graph"
    if graph_task:       # a graph classifier: the graph-level card, the audit above kept
        graph = _graph_sections(record, record_path, data_root, seed=seed,
                                lira_models=lira_models, baseline=baseline)
        graph["membership"] = {**card.get("membership", {}), **graph["membership"]}
        card.update(graph)
        return card
    if lira_models:
        from gnnprivacy.attacks.membership import run_membership

        stage(f"membership: LiRA, training {lira_models} models")
        mia = run_membership(record.method, record.dataset, data_root=root,
                             num_models=lira_models, params=method_params, seed=seed,
                             query=lira_query, fixed_variance=lira_fixed_variance, game=lira_game)
        card.setdefault("membership", {})["lira"] = {
            k: mia["lira"][k] for k in ("auc", "accuracy", "tpr_at_1pct_fpr", "tpr_at_0.1pct_fpr",
                                        "query", "game")}
        card["membership"]["lira"]["auc_ci95"] = [mia["lira"]["auc_ci95"]["low"],
                                                  mia["lira"]["auc_ci95"]["high"]]
    covers_edges = (p.get("unit") in ("node", "edge", "feature+edge")) or not private
    if link_stealing and covers_edges:
        from gnnprivacy.auditing.model_card import posterior_sections

        stage("loading the model and its graph")
        data, model, where = _model_and_data(record, record_path, data_root)
        sections = posterior_sections(model, data, seed=seed)
        card["link_stealing"] = {**sections["link_stealing"], "model": where}
        card.setdefault("membership", {}).update(sections["membership"])
    if baseline:
        if data is None:
            from gnnprivacy.method.config import resolve_config
            from gnnprivacy.method.data import load_run_data

            cfg, _ = resolve_config({**values, **({"data_root": data_root} if data_root else {})})
            data = load_run_data(cfg)
        stage("utility: training the non-private GCN baseline on the same split")
        base = _baseline(record, data, seed=seed)
        card["utility"]["baseline"] = base
        acc = card["utility"]["test_accuracy"]
        if acc is not None:
            card["utility"]["gap_to_baseline"] = base["test_accuracy"] - acc
    return card


def _graph_sections(record, record_path, data_root, *, seed: int, lira_models: int,
                    baseline: bool) -> dict:
    """The card's sections for a graph-classification record (``graph``, ``dpsgd-graph``):
    the saved classifier (or, without one, the one retrained from the record's seeds)
    assessed on its graph set by `gnnprivacy.auditing.model_card.assess_model` (the
    training graphs against the test graphs; link stealing not applicable), LiRA of
    `gnnprivacy.attacks.graph_membership` with ``lira_models`` models of the record's
    configuration, and the non-private classifier of the same configuration as baseline."""
    from gnnprivacy.auditing.model_card import assess_model
    from gnnprivacy.method.config import resolve_config
    from gnnprivacy.method.data import load_run_data

    values = _values(record)
    if data_root is not None:
        values["data_root"] = data_root
    config, params = resolve_config(values)
    name = (record.info or {}).get("model_file")
    path = Path(name) if name else None
    if path is not None and not path.is_absolute() and record_path is not None:
        path = Path(record_path).parent / path
    if path is not None and path.is_file():
        from gnnprivacy.training.user_model import load_model

        gset = load_run_data(config)
        model = load_model(path, imports=("gnnprivacy.training.graph_classification",)).model
        where = f"the saved model {path}"
    else:
        gset, model, _ = retrain_from_record(record, data_root=data_root)
        where = "retrained from the record's configuration and seeds (no saved model)"
    private = bool((record.privacy or {}).get("private"))
    sub = assess_model(model, gset, privacy=record if private else None, seed=seed,
                       name=record.run_id)
    out = {k: sub[k] for k in ("level", "membership", "link_stealing", "utility")}
    out["utility"]["model"] = where
    if "empirical" in sub:
        out["empirical"] = sub["empirical"]
    fit = {k: v for k, v in params.fit_kwargs().items()
           if k not in ("epsilon", "delta", "max_grad_norm", "secure_mode")}
    if lira_models:
        from gnnprivacy.attacks.graph_membership import graph_membership

        mia = graph_membership(gset, epsilon=params.epsilon if private else None,
                               num_models=lira_models, seed=seed, **fit)
        out["membership"]["lira"] = {k: mia[k] for k in ("auc", "accuracy", "tpr_at_1pct_fpr",
                                                         "tpr_at_0.1pct_fpr")}
        out["membership"]["lira"].update(auc_ci95=[mia["auc_ci95"]["low"],
                                                   mia["auc_ci95"]["high"]],
                                         query="each graph alone", game="graphs")
    if baseline:
        from gnnprivacy.training.graph_classification import accuracy, fit_graph_classifier

        base = fit_graph_classifier(gset.subset("train"), num_features=gset.num_features,
                                    num_classes=gset.num_classes, edge_dim=gset.edge_dim,
                                    seed=seed, **fit)
        acc, own = accuracy(base.model, gset.subset("test")), out["utility"]["test_accuracy"]
        out["utility"]["baseline"] = {"method": f"graph (non-private {params.backbone})",
                                      "test_accuracy": acc}
        out["utility"]["gap_to_baseline"] = acc - own
    return out


def _fmt(v, digits: int = 3) -> str:
    if v is None:
        return "n/a"
    if isinstance(v, float):
        return "inf" if math.isinf(v) else f"{v:.{digits}f}" if abs(v) >= 1e-3 else f"{v:.3g}"
    return str(v)


def _ci(m: dict) -> str:
    return f" [{_fmt(m['auc_ci95'][0])}, {_fmt(m['auc_ci95'][1])}]" if m.get("auc_ci95") else ""


def _rows(card: dict) -> list[tuple[str, str]]:
    from gnnprivacy.auditing.bounds import gdp_estimate_of   # cards before issue 22: old key

    c = card["claimed"]
    rows = [("Claimed epsilon", f"{_fmt(c['epsilon'])} at delta {_fmt(c['delta'])}"),
            ("Privacy unit / relation", f"{c['unit'] or 'n/a'} / {c['relation'] or 'n/a'}"),
            ("Scope", _fmt(c["scope"])),
            ("Accounting", f"{c['accountant'] or 'n/a'} ({c['accounting_mode'] or 'default'})"),
            ("Not covered", "; ".join(c["unaccounted"]) or "nothing recorded")]
    if c.get("tuning"):
        t = c["tuning"]
        rows.insert(1, ("Tuned", f"tune {t['name']!r}: total {_fmt(t['total_epsilon'])} covers "
                                 f"training at {_fmt(t['training_epsilon_per_trial'])} per trial "
                                 f"and the selection of {t['chosen_setting']}"))
    if "audit" in card:
        a = card["audit"]
        rows.append(("Audited epsilon (lower bound)",
                     f"{_fmt(a['epsilon_lower_bound'])} ({a['mode']}, {a['runs']} runs/world, "
                     f"{a['confidence']:.0%}); GDP estimate {_fmt(gdp_estimate_of(a))} "
                     "(assumes a Gaussian trade-off curve: an estimate, not a bound)"
                     + ("  EXCEEDS THE CLAIM" if a["violation"] else "")))
    for name, e in card.get("empirical", {}).items():
        rows.append((f"Empirical epsilon (lower bound, {name.replace('_', ' ')})",
                     f"{_fmt(e['epsilon_lower_bound'])} at delta {_fmt(e['delta'])} "
                     f"({e['runs']} {e.get('unit', 'node')}s per side, {e['confidence']:.0%}; "
                     f"each {e.get('unit', 'node')} one trial)"
                     + ("  EXCEEDS THE CLAIM" if e["exceeds_claim"] else "")))
    if "code_audit" in card:
        rows.append(("Code audit", card["code_audit"]["note"]))
    for name, m in card.get("membership", {}).items():
        rows.append((f"Membership inference ({name.replace('_', ' ')})",
                     f"AUC {_fmt(m['auc'])}{_ci(m)}, TPR@1%FPR {_fmt(m['tpr_at_1pct_fpr'])}, "
                     f"TPR@0.1%FPR {_fmt(m['tpr_at_0.1pct_fpr'])}"
                     + (f" (query {m['query']}, {m['game']} game)" if "query" in m else "")))
    if "link_stealing" in card and card["link_stealing"].get("applicable", True) is False:
        rows.append(("Link stealing", card["link_stealing"]["note"]))
    elif "link_stealing" in card:
        ls = card["link_stealing"]
        rows.append(("Link stealing", f"AUC {_fmt(ls['auc'])}{_ci(ls)} ({ls['attack']}, "
                                      f"{ls['pairs']} pairs)"
                     + (f"; linked vs {ls['n_hop']}-hop pairs: AUC {_fmt(ls['auc_vs_nhop'])}"
                        if "auc_vs_nhop" in ls else "")))
        for v in ls.get("variants", {}).values():
            how = (f"trained on {v['train_pairs']} known pairs, tested on {v['pairs']}"
                   if v["train_pairs"] else f"{v['pairs']} pairs")
            rows.append((f"Link stealing, {v['attack']} (the attacker knows {v['knowledge']})",
                         f"AUC {_fmt(v['auc'])}{_ci(v)} ({how})"
                         + (f"; without the model's outputs: AUC {_fmt(v['auc_output_blind'])}"
                            if "auc_output_blind" in v else "")))
    u = card["utility"]
    base = u.get("baseline")
    rows.append(("Utility (test accuracy)", _fmt(u["test_accuracy"])
                 + (f" vs {_fmt(base['test_accuracy'])} for {base['method']}" if base else "")))
    return rows


def _subject(card: dict) -> tuple[str, str]:
    """``(label, name)`` of what the card assesses: a run (``Run``), or a model assessed as
    released (``Model``, with its class and how it got its name)."""
    subject = card.get("subject") or {}
    if subject.get("kind") != "model":
        return "Run", ""
    how = ("" if subject.get("named") else
           "; named after its class: gp.assess(..., name=...) names it")
    return "Model", (f" (class {subject.get('class', '?')}, assessed as released: not a "
                     f"gnnprivacy run{how})")


def card_to_markdown(card: dict) -> str:
    """The card as a Markdown section: what it assesses, the verdicts in plain words
    (`gnnprivacy.auditing.card_verdicts.card_verdicts`), then the numbers (a comparison of
    several models: see `comparison_to_markdown`)."""
    from gnnprivacy.auditing.card_verdicts import card_verdicts

    if "cards" in card:
        return comparison_to_markdown(card)
    label, about = _subject(card)
    lines = [f"## Privacy report card: {card['method']} on {card['dataset']}", "",
             f"{label} `{card['run_id']}`{about}", "", "In plain words:", ""]
    lines += [f"- **{q}** {a}" for q, a in card_verdicts(card)]
    lines += ["", "| | |", "|---|---|"]
    lines += [f"| {k} | {v.replace('|', '/')} |" for k, v in _rows(card)]
    return "\n".join(lines) + "\n"


def card_to_html(card: dict) -> str:
    """The card as an HTML fragment (a ``<section>``: the verdicts in plain words, then a
    two-column table; a comparison of several models: see `comparison_to_html`)."""
    from gnnprivacy.auditing.card_verdicts import card_verdicts

    if "cards" in card:
        return comparison_to_html(card)
    label, about = _subject(card)
    verdicts = "".join(f"<li><strong>{html.escape(q)}</strong> {html.escape(a)}</li>"
                       for q, a in card_verdicts(card))
    body = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>"
                   for k, v in _rows(card))
    return (f"<section class=\"report-card\"><h2>Privacy report card: "
            f"{html.escape(card['method'])} on {html.escape(card['dataset'])}</h2>"
            f"<p>{label} <code>{html.escape(card['run_id'])}</code>{html.escape(about)}</p>"
            f"<ul class=\"verdicts\">{verdicts}</ul><table>{body}</table>"
            f"{_roc_svg(card)}</section>")


def cards_to_html(cards: list[dict]) -> str:
    """Several cards (e.g. one model at several epsilons) as HTML: a plot of every attack's AUC
    against the claimed epsilon (a model without DP at the right end, "no DP"), then each card."""
    return _auc_vs_epsilon_svg(cards) + "".join(card_to_html(c) for c in cards)


# ----------------------------------------------------------------------------- several models
def _epsilon(card: dict) -> float:
    eps = card["claimed"]["epsilon"]
    return math.inf if eps in (None, "inf") else float(eps)


def _attack_aucs(card: dict) -> dict[str, dict]:
    """Every attack of a card with an AUC: the membership attacks, ``link_stealing``
    (Attack-0) and ``link_stealing_attack_K`` (the attacker-knowledge variants)."""
    out = {k: m for k, m in card.get("membership", {}).items()
           if isinstance(m, dict) and isinstance(m.get("auc"), float)}
    if "link_stealing" in card and isinstance(card["link_stealing"].get("auc"), float):
        ls = card["link_stealing"]
        out["link_stealing"] = ls
        out.update({f"link_stealing_{k}": v for k, v in ls.get("variants", {}).items()})
    return out


def comparison_columns(comparison: dict) -> list[str]:
    """The attacks of a comparison's table: those of its first card that have an AUC, then
    any the others add, in order."""
    cols: list[str] = []
    for card in comparison["cards"]:
        cols += [k for k in _attack_aucs(card) if k not in cols]
    return cols


def _ordered(comparison: dict) -> list[dict]:
    """The cards by claimed epsilon, the models without DP last (stable: ties keep the
    given order)."""
    return sorted(comparison["cards"], key=_epsilon)


def _comparison_table(comparison: dict) -> tuple[list[str], list[list[str]]]:
    """The header and rows of a comparison's table: one row per model, by claimed epsilon
    (no DP last), each attack's AUC with its interval."""
    cols = comparison_columns(comparison)
    head = ["model", "claimed epsilon", "test accuracy"] + [c.replace("_", " ") + " AUC"
                                                            for c in cols]
    rows = []
    for card in _ordered(comparison):
        eps, attacks = _epsilon(card), _attack_aucs(card)
        cells = [card["run_id"], "no DP" if math.isinf(eps) else _fmt(eps),
                 _fmt(card["utility"]["test_accuracy"])]
        cells += [f"{_fmt(attacks[c]['auc'])}{_ci(attacks[c])}" if c in attacks else "n/a"
                  for c in cols]
        rows.append(cells)
    return head, rows


def comparison_to_markdown(comparison: dict) -> str:
    """A comparison of several models (`gnnprivacy.auditing.model_card.assess_models`) as
    Markdown: one table row per model (by claimed epsilon, no DP last; each attack's AUC with
    its interval), then every model's card."""
    head, rows = _comparison_table(comparison)
    lines = [f"## Privacy report cards: {len(comparison['cards'])} models on "
             f"{comparison['dataset']}", "", "| " + " | ".join(head) + " |",
             "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(x.replace("|", "/") for x in cells) + " |" for cells in rows]
    body = "\n".join(card_to_markdown(c).replace("## Privacy", "### Privacy", 1)
                     for c in comparison["cards"])
    return "\n".join(lines) + "\n\n" + body


def comparison_to_html(comparison: dict) -> str:
    """A comparison of several models as HTML: the table of `comparison_to_markdown`, the
    ROC curves of every membership attack with the models overlaid, each attack's AUC against
    the claimed epsilon (no DP at the right end), then every model's card."""
    head, rows = _comparison_table(comparison)
    table = ("<table><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr>"
             + "".join("<tr>" + "".join(f"<td>{html.escape(x)}</td>" for x in cells) + "</tr>"
                       for cells in rows) + "</table>")
    rocs = []
    for attack in comparison_columns(comparison):
        curves = [(c["run_id"], c["membership"][attack]["roc"]) for c in _ordered(comparison)
                  if isinstance(c.get("membership", {}).get(attack), dict)
                  and c["membership"][attack].get("roc")]
        if curves:
            rocs.append(_roc_svg_of(curves, f"ROC curves of {attack.replace('_', ' ')}, "
                                            "one per model"))
    return (f"<section class=\"comparison\"><h2>Privacy report cards: "
            f"{len(comparison['cards'])} models on {html.escape(comparison['dataset'])}</h2>"
            f"{table}{''.join(rocs)}{_auc_vs_epsilon_svg(comparison['cards'])}</section>"
            + "".join(card_to_html(c) for c in comparison["cards"]))


def _auc_vs_epsilon_svg(cards: list[dict], width: int = 420, height: int = 260) -> str:
    points: dict[str, list[tuple[float, float]]] = {}
    for card in cards:
        eps = _epsilon(card)
        for name, m in _attack_aucs(card).items():
            points.setdefault(name, []).append((eps, m["auc"]))
    finite = sorted({e for pts in points.values() for e, _ in pts if math.isfinite(e) and e > 0})
    if len(cards) < 2 or not points:
        return ""
    lo, hi = (math.log10(finite[0]), math.log10(finite[-1])) if finite else (0.0, 1.0)
    hi = hi if hi > lo else lo + 1.0
    pad, right = 34, width - 56                 # the last column is "no DP"

    def x(e: float) -> float:
        if not math.isfinite(e):
            return width - 22.0
        return pad + (math.log10(max(e, 10 ** lo)) - lo) / (hi - lo) * (right - pad)

    def y(a: float) -> float:     # AUC 0.4 .. 1
        return height - pad - (min(max(a, 0.4), 1.0) - 0.4) / 0.6 * (height - 2 * pad)

    parts = [f'<line x1="{pad}" x2="{width - 8}" y1="{y(0.5):.1f}" y2="{y(0.5):.1f}" '
             f'stroke="#999" stroke-dasharray="3"/>']
    ticks = finite + ([math.inf] if any(not math.isfinite(e) for pts in points.values()
                                        for e, _ in pts) else [])
    for e in ticks:               # a label under every claimed epsilon; "no DP" at the right
        label = "no DP" if math.isinf(e) else f"{e:.3g}"
        parts.append(f'<text x="{x(e) - 8:.1f}" y="{height - pad + 12}" font-size="9">'
                     f'{label}</text>')
    for i, (name, pts) in enumerate(sorted(points.items())):
        colour = _COLOURS[i % len(_COLOURS)]
        pts = sorted(pts)
        parts.append(f'<polyline fill="none" stroke="{colour}" points="'
                     + " ".join(f"{x(e):.1f},{y(a):.1f}" for e, a in pts) + '"/>'
                     + "".join(f'<circle cx="{x(e):.1f}" cy="{y(a):.1f}" r="2" '
                               f'fill="{colour}"/>' for e, a in pts)
                     + f'<text x="{pad + 4}" y="{14 + 12 * i}" font-size="10" fill="{colour}">'
                     f'{html.escape(name.replace("_", " "))}</text>')
    parts.append(f'<text x="{width // 2 - 40}" y="{height - 6}" font-size="10">claimed epsilon '
                 f'(log; right: no DP)</text><text x="2" y="{y(0.5) - 3:.1f}" font-size="9">'
                 f'0.5</text>')
    return (f'<svg class="auc-vs-epsilon" width="{width}" height="{height}" role="img" '
            f'aria-label="attack AUC against the claimed epsilon">{"".join(parts)}</svg>')


_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b")


def _roc_svg(card: dict, size: int = 260) -> str:
    """The membership attacks' ROC curves (log FPR from 1e-4, as Carlini et al. plot them)
    as an inline SVG; empty when no attack kept one."""
    curves = [(name, m["roc"]) for name, m in card.get("membership", {}).items()
              if isinstance(m, dict) and m.get("roc")]
    return _roc_svg_of(curves, "ROC curves of the membership attacks", size) if curves else ""


def _roc_svg_of(curves: list[tuple[str, dict]], label: str, size: int = 260) -> str:
    """ROC curves ``[(name, {"fpr": ..., "tpr": ...})]`` overlaid in one inline SVG."""
    pad = 30

    def xy(f: float, t: float) -> str:
        x = pad + (math.log10(max(f, 1e-4)) + 4) / 4 * (size - pad)
        return f"{x:.1f},{size - pad - t * (size - 2 * pad):.1f}"

    lines = [f'<polyline fill="none" stroke="#999" stroke-dasharray="3" '
             f'points="{" ".join(xy(f, f) for f in np.logspace(-4, 0, 20))}"/>']
    for i, (name, roc) in enumerate(curves):
        colour = _COLOURS[i % len(_COLOURS)]
        pts = " ".join(xy(f, t) for f, t in zip(roc["fpr"], roc["tpr"]))
        lines.append(f'<polyline fill="none" stroke="{colour}" points="{pts}"/>'
                     f'<text x="{pad + 4}" y="{14 + 12 * i}" font-size="10" fill="{colour}">'
                     f'{html.escape(name.replace("_", " "))}</text>')
    axes = (f'<text x="{size // 2}" y="{size - 4}" font-size="10">FPR (log, 1e-4 to 1)</text>'
            f'<text x="2" y="{size // 2}" font-size="10" transform="rotate(-90 8 {size // 2})">'
            f'TPR</text>')
    return (f'<svg class="roc" width="{size}" height="{size}" role="img" '
            f'aria-label="{html.escape(label)}">{"".join(lines)}{axes}</svg>')


CARDS_DIR = "cards"  #: report cards live in RUNS/cards/<run_id>.json, beside the records


def save_card(card: dict, runs_dir: str | os.PathLike) -> Path:
    """Write ``card`` to ``<runs_dir>/cards/<run_id>.json``, where ``gnnprivacy report``
    (and `gnnprivacy.reporting.html.write_report`) picks it up as a report section."""
    from gnnprivacy.records.record import write_json_atomic

    return write_json_atomic(Path(runs_dir) / CARDS_DIR / f"{card['run_id']}.json", card)


def load_cards(runs_dir: str | os.PathLike) -> list[dict]:
    """The cards saved under ``runs_dir`` (sorted by run id; unreadable files skipped)."""
    from gnnprivacy.records.record import _decode

    out = []
    for path in sorted((Path(runs_dir) / CARDS_DIR).glob("*.json")):
        try:
            out.append(_decode(json.loads(path.read_text())))
        except (OSError, ValueError):
            continue
    return out


# ----------------------------------------------------------------------------- saved user models
def saved_models_card(paths, *, data_root=None, seed: int = 0, link_stealing: bool = True,
                      link_attacks=(2, 3, 6), imports: tuple[str, ...] = ()) -> dict:
    """The card of a model saved by ``gp.save_model`` on the dataset its file names (a graph
    set for a graph-level model: `saved_dataset`); several such models (saved with one
    dataset): one card comparing them (`assess_models`). ``gnnprivacy assess MODEL`` and
    ``gp.assess(path)`` of such a file."""
    from gnnprivacy.auditing.model_card import assess_model, assess_models
    from gnnprivacy.errors import InvalidParameterError
    from gnnprivacy.training.user_model import load_model

    # the built-in graph task's classifier: the library's own module, trusted as any import
    imports = ("gnnprivacy.training.graph_classification", *imports)
    stage(f"loading {len(paths)} saved model(s) and the dataset they name")
    saved = [load_model(p, imports=imports) for p in paths]
    for path, s in zip(paths, saved):
        if not s.dataset:
            raise InvalidParameterError("dataset", "the dataset saved with the model "
                                        "(gp.save_model(..., dataset={'name': ...}))",
                                        None, where=path)
        if s.dataset != saved[0].dataset:
            raise InvalidParameterError("models", f"models saved with one dataset "
                                        f"({paths[0]}: {saved[0].dataset})",
                                        f"{path}: {s.dataset}")
    data = saved_dataset(saved[0].dataset, data_root)
    common = {"seed": seed, "link_stealing": link_stealing, "link_attacks": link_attacks}
    if len(paths) == 1:
        return assess_model(saved[0].model, data, privacy=saved[0].privacy,
                            name=Path(paths[0]).name, **common)
    names = [Path(p).name for p in paths]
    if len(set(names)) < len(names):            # two files of one name: their paths
        names = list(paths)
    return assess_models({n: {"model": s.model, "privacy": s.privacy}
                          for n, s in zip(names, saved)}, data, **common)


def saved_dataset(dataset: dict, data_root=None):
    """The data a saved model names: a node dataset (`gnnprivacy.load_dataset` with the saved
    options) or, with ``"task": "graph"`` or a graph dataset's name, the graph set with its
    split seed (`gnnprivacy.datasets.tu_graphs.load_graph_dataset`)."""
    from gnnprivacy.datasets import load_dataset
    from gnnprivacy.datasets.tu_graphs import list_graph_datasets, load_graph_dataset

    options = {k: v for k, v in dataset.items() if k != "name"}
    if options.pop("task", None) == "graph" or (str(dataset["name"]).lower()
                                                  in list_graph_datasets()):
        return load_graph_dataset(dataset["name"], root=data_root, **options)
    return load_dataset(dataset["name"], root=data_root, **options)
