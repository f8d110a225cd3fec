"""He et al.'s link-stealing attacks that apply to one released model: the released posteriors
plus what an attacker may know about the *same* graph (the report card of
`gnnprivacy.auditing.model_card`).

| attack | knowledge | on the card | how |
|---|---|---|---|
| 0 | none | yes | posterior correlation distance of the pair, unsupervised |
| 2 | F (node features) | yes | distances of posteriors, reference posteriors, features (a) |
| 3 | A* (part of the graph) | yes | attack MLP trained on a known share of the pairs (b) |
| 6 | F, A* | yes | as 3 with the features of attack 2 |
| 1, 4, 5, 7 | D' (a shadow dataset) | no | see `NOT_ON_THE_CARD` |

(a) unsupervised, the best of its 32 scores on the tested pairs (optimistic, as He et al.);
(b) tested on the other pairs.

The reference MLP of attacks 2 and 6 is He et al.'s: trained on the node features and the
labels of the graph's training nodes (their code uses the ground-truth training labels), so
the F attacker also knows those labels. For the attacks that read node features, the card
also gives ``auc_output_blind``: the same attack with every released posterior replaced by one
constant vector, i.e. what the attacker's own knowledge gives without the model. The release
adds what the attack's AUC has above it.

*Privacy*: this runs attacks on outputs already released; it releases nothing.
"""

from __future__ import annotations

import numpy as np

from gnnprivacy.attacks.link_stealing.protocols import HE_KNOWN_FRAC
from gnnprivacy.errors import InvalidParameterError

__all__ = ["ON_THE_CARD", "NOT_ON_THE_CARD", "knowledge_attacks", "split_known",
           "reference_posteriors"]

#: the attacks that need only the released posteriors and knowledge of the target graph
ON_THE_CARD = {0: "nothing", 2: "node features, F", 3: "part of the graph, A*",
               6: "node features and part of the graph, F and A*"}
#: the attacks left out, and why
NOT_ON_THE_CARD = {
    (1, 4, 5, 7): "D' (a shadow dataset): the attacker trains its attack on a second graph of "
                  "the same domain with a shadow model of its own; the card assesses one model on "
                  "one graph, and a shadow graph cut from that graph is partial knowledge of it, "
                  "which attacks 3 and 6 measure directly. `gnnprivacy attack link-stealing` runs "
                  "them on the registered datasets."}


def split_known(pairs, known_frac: float, *, seed: int):
    """``(known, test)``: a share ``known_frac`` of the linked and of the unlinked pairs (drawn
    uniformly) that the attacker knows, and the rest, on which it is tested."""
    from gnnprivacy._validation import check_real
    from gnnprivacy.datasets.link_splits import PairSet

    frac = check_real("known_frac", known_frac, low=0.0, high=1.0, low_open=True, high_open=True)
    rng = np.random.default_rng(np.random.SeedSequence([seed, 3003]))
    known = np.zeros(len(pairs), dtype=bool)
    for label in (0, 1):
        idx = rng.permutation(np.flatnonzero(pairs.label == label))
        known[idx[: int(round(frac * idx.size))]] = True
    if known.all() or not known.any():
        raise InvalidParameterError("known_frac", "a share that leaves known and test pairs of "
                                    f"both labels ({len(pairs)} pairs)", known_frac)

    def part(m):
        return PairSet(pairs.u[m], pairs.w[m], pairs.label[m])

    return part(known), part(~known)


def reference_posteriors(data, *, seed: int) -> np.ndarray:
    """He et al.'s reference MLP (node features only) trained on ``data``'s training (and
    validation) labels: its softmax on every node."""
    from gnnprivacy.attacks.link_stealing.pipeline import (REFERENCE_HPARAMS, _seed, _softmax,
                                                            _train, row_normalize_features)

    ref = _train("mlp", data, dict(REFERENCE_HPARAMS), epochs=200, patience=50,
                 seed=_seed(seed, "reference"), normalize=row_normalize_features(data.x))
    return _softmax(ref, data)


def knowledge_attacks(post: np.ndarray, data, pairs, *, attacks=(2, 3, 6),
                      known_frac: float = HE_KNOWN_FRAC, seed: int = 0,
                      n_boot: int = 200) -> dict[str, dict]:
    """He et al.'s attacks ``attacks`` (a subset of 2, 3, 6) on the released posteriors
    ``post`` of ``data``'s nodes, over the labelled ``pairs``: ``{"attack_K": section}`` with
    the AUC and its bootstrap interval, the TPR at 1% FPR, the pairs it trained and was tested
    on and, for 2 and 6, ``auc_output_blind`` (module docstring).

    Attack 2 is tested on every pair; 3 and 6 train on a share ``known_frac`` of them (A*)
    and are tested on the rest.
    """
    from gnnprivacy.attacks.link_stealing.he import NodeView, run_he_attack
    from gnnprivacy.attacks.metrics import bootstrap_ci

    bad = [a for a in attacks if a not in (2, 3, 6)]
    if bad:
        raise InvalidParameterError("link_attacks", "He et al.'s attacks that apply to one "
                                    "released model: 0, 2, 3, 6 (1, 4, 5, 7 need a shadow "
                                    "dataset)", bad)
    view = NodeView(target=post)
    if any(a in (2, 6) for a in attacks):
        view = NodeView(target=post, reference=reference_posteriors(data, seed=seed),
                        attributes=data.x.detach().double().cpu().numpy())
    blind = NodeView(target=np.full_like(post, 1.0 / post.shape[1]), reference=view.reference,
                     attributes=view.attributes)
    known, test = split_known(pairs, known_frac, seed=seed)
    out = {}
    for attack in attacks:
        supervised = attack in (3, 6)
        kw = {"known_pairs": known, "seed": seed} if supervised else {"seed": seed}
        tested = test if supervised else pairs
        outcome = run_he_attack(attack, view, tested, **kw)
        ci = bootstrap_ci(outcome.scores, outcome.labels, n_boot=n_boot,
                          generator=np.random.default_rng(seed))
        m = outcome.metrics
        sec = {"attack": f"He et al. Attack-{attack}", "knowledge": ON_THE_CARD[attack],
               "auc": m["auc"], "auc_ci95": [ci["low"], ci["high"]],
               "tpr_at_1pct_fpr": m["tpr_at_1pct_fpr"], "pairs": int(len(tested)),
               "train_pairs": int(len(known)) if supervised else 0}
        if attack == 2:
            sec["score"] = outcome.info["score"]
        if attack in (2, 6):
            sec["auc_output_blind"] = run_he_attack(attack, blind, tested, **kw).metrics["auc"]
        out[f"attack_{attack}"] = sec
    return out
