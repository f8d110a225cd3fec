"""Node membership inference: LiRA, the shadow-model attack, and the white-box gradient attack.

Membership game (node level, add/remove, the relation of the node-DP methods): a pool of
nodes; model ``k`` is trained on the subgraph induced by its member set ``IN_k`` (non-members
are absent from training entirely: features, label and edges), and is then queried on the
full graph with the method's own inference (HeterPoisson's private inference sees the
members as training nodes and aggregates only non-members). Each node is IN for exactly half
of the ``K`` models.

* :func:`lira` (Carlini et al., *Membership Inference Attacks From First Principles*,
  S&P 2022, online variant): for a target model, each node's logit-scaled confidence
  ``φ = ln p_y − ln(1 − p_y)`` is compared with Gaussians fitted to ``φ`` under the other
  models where the node was IN and OUT (global variance by default, as advised for few
  shadows); score = log-likelihood ratio. Every model serves as a target in turn.
* :func:`shadow_attack` (Shokri et al., S&P 2017): a classifier on the sorted posterior
  vectors of the shadow models (labels: IN/OUT) applied to the target's posteriors.
* :func:`gradient_observation_attack` (spec 000 §3.7): the white-box adversary of the
  canary audit, whose Neyman-Pearson statistic over all noisy gradients is the score.

Metrics: :func:`gnnprivacy.attacks.metrics.attack_metrics` (raw AUC, accuracy, TPR at 1%
and 0.1% FPR) and a bootstrap CI of the AUC.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from gnnprivacy._validation import check_int
from gnnprivacy.attacks.metrics import attack_metrics, bootstrap_ci

__all__ = ["MembershipGame", "train_membership_models", "lira", "shadow_attack",
           "gradient_observation_attack", "run_membership", "balanced_memberships"]


def balanced_memberships(num_models: int, num_nodes: int, *, generator: np.random.Generator
                         ) -> np.ndarray:
    """``(K, n)`` boolean matrix: each node IN for exactly ``K // 2`` models (random)."""
    k = check_int("num_models", num_models, low=2)
    ranks = np.argsort(generator.random((k, num_nodes)), axis=0)
    return ranks < k // 2


def _induced(data, mask: torch.Tensor):
    """The training graph of one model: the subgraph induced by ``mask``, all nodes training."""
    from torch_geometric.data import Data
    from torch_geometric.utils import subgraph

    idx = mask.nonzero().flatten()
    ei, _ = subgraph(idx, data.edge_index, relabel_nodes=True, num_nodes=data.num_nodes)
    n = int(idx.numel())
    sub = Data(x=data.x[idx], y=data.y[idx], edge_index=ei, num_nodes=n)
    sub.train_mask = torch.ones(n, dtype=torch.bool)
    sub.val_mask = torch.zeros(n, dtype=torch.bool)
    sub.test_mask = torch.zeros(n, dtype=torch.bool)
    sub.num_classes = int(getattr(data, "num_classes", int(data.y.max()) + 1))
    return sub


def _query(data, mask: torch.Tensor):
    """The full graph as queried after training: members marked as training nodes."""
    q = data.clone()
    q.train_mask = mask.clone()
    q.test_mask = ~mask
    q.val_mask = torch.zeros_like(mask)
    return q


def _phi(logits: torch.Tensor, y: torch.Tensor) -> np.ndarray:
    """Logit-scaled confidence ``ln p_y − ln(1 − p_y)`` (stable: logit_y − logsumexp others)."""
    logits = logits.double()
    true = logits.gather(1, y.view(-1, 1)).squeeze(1)
    other = logits.clone()
    other.scatter_(1, y.view(-1, 1), -math.inf)
    return (true - torch.logsumexp(other, dim=1)).numpy()


@dataclass
class MembershipGame:
    """``K`` trained models with their member sets and their outputs on every node."""

    method: str
    memberships: np.ndarray          #: (K, n) bool
    phi: np.ndarray                  #: (K, n) logit-scaled confidence of the true label
    posteriors: np.ndarray           #: (K, n, C) softmax outputs
    claimed_epsilon: float
    utility: list = field(default_factory=list)
    seconds: float = 0.0


def train_membership_models(method: str, data, *, num_models: int = 16, params=None,
                            seed: int = 0, noise_multiplier: float | None = None,
                            progress=None) -> MembershipGame:
    """Train ``num_models`` models of ``method`` on balanced random halves of the nodes.

    Args:
        method: registry name (``gcn``, ``heterpoisson``, ``dpgnn``, ``dpmlp``, ``gap`` ...).
        data: the full graph (its own split is ignored: the pool is every node).
        num_models: ``K`` (each node IN for ``K // 2``).
        params: the method's params dataclass, or a dict of its fields.
        seed: seeds memberships and training.
        noise_multiplier: override the calibrated noise (node-DP methods).
        progress: optional callable(k) after each model.
    """
    from gnnprivacy.auditing.training import make_trainer_for, node_logits
    from gnnprivacy.experiments.registry import get_method

    t0 = time.perf_counter()
    spec = get_method(method)
    if params is None or isinstance(params, dict):
        params = spec.make_params(dict(params or {}))
    rng = np.random.default_rng(seed)
    n = int(data.num_nodes)
    members = balanced_memberships(num_models, n, generator=rng)
    phis, posts, utility = [], [], []
    claimed = math.inf
    for k in range(num_models):
        mask = torch.from_numpy(members[k])
        trainer = make_trainer_for(method, params, seed=seed * 1_000_003 + k,
                                   noise_multiplier=noise_multiplier)
        trainer.fit(_induced(data, mask))
        logits = node_logits(trainer, _query(data, mask))
        phis.append(_phi(logits, data.y))
        posts.append(torch.softmax(logits.double(), 1).numpy())
        utility.append(float((logits.argmax(1) == data.y)[~mask].float().mean()))
        if hasattr(trainer, "epsilon_"):
            claimed = float(trainer.epsilon_)
        if progress is not None:
            progress(k)
    return MembershipGame(method, members, np.stack(phis), np.stack(posts), claimed, utility,
                          time.perf_counter() - t0)


def _summarise(scores: np.ndarray, labels: np.ndarray, seed: int, n_boot: int) -> dict:
    m = attack_metrics(scores, labels)
    m["auc_ci95"] = bootstrap_ci(scores, labels, n_boot=n_boot,
                                 generator=np.random.default_rng(seed))
    m["num_scores"] = int(scores.size)
    return m


def lira(game: MembershipGame, *, targets: int | None = None, fixed_variance: bool = True,
         seed: int = 0, n_boot: int = 200) -> dict:
    """Online LiRA with every (or the first ``targets``) model as target in turn."""
    k_all = game.memberships.shape[0]
    targets = k_all if targets is None else min(targets, k_all)
    rng = np.random.default_rng(seed)
    scores, labels = [], []
    for t in range(targets):
        others = np.arange(k_all) != t
        m, phi = game.memberships[others], game.phi[others]
        # equal IN/OUT counts per node: drop one random model of the larger side (otherwise
        # leave-one-out biases a null attack's AUC below 0.5)
        use = np.ones_like(m)
        larger = np.where(m.sum(0) > (~m).sum(0), m, np.where(m.sum(0) < (~m).sum(0), ~m, False))
        prio = np.where(larger, rng.random(m.shape), -1.0)
        cols = np.nonzero(larger.any(0))[0]
        use[prio[:, cols].argmax(0), cols] = False
        m_use, m_out = m & use, ~m & use
        in_cnt, out_cnt = m_use.sum(0), m_out.sum(0)
        mu_in = np.where(in_cnt > 0, (phi * m_use).sum(0) / np.maximum(in_cnt, 1), np.nan)
        mu_out = np.where(out_cnt > 0, (phi * m_out).sum(0) / np.maximum(out_cnt, 1), np.nan)
        if fixed_variance:
            sd_in = np.full(phi.shape[1], np.std((phi - mu_in)[m_use]) + 1e-6)
            sd_out = np.full(phi.shape[1], np.std((phi - mu_out)[m_out]) + 1e-6)
        else:
            sd_in = np.sqrt(((phi - mu_in) ** 2 * m_use).sum(0) / np.maximum(in_cnt - 1, 1)) + 1e-6
            sd_out = np.sqrt(((phi - mu_out) ** 2 * m_out).sum(0)
                             / np.maximum(out_cnt - 1, 1)) + 1e-6
        x = game.phi[t]
        ll_in = -0.5 * ((x - mu_in) / sd_in) ** 2 - np.log(sd_in)
        ll_out = -0.5 * ((x - mu_out) / sd_out) ** 2 - np.log(sd_out)
        ok = np.isfinite(ll_in) & np.isfinite(ll_out)
        scores.append((ll_in - ll_out)[ok])
        labels.append(game.memberships[t][ok].astype(int))
    out = _summarise(np.concatenate(scores), np.concatenate(labels), seed, n_boot)
    out.update(attack="lira", targets=targets, shadows=k_all - 1, fixed_variance=fixed_variance)
    return out


def shadow_attack(game: MembershipGame, *, targets: int | None = 4, top_k: int = 3,
                  seed: int = 0, n_boot: int = 200) -> dict:
    """Shokri-style attack: logistic regression on sorted top-``k`` posteriors (+ true-label
    confidence) of the shadow models, evaluated on each target model."""
    from sklearn.linear_model import LogisticRegression

    k_all = game.memberships.shape[0]
    targets = k_all if targets is None else min(targets, k_all)
    k = min(top_k, game.posteriors.shape[2])

    def feats(j):
        p = np.sort(game.posteriors[j], axis=1)[:, ::-1][:, :k]
        return np.column_stack([np.log(p + 1e-12), game.phi[j]])

    scores, labels = [], []
    for t in range(targets):
        shadows = [j for j in range(k_all) if j != t]
        x = np.concatenate([feats(j) for j in shadows])
        y = np.concatenate([game.memberships[j] for j in shadows]).astype(int)
        clf = LogisticRegression(max_iter=500).fit(x, y)
        scores.append(clf.decision_function(feats(t)))
        labels.append(game.memberships[t].astype(int))
    out = _summarise(np.concatenate(scores), np.concatenate(labels), seed, n_boot)
    out.update(attack="shadow", targets=targets, shadows=k_all - 1)
    return out


def gradient_observation_attack(method: str, dataset: str = "csbm", *, epsilon: float | None = None,
                                runs: int = 10_000, seed: int = 0, n_boot: int = 200,
                                **audit_kwargs) -> dict:
    """The white-box adversary of spec 000 §3.7: sees every noisy gradient, scores each run
    with the Neyman-Pearson statistic of the canary (mechanism-only simulation)."""
    from gnnprivacy.auditing.api import _load
    from gnnprivacy.auditing.mechanism import simulate_statistics
    from gnnprivacy.auditing.plans import GraphFacts, plan_for

    values = dict(audit_kwargs.pop("params", None) or {})
    if epsilon is not None:
        values["epsilon"] = epsilon
    _, params, data = _load(method, dataset, audit_kwargs.pop("data_root", None), values)
    plan = plan_for(method, params, GraphFacts.from_data(data), **audit_kwargs)
    label = next(iter(plan.phases))
    member, nonmember = simulate_statistics(plan.phases[label], runs, generator=seed)
    scores = np.concatenate([member, nonmember])
    labels = np.concatenate([np.ones(runs, int), np.zeros(runs, int)])
    out = _summarise(scores, labels, seed, n_boot)
    out.update(attack="gradient-observation", variant=label, runs=runs,
               epsilon_claimed=plan.epsilon_claimed)
    return out


def run_membership(method: str, dataset: str, *, data_root=None, num_models: int = 16,
                   params: dict[str, Any] | None = None, seed: int = 0, targets: int | None = None,
                   split_seed: int = 0, data=None) -> dict:
    """Train the models of the membership game and run LiRA and the shadow attack."""
    if data is None:
        from gnnprivacy.datasets import load_dataset

        data = load_dataset(dataset, root=data_root, seed=split_seed)
    game = train_membership_models(method, data, num_models=num_models, params=params, seed=seed)
    return {"method": method, "dataset": dataset, "num_models": num_models,
            "claimed_epsilon": game.claimed_epsilon,
            "nonmember_accuracy": float(np.mean(game.utility)),
            "lira": lira(game, targets=targets, seed=seed),
            "shadow": shadow_attack(game, seed=seed), "seconds": game.seconds}
