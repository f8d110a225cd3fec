"""Graph membership inference: is a graph in the training set of a graph classifier?

The game of the graph-level guarantee (unit graph, add/remove): a pool of graphs (the
training part of a `gnnprivacy.datasets.tu_graphs.GraphSet` split); ``K`` models, each trained
on a balanced random half of the pool (every graph IN for exactly half of the models), with
the same hyperparameters, privately (``epsilon``) or not. Each model is queried on every pool
graph alone (its logits; a graph is its own query, no other graph is read), and online LiRA
(`gnnprivacy.attacks.membership.lira`: each model the target in turn, the others the
shadows) scores membership from the logit-scaled confidence of the true label. The AUC comes
with a bootstrap 95% interval.

Privacy: the attack reads only the released models' outputs; it spends no budget. At a
sound graph-level epsilon its advantage is bounded by the guarantee; an AUC near 0.5 at
epsilon 1 is what the guarantee predicts (an (1, 1e-4)-DP model allows an AUC of at most
about 0.73, so a lower AUC is consistent, not a proof).
"""

from __future__ import annotations

import time

import numpy as np
import torch

from gnnprivacy._validation import check_int
from gnnprivacy.attacks.membership import MembershipGame, _phi, balanced_memberships, lira

__all__ = ["graph_membership_game", "graph_membership"]


def graph_membership_game(gset, *, epsilon: float | None, num_models: int = 8,
                          seed: int = 0, **fit_kwargs) -> MembershipGame:
    """Train ``num_models`` classifiers on balanced halves of ``gset``'s training graphs.

    Args:
        gset: a `GraphSet` (its training graphs are the pool).
        epsilon: graph-level epsilon of every model (``None``: non-private).
        num_models: ``K`` (even, >= 2).
        seed: memberships, initialisation, sampling and noise.
        fit_kwargs: for `gnnprivacy.training.graph_classification.fit_graph_classifier`.
    """
    from gnnprivacy.training.graph_classification import (accuracy, fit_graph_classifier,
                                                          graph_logits)

    k = check_int("num_models", num_models, low=2)
    pool = gset.subset("train")
    test = gset.subset("test")
    y = torch.cat([g.y.view(-1)[:1] for g in pool])
    members = balanced_memberships(k, len(pool), generator=np.random.default_rng(seed))
    t0 = time.perf_counter()
    phis, posts, utility, spent = [], [], [], []
    for i in range(k):
        train = [g for g, m in zip(pool, members[i]) if m]
        fit = fit_graph_classifier(train, num_features=gset.num_features,
                                   num_classes=gset.num_classes, edge_dim=gset.edge_dim,
                                   epsilon=epsilon, seed=seed * 1000 + i, **fit_kwargs)
        logits = graph_logits(fit.model, pool)
        phis.append(_phi(logits, y))
        posts.append(torch.softmax(logits.double(), 1).numpy())
        utility.append(accuracy(fit.model, test))
        spent.append(fit.epsilon)
    return MembershipGame("dpsgd-graph" if epsilon is not None else "graph", members,
                          np.stack(phis), np.stack(posts), float(max(spent)), utility,
                          time.perf_counter() - t0, query="graph", game="graphs")


def graph_membership(gset, *, epsilon: float | None, num_models: int = 8, seed: int = 0,
                     n_boot: int = 200, **fit_kwargs) -> dict:
    """LiRA on `graph_membership_game`: ``auc``, ``auc_ci95`` and the rest of
    `gnnprivacy.attacks.metrics.attack_metrics`, with ``epsilon`` spent and the models'
    mean test accuracy."""
    game = graph_membership_game(gset, epsilon=epsilon, num_models=num_models, seed=seed,
                                 **fit_kwargs)
    out = lira(game, seed=seed, n_boot=n_boot)
    out.update(epsilon=game.claimed_epsilon, test_accuracy=float(np.mean(game.utility)),
               num_models=num_models, pool=int(game.memberships.shape[1]),
               seconds=game.seconds)
    return out
