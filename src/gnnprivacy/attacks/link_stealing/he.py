"""He et al.'s link-stealing attacks Attack-0 ... Attack-7 (USENIX Security 2021; spec 003 §3.2).

The attacker sees, per graph, a `NodeView`: the posteriors the target API releases
(``target``; defended outputs when a defence is deployed), the posteriors of a reference MLP
trained on node attributes (``reference``) and the raw attributes (``attributes``).

| attack | knowledge | features | trained on |
|---|---|---|---|
| 0 | none | each of D8(t) separately, K-means(2) decisions | -- |
| 1 | D' | [D8(t), E(t)] | shadow pairs |
| 2 | F | D8(t), D8(rho), D8(x), D8(rho) - D8(t), K-means(2) | -- |
| 3 | A* | [OPS(t), D8(t), E(t)] | known target pairs |
| 4 | A*, D' | [D8(t), E(t)] | shadow + known pairs |
| 5 | F, D' | [D8(t), D8(rho), D8(x), E(t), E(rho)] | shadow pairs |
| 6 | F, A* | [OPS(t || rho), D8(t), D8(rho), D8(x), E(t), E(rho)] | known target pairs |
| 7 | F, A*, D' | as 5 | shadow + known pairs |

Unsupervised attacks score a pair by its negated distance (higher = linked) and decide with
K-means; the headline distance of Attack-0 is ``correlation`` (configurable); every metric's
raw and flipped AUC are in ``info``. Attack-2's headline is the best family x metric by
flipped AUC on the test pairs (optimistic, as the spec asks), also listed in ``info``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gnnprivacy._validation import check_choice, check_int
from gnnprivacy.attacks.base import AttackOutcome, outcome_metrics
from gnnprivacy.attacks.link_stealing.features import (DISTANCES, distances, entropy_ops,
                                                        pair_ops)
from gnnprivacy.nn.pair_classifier import AttackMLP, kmeans_decisions
from gnnprivacy.datasets.link_splits import PairSet
from gnnprivacy.errors import InvalidParameterError

__all__ = ["ATTACKS", "NodeView", "attack_features", "run_he_attack"]

ATTACKS = tuple(range(8))
_KNOWLEDGE = {0: "", 1: "D'", 2: "F", 3: "A*", 4: "A*,D'", 5: "F,D'", 6: "F,A*", 7: "F,A*,D'"}
_TRAIN_ON = {1: ("shadow",), 3: ("known",), 4: ("shadow", "known"), 5: ("shadow",),
             6: ("known",), 7: ("shadow", "known")}


@dataclass
class NodeView:
    """What the attacker has per node of one graph (row ``i`` = node ``i``)."""

    target: np.ndarray
    reference: np.ndarray | None = None
    attributes: np.ndarray | None = None


def attack_features(attack: int, view: NodeView, pairs: PairSet) -> np.ndarray:
    """The feature matrix of a supervised attack (1, 3, 4, 5, 6, 7) on ``pairs``."""
    t_u, t_w = view.target[pairs.u], view.target[pairs.w]
    if attack in (1, 4):
        return np.hstack([distances(t_u, t_w), entropy_ops(t_u, t_w)])
    if attack == 3:
        return np.hstack([pair_ops(t_u, t_w), distances(t_u, t_w), entropy_ops(t_u, t_w)])
    if view.reference is None or view.attributes is None:
        raise InvalidParameterError("view", f"reference posteriors and attributes for attack {attack}",
                                    "a view without them")
    r_u, r_w = view.reference[pairs.u], view.reference[pairs.w]
    x_u, x_w = view.attributes[pairs.u], view.attributes[pairs.w]
    common = [distances(t_u, t_w), distances(r_u, r_w), distances(x_u, x_w),
              entropy_ops(t_u, t_w), entropy_ops(r_u, r_w)]
    if attack in (5, 7):
        return np.hstack(common)
    if attack == 6:
        return np.hstack([pair_ops(np.hstack([t_u, r_u]), np.hstack([t_w, r_w]))] + common)
    raise InvalidParameterError("attack", "a supervised attack in {1, 3, 4, 5, 6, 7}", attack)


def _unsupervised(attack: int, view: NodeView, pairs: PairSet, metric: str, seed: int) -> AttackOutcome:
    fams = {"posterior": distances(view.target[pairs.u], view.target[pairs.w])}
    if attack == 2:
        if view.reference is None or view.attributes is None:
            raise InvalidParameterError("view", "reference posteriors and attributes for attack 2",
                                        "a view without them")
        fams["reference"] = distances(view.reference[pairs.u], view.reference[pairs.w])
        fams["attributes"] = distances(view.attributes[pairs.u], view.attributes[pairs.w])
        fams["posterior_difference"] = fams["reference"] - fams["posterior"]
    per = {}
    for fam, mat in fams.items():
        for k, name in enumerate(DISTANCES):
            d = mat[:, k]
            if np.ptp(d) == 0:
                per[f"{fam}/{name}"] = {"auc": 0.5, "auc_flipped": 0.5}
                continue
            m = outcome_metrics(-d, pairs.label, threshold=None)
            per[f"{fam}/{name}"] = {"auc": m["auc"], "auc_flipped": m["auc_flipped"]}
    if attack == 0:
        key = f"posterior/{metric}"
    else:
        key = max(per, key=lambda k: (per[k]["auc_flipped"], k))
    fam, name = key.split("/")
    d = fams[fam][:, DISTANCES.index(name)]
    info = {"score": key, "per_metric_auc": per,
            "auc_max_over_metrics": max(v["auc_flipped"] for v in per.values())}
    return AttackOutcome(scores=-d, labels=pairs.label, predictions=kmeans_decisions(d, seed=seed),
                         info=info)


def run_he_attack(attack: int, test_view: NodeView, test_pairs: PairSet, *,
                  known_pairs: PairSet | None = None, shadow_view: NodeView | None = None,
                  shadow_pairs: PairSet | None = None, scaler_mode: str = "train_only",
                  metric: str = "correlation", known_labels: np.ndarray | None = None,
                  epochs: int = 50, seed: int = 0, known_view: NodeView | None = None) -> AttackOutcome:
    """Run He et al.'s Attack-``attack`` and return its `AttackOutcome`.

    Args:
        attack: 0 ... 7.
        test_view: the target graph as the attacker sees it (released posteriors).
        test_pairs: the test pairs (D4) in ``test_view``'s node ids.
        known_pairs: A* pairs in ``test_view``'s ids (attacks 3, 4, 6, 7).
        shadow_view: the shadow graph (attacks 1, 4, 5, 7).
        shadow_pairs: the shadow graph's labelled pairs (attacks 1, 4, 5, 7).
        scaler_mode: ``"train_only"`` or ``"separate"`` (reference code).
        metric: Attack-0's headline distance (one of ``DISTANCES``).
        known_labels: override of ``known_pairs.label`` for training (the n-hop-aware
            adaptive attack labels n-hop pairs 1).
        epochs: attack-MLP epochs.
        seed: seeds the attack MLP and K-means.
        known_view: the view the A* training pairs are read from (default ``test_view``; a
            different one models an attacker whose A* posteriors predate the defence).
    """
    attack = check_int("attack", attack, low=0, high=7)
    metric = check_choice("metric", metric, DISTANCES)
    if attack in (0, 2):
        return _unsupervised(attack, test_view, test_pairs, metric, seed)
    xs, ys = [], []
    for source in _TRAIN_ON[attack]:
        if source == "shadow":
            if shadow_view is None or shadow_pairs is None or len(shadow_pairs) == 0:
                raise InvalidParameterError("shadow_pairs", f"shadow pairs for attack {attack}", None)
            xs.append(attack_features(attack, shadow_view, shadow_pairs))
            ys.append(shadow_pairs.label)
        else:
            if known_pairs is None or len(known_pairs) == 0:
                raise InvalidParameterError("known_pairs", f"known pairs A* for attack {attack}", None)
            xs.append(attack_features(attack, test_view if known_view is None else known_view,
                                      known_pairs))
            ys.append(known_pairs.label if known_labels is None else np.asarray(known_labels))
    x_train, y_train = np.vstack(xs), np.concatenate(ys)
    clf = AttackMLP(epochs=epochs, batch_size=64 if attack == 6 else 128,
                    scaler_mode=scaler_mode, seed=seed).fit(x_train, y_train)
    x_test = attack_features(attack, test_view, test_pairs)
    scores = clf.predict_proba(x_test)
    return AttackOutcome(scores=scores, labels=test_pairs.label, threshold=0.5,
                         info={"feature_dim": int(x_test.shape[1]), "train_pairs": int(y_train.size),
                               "knowledge": _KNOWLEDGE[attack], "scaler_mode": scaler_mode})
