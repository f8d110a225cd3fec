"""The report card in plain words: one short verdict per question a reader asks.

`card_verdicts` reads a card (`gnnprivacy.auditing.report_card.report_card`,
`gnnprivacy.auditing.model_card.assess_model`) and answers, from its own numbers:

* **Is the privacy claim kept?** no DP claimed; an audit found more than claimed (do not
  release); or no audit found more, with how strong the claimed epsilon is: the largest
  membership AUC any attack may reach under it (`max_auc`, the area under the
  (epsilon, delta)-DP bound on the ROC curve);
* **Can an attacker tell who was in the training set?** the strongest attack on the released
  model (AUC and TPR at 1% FPR), in words, against what the claim allows; an attack that
  watches every noisy gradient of training is reported apart (it sees more than the model);
* **Can an attacker tell who is linked to whom?** (node models) the strongest link-stealing
  attack; where a model with an edge-covering claim still lets it succeed, why that does not
  contradict the claim (the epsilon covers training, the predictions read the graph);
* **What does privacy cost?** the accuracy against the non-private baseline.

The bands are fixed: AUC below 0.55 "no better than a coin, or barely", up to 0.65 "a
little", up to 0.8 "yes", above "yes, easily".
"""

from __future__ import annotations

import math

__all__ = ["card_verdicts", "max_auc"]

#: AUC bands and their words
BANDS = ((0.55, "barely: the best attack does little better than a coin"),
         (0.65, "a little"), (0.8, "yes"), (math.inf, "yes, easily"))


def max_auc(epsilon: float, delta: float | None) -> float:
    """The largest AUC of any membership test against an (epsilon, delta)-DP mechanism: the
    area under ``TPR = min(1, e^eps FPR + delta, 1 - e^-eps (1 - delta - FPR))``."""
    if epsilon is None or not math.isfinite(epsilon):
        return 1.0
    d = float(delta or 0.0)
    steps, area = 4000, 0.0
    for i in range(steps):
        f = (i + 0.5) / steps
        tpr = min(1.0, math.exp(epsilon) * f + d, 1.0 - math.exp(-epsilon) * (1.0 - d - f))
        area += max(tpr, f) / steps
    return min(area, 1.0)


def _band(auc: float) -> str:
    return next(words for top, words in BANDS if auc < top)


def _num(v) -> float | None:
    """A card's number (cards keep ``inf`` as the text ``"inf"``), or ``None``."""
    if isinstance(v, bool):
        return None
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def _f(v) -> str:
    v = _num(v)
    return "n/a" if v is None else "inf" if math.isinf(v) else f"{v:.2f}"


def _claim(card: dict) -> tuple[bool, float, float | None]:
    c = card.get("claimed") or {}
    eps = _num(c.get("epsilon"))
    eps = math.inf if eps is None else eps
    return math.isfinite(eps), eps, _num(c.get("delta"))


def _exceeded(card: dict) -> list[str]:
    out = []
    audit = card.get("audit")
    if isinstance(audit, dict) and audit.get("violation"):
        out.append(f"the audit's lower bound {_f(audit.get('epsilon_lower_bound'))}")
    for name, e in (card.get("empirical") or {}).items():
        if isinstance(e, dict) and e.get("exceeds_claim"):
            out.append(f"the {name.replace('_', ' ')} lower bound {_f(e.get('epsilon_lower_bound'))}")
    return out


def _claim_verdict(card: dict) -> str:
    private, eps, delta = _claim(card)
    if not private:
        return ("No privacy is claimed: nothing bounds what the attacks below learn; they show "
                "what this release leaks.")
    over = _exceeded(card)
    if over:
        return (f"No: {' and '.join(over)} exceed the claimed epsilon {eps:.3g}. The training "
                "does not do what it claims; do not release this model.")
    bounds = [_num(v.get("epsilon_lower_bound")) for v in
              [card.get("audit") or {}, *((card.get("empirical") or {}).values())]
              if isinstance(v, dict) and _num(v.get("epsilon_lower_bound")) is not None]
    strength = max_auc(eps, delta)
    audited = (f"no audit found more leakage than claimed (strongest lower bound "
               f"{max(bounds):.3g} against epsilon {eps:.3g})" if bounds else
               "no audit ran on this card")
    word = ("a strong" if strength < 0.65 else "a moderate" if strength < 0.85 else "a weak")
    return (f"Yes, as far as measured: {audited}. Epsilon {eps:.3g} is {word} guarantee on its "
            f"own: it allows a membership AUC up to {strength:.2f}.")


def _membership_verdict(card: dict, unit: str) -> str | None:
    members = card.get("membership") or {}
    released = {k: m for k, m in members.items() if isinstance(m, dict)
                and isinstance(m.get("auc"), float) and k != "white_box_gradient"}
    if not released and "white_box_gradient" not in members:
        return None
    private, eps, delta = _claim(card)
    parts = []
    if released:
        name, best = max(released.items(), key=lambda kv: kv[1]["auc"])
        auc = best["auc"]
        tpr = best.get("tpr_at_1pct_fpr")
        parts.append(f"{_band(auc).capitalize()}: the strongest attack on the released model "
                     f"({name.replace('_', ' ')}) reaches AUC {auc:.2f}"
                     + (f" and finds {tpr:.0%} of the training {unit}s at 1% false positives"
                        if isinstance(tpr, float) else "") + ".")
        if private:
            within = auc <= max_auc(eps, delta)
            parts.append("That is within what the claim allows." if within else
                         "That is more than the claim allows.")
    white = members.get("white_box_gradient")
    if isinstance(white, dict) and isinstance(white.get("auc"), float):
        parts.append(f"An attacker who watches every noisy gradient of training (more than the "
                     f"released model shows) reaches AUC {white['auc']:.2f}: the mechanism's "
                     "own leakage at this epsilon.")
    return " ".join(parts)


def _link_verdict(card: dict) -> str | None:
    ls = card.get("link_stealing")
    if not isinstance(ls, dict):
        return None
    if ls.get("applicable") is False:
        return "Does not apply: " + str(ls.get("note", "the model gives no node posteriors."))
    aucs = [("Attack-0", ls.get("auc"), None)] + [
        (v.get("attack", k), v.get("auc"), v.get("auc_output_blind"))
        for k, v in (ls.get("variants") or {}).items()]
    aucs = [(n, a, b) for n, a, b in aucs if isinstance(a, float)]
    if not aucs:
        return None
    name, auc, blind = max(aucs, key=lambda nab: nab[1])
    text = (f"{_band(auc).capitalize()}: the strongest link-stealing attack ({name}) reaches "
            f"AUC {auc:.2f} telling linked from unlinked pairs.")
    if isinstance(blind, float):
        text += (f" Without the model's outputs the same attacker reaches {blind:.2f}: "
                 + ("what it knows besides the model gives most of it." if auc - blind < 0.05
                    else f"the model adds {auc - blind:.2f}."))
    if isinstance(ls.get("auc_vs_nhop"), float):
        text += (f" Against pairs {ls.get('n_hop', 2)} hops apart it reaches "
                 f"{ls['auc_vs_nhop']:.2f}: the outputs mostly say that two nodes are close "
                 "in the graph, not that they are linked." if ls["auc_vs_nhop"] < 0.6 else
                 f" Against pairs {ls.get('n_hop', 2)} hops apart it still reaches "
                 f"{ls['auc_vs_nhop']:.2f}.")
    private, _, _ = _claim(card)
    unit = (card.get("claimed") or {}).get("unit")
    if private and auc >= 0.6 and unit in ("node", "edge", "feature+edge"):
        text += (" This does not contradict the claim, whose scope covers edges: the epsilon "
                 "bounds what one training " + ("edge" if unit == "edge" else "node")
                 + " changes in the trained model, not what the model's predictions show. A "
                 "GNN's prediction for a node reads its neighbours when it is queried, and "
                 "linked nodes tend to share labels and features, so any accurate model's "
                 "outputs reveal links. Hiding them needs private inference over the edges "
                 "(GAP's noisy aggregates) or a defense such as GRID (gnnprivacy attack "
                 "link-stealing --defense grid).")
    return text


def _utility_verdict(card: dict) -> str | None:
    u = card.get("utility") or {}
    acc = u.get("test_accuracy")
    if not isinstance(acc, (int, float)) or isinstance(acc, bool):
        return None
    base = u.get("baseline")
    private, _, _ = _claim(card)
    if isinstance(base, dict) and isinstance(base.get("test_accuracy"), (int, float)):
        gap = (float(base["test_accuracy"]) - float(acc)) * 100
        how = (f"{gap:.1f} points below" if gap >= 0.5 else
               f"{-gap:.1f} points above" if gap <= -0.5 else "level with")
        return (f"Test accuracy {acc:.3f}, {how} {base.get('method', 'the baseline')} on the "
                f"same split ({base['test_accuracy']:.3f})"
                + ("; that gap is the cost of the privacy." if private and gap >= 0.5 else "."))
    where = u.get("measured_on")
    return (f"Test accuracy {acc:.3f}" + (f" ({where})" if where else "")
            + "; no non-private baseline was trained for comparison.")


def card_verdicts(card: dict) -> list[tuple[str, str]]:
    """``[(question, answer)]``: the card in plain words (see the module docstring)."""
    unit = "graph" if card.get("level") == "graph" else "node"
    out = [("Is the privacy claim kept?", _claim_verdict(card))]
    for question, answer in (
            (f"Can an attacker tell which {unit}s were in the training set?",
             _membership_verdict(card, unit)),
            ("Can an attacker tell which nodes are linked?", _link_verdict(card)),
            ("What does the privacy cost?", _utility_verdict(card))):
        if answer:
            out.append((question, answer))
    return out
