"""LiRA for any model: the likelihood-ratio membership attack on the outputs of shadow models.

Carlini et al., *Membership Inference Attacks From First Principles* (IEEE S&P 2022). The
attacker trains ``K`` shadow models, each on a random half of a pool of candidate nodes (every
node IN for exactly ``K // 2`` of them), and queries each on every node. For a node ``i`` and a
model, the statistic is the logit-scaled confidence of the true label
``φ = ln p_y − ln(1 − p_y)`` (`logit_confidence`), which is close to Gaussian over training
runs. A target model's ``φ_i`` is then scored

* **online**: log-likelihood ratio of ``φ_i`` under the Gaussians fitted to the shadows where
  ``i`` was IN and where it was OUT;
* **offline**: how far ``φ_i`` lies above the OUT Gaussian only (one-sided, the shadows never
  need to contain the target's candidates): ``(φ_i − μ_out,i) / σ_out``.

With few shadows (8-64) the paper advises one global variance instead of per-node ones
(``fixed_variance=True``, the default). `lira_attack` evaluates the attack with every shadow
as target in turn (leave-one-out: the target's own membership is the ground truth, the other
``K − 1`` models are its shadows) and returns the AUC with a bootstrap interval, TPR at 1% and
0.1% FPR and the ROC curve. `lira_scores` scores another target (e.g. the released model)
against all ``K`` shadows.

This module knows only arrays: the models are trained and queried by the caller
(`gnnprivacy.auditing.model_card` trains them with the user's ``train_fn``), which keeps
the attack independent of how a model is built.

*Privacy*: an attack measures leakage empirically; it spends no budget and claims no epsilon.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from gnnprivacy._validation import check_int
from gnnprivacy.attacks.metrics import attack_metrics, bootstrap_ci
from gnnprivacy.errors import InvalidParameterError

__all__ = ["VARIANTS", "half_memberships", "lira_attack", "lira_scores", "logit_confidence",
           "rank_auc", "roc_points", "summarise_scores"]

#: LiRA's variants (see the module docstring).
VARIANTS = ("online", "offline")

#: FPR grid of the ROC curve kept in results (log-spaced, as the paper plots it).
_ROC_GRID = np.unique(np.r_[np.logspace(-4, 0, 41), [0.001, 0.01]])


def logit_confidence(logits: torch.Tensor, y: torch.Tensor) -> np.ndarray:
    """``φ = ln p_y − ln(1 − p_y)`` per row, computed stably as
    ``logit_y − logsumexp(other logits)``."""
    logits = torch.as_tensor(logits).detach().double().cpu()
    y = torch.as_tensor(y).view(-1, 1).cpu()
    true = logits.gather(1, y).squeeze(1)
    other = logits.clone()
    other.scatter_(1, y, -math.inf)
    return (true - torch.logsumexp(other, dim=1)).numpy()


def half_memberships(num_models: int, pool: np.ndarray, num_nodes: int, *,
                     generator: np.random.Generator) -> np.ndarray:
    """``(K, n)`` boolean: each node of ``pool`` IN for exactly ``K // 2`` models (a random
    half of the pool per model, balanced per node); nodes outside the pool never IN."""
    k = check_int("num_models", num_models, low=2)
    pool = np.asarray(pool, dtype=np.int64)
    out = np.zeros((k, num_nodes), dtype=bool)
    ranks = np.argsort(generator.random((k, pool.size)), axis=0)
    out[:, pool] = ranks < k // 2
    return out


def _fit(phi: np.ndarray, side: np.ndarray, fixed_variance: bool):
    """Per-node mean of ``phi`` over the rows where ``side``; a global or per-node std."""
    cnt = side.sum(0)
    mu = np.where(cnt > 0, (phi * side).sum(0) / np.maximum(cnt, 1), np.nan)
    resid = np.where(side, phi - mu, 0.0)
    if fixed_variance:
        sd = np.full(phi.shape[1], math.sqrt((resid ** 2).sum() / max(int(side.sum()), 1)))
    else:
        sd = np.sqrt((resid ** 2).sum(0) / np.maximum(cnt - 1, 1))
    return mu, sd + 1e-6


def lira_scores(target_phi, shadow_phi, shadow_in, *, variant: str = "online",
                fixed_variance: bool = True) -> np.ndarray:
    """LiRA's score of every node for one target model (higher = member).

    Args:
        target_phi: ``(n,)`` the target's `logit_confidence` per node.
        shadow_phi: ``(K, n)`` the shadows' `logit_confidence`.
        shadow_in: ``(K, n)`` boolean, node IN the shadow's training set.
        variant: ``"online"`` (IN and OUT Gaussians) or ``"offline"`` (OUT only).
        fixed_variance: one variance per side for all nodes (advised for few shadows).

    Returns:
        ``(n,)`` scores; NaN where a node has no OUT (offline) or no IN/OUT shadow (online).
    """
    if variant not in VARIANTS:
        raise InvalidParameterError("variant", f"one of {list(VARIANTS)}", variant)
    phi = np.asarray(shadow_phi, dtype=np.float64)
    member = np.asarray(shadow_in, dtype=bool)
    x = np.asarray(target_phi, dtype=np.float64)
    return _masked_scores(x, phi, member, np.ones_like(member), variant, fixed_variance)


def roc_points(scores, labels) -> dict[str, list[float]]:
    """The ROC curve at a fixed log-spaced FPR grid (``fpr``, ``tpr`` lists)."""
    from sklearn.metrics import roc_curve

    fprs, tprs, _ = roc_curve(labels, scores)
    tpr = [float(tprs[fprs <= f + 1e-12].max()) for f in _ROC_GRID]
    return {"fpr": [float(f) for f in _ROC_GRID], "tpr": tpr}


def rank_auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """The AUC as the Mann-Whitney statistic (ties count one half): the ROC AUC, computed
    from ranks (fast enough for bootstrap replicates of large graphs)."""
    from scipy.stats import rankdata

    pos = labels == 1
    n1, n0 = int(pos.sum()), int((~pos).sum())
    return float((rankdata(scores)[pos].sum() - n1 * (n1 + 1) / 2.0) / (n1 * n0))


def summarise_scores(scores, labels, *, seed: int = 0, n_boot: int = 200) -> dict:
    """Attack metrics of ``scores`` with a bootstrap 95% interval of the AUC and the ROC."""
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels).astype(int)
    m = attack_metrics(s, y)
    ci = bootstrap_ci(s, y, metric=rank_auc, n_boot=n_boot, generator=np.random.default_rng(seed))
    return {"auc": m["auc"], "auc_ci95": [ci["low"], ci["high"]],
            "tpr_at_1pct_fpr": m["tpr_at_1pct_fpr"], "tpr_at_0.1pct_fpr": m["tpr_at_0.1pct_fpr"],
            "accuracy": m["accuracy"], "num_scores": int(s.size), "roc": roc_points(s, y)}


def lira_attack(phi, memberships, *, variant: str = "online", fixed_variance: bool = True,
                pool=None, seed: int = 0, n_boot: int = 200) -> dict:
    """LiRA with every model as target in turn against the other ``K − 1``.

    Args:
        phi: ``(K, n)`` `logit_confidence` of every model on every node.
        memberships: ``(K, n)`` boolean training sets (`half_memberships`).
        variant: ``"online"`` or ``"offline"``.
        fixed_variance: global variances (default) or per-node ones.
        pool: the candidate nodes scored (default: every node IN for some model).
        seed, n_boot: the balancing draws and the bootstrap of the AUC interval.

    Returns:
        ``auc``, ``auc_ci95``, ``tpr_at_1pct_fpr``, ``tpr_at_0.1pct_fpr``, ``accuracy``,
        ``roc``, ``num_scores``, ``variant``, ``shadows``.
    """
    phi = np.asarray(phi, dtype=np.float64)
    mem = np.asarray(memberships, dtype=bool)
    if phi.shape != mem.shape or phi.ndim != 2:
        raise InvalidParameterError("phi", f"an array of the memberships' shape {mem.shape}",
                                    phi.shape)
    k = check_int("num_models", phi.shape[0], low=4)
    cols = np.flatnonzero(mem.any(0)) if pool is None else np.asarray(pool, dtype=np.int64)
    rng = np.random.default_rng(seed)
    scores, labels = [], []
    for t in range(k):
        others = np.arange(k) != t
        m = mem[others][:, cols]
        use = np.ones_like(m)
        # equal IN/OUT shadow counts per node: leave-one-out leaves one side a model short,
        # which biases a null attack below 0.5; drop one random model of the larger side
        n_in = m.sum(0)
        larger = np.where(n_in > (~m).sum(0), m, np.where(n_in < (~m).sum(0), ~m, False))
        prio = np.where(larger, rng.random(m.shape), -1.0)
        fix = np.flatnonzero(larger.any(0))
        use[prio[:, fix].argmax(0), fix] = False
        p = phi[others][:, cols]
        s = _masked_scores(phi[t, cols], p, m, use, variant, fixed_variance)
        ok = np.isfinite(s)
        scores.append(s[ok])
        labels.append(mem[t, cols][ok])
    out = summarise_scores(np.concatenate(scores), np.concatenate(labels), seed=seed, n_boot=n_boot)
    out.update(variant=variant, shadows=k - 1, targets=k, fixed_variance=fixed_variance)
    return out


def _masked_scores(x, phi, member, use, variant, fixed_variance):
    """`lira_scores` over the shadow rows where ``use`` (NaN-free: unused rows are neither
    IN nor OUT)."""
    m_in, m_out = member & use, ~member & use
    mu_out, sd_out = _fit(phi, m_out, fixed_variance)
    if variant == "offline":
        return (x - mu_out) / sd_out
    mu_in, sd_in = _fit(phi, m_in, fixed_variance)
    return (-0.5 * ((x - mu_in) / sd_in) ** 2 - np.log(sd_in)
            + 0.5 * ((x - mu_out) / sd_out) ** 2 + np.log(sd_out))
