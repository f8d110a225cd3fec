"""MemGuard adapted to link stealing (Jia et al., CCS 2019; spec 003 §5.1, our adaptation §9 A13).

MemGuard perturbs released confidence vectors so that a *defender-trained* inference classifier
is fooled, without changing any predicted label:

* The defender's classifier ``g`` is an Attack-1-style link classifier (features
  ``[D8(p, q), E(p, q)]`` of a node pair's posteriors, He et al.'s 32-32 MLP) trained on the
  pairs of the defender's own graph (D3).
* Phase I, per node ``i``: find logit noise ``e`` minimising
  ``|mean_{j in P_i} g(softmax(z_i + e), v_j) - 0.5| + c2 * hinge(label) + c3 * |softmax(z_i + e) - v_i|_1``
  (Adam on ``e``, all nodes at once; ``hinge`` keeps the top-1 class with a margin). A node
  whose label would still change keeps its clean vector.
* Phase II: the noisy vector is released with probability ``min(1, budget / |r_i - v_i|_1)``
  (else the clean one), so the expected L1 distortion per node is at most ``budget``. The choice
  is drawn once per node (seeded) and cached, as MemGuard does.

*Privacy*: empirical defence only (no DP guarantee, no privacy event).
"""

from __future__ import annotations

import numpy as np

from gnnprivacy._estimator import EstimatorParams
from gnnprivacy._validation import check_int, check_positive, check_real

__all__ = ["MemGuard", "torch_pair_features"]


def torch_pair_features(p, q):
    """Differentiable ``[D8(p, q), E(p, q)]`` (12 features) for rows of ``p`` and ``q``."""
    import torch

    eps = 1e-12
    d = p - q
    ad = d.abs()
    cos = 1 - (p * q).sum(1) / (p.norm(dim=1) * q.norm(dim=1)).clamp_min(eps)
    pc, qc = p - p.mean(1, keepdim=True), q - q.mean(1, keepdim=True)
    corr = 1 - (pc * qc).sum(1) / (pc.norm(dim=1) * qc.norm(dim=1)).clamp_min(eps)
    den = (p.abs() + q.abs()).clamp_min(eps)
    feats = [cos, (d * d).sum(1).clamp_min(eps).sqrt(), corr, ad.max(1).values,
             ad.sum(1) / (p + q).abs().sum(1).clamp_min(eps), (ad / den).sum(1), ad.sum(1),
             (d * d).sum(1)]

    def ent(x):
        x = x + 1e-5
        return -(x * x.log()).sum(1)

    hp, hq = ent(p), ent(q)
    feats += [(hp + hq) / 2, hp * hq, (hp - hq).abs(), (hp - hq) ** 2]
    return torch.stack(feats, 1)


class MemGuard(EstimatorParams):
    """Link-adapted MemGuard (see the module docstring).

    *Privacy*: an empirical defence; it claims no epsilon.

    Args:
        budget: expected L1 distortion per node (Phase II), >= 0.
        steps: Adam steps of Phase I.
        lr: Adam learning rate of Phase I.
        c2: weight of the label hinge.
        c3: weight of the L1 distortion.
        seed: seeds the defender classifier and Phase II's draws.

    Example:
        >>> from gnnprivacy.defenses import MemGuard
        >>> MemGuard(budget=0.3).get_params()["budget"]
        0.3
    """

    def __init__(self, *, budget: float = 0.4, steps: int = 200, lr: float = 0.1,
                 c2: float = 10.0, c3: float = 0.1, seed: int = 0):
        self.budget = check_real("budget", budget, low=0.0)
        self.steps = check_int("steps", steps, low=1)
        self.lr = check_positive("lr", lr)
        self.c2 = check_real("c2", c2, low=0.0)
        self.c3 = check_real("c3", c3, low=0.0)
        self.seed = check_int("seed", seed, low=0)

    def fit_classifier(self, probs, pairs_u, pairs_w, labels) -> "MemGuard":
        """Train the defender's link classifier on its own graph's posteriors and pairs."""
        import torch

        from gnnprivacy.nn.pair_classifier import AttackMLP

        p = torch.as_tensor(np.asarray(probs), dtype=torch.float64)
        x = torch_pair_features(p[pairs_u], p[pairs_w]).numpy()
        self.classifier_ = AttackMLP(seed=self.seed).fit(x, labels)
        return self

    def defend(self, logits, edge_index) -> tuple[np.ndarray, dict]:
        """Released vectors for every node of a graph; returns ``(released, info)``."""
        import torch

        from gnnprivacy.datasets.link_splits import undirected_edges

        z = torch.as_tensor(np.asarray(logits), dtype=torch.float64)
        v = torch.softmax(z, 1)
        n, a = v.shape
        e = undirected_edges(np.asarray(edge_index))
        src = torch.as_tensor(np.r_[e[:, 0], e[:, 1]], dtype=torch.long)
        dst = torch.as_tensor(np.r_[e[:, 1], e[:, 0]], dtype=torch.long)
        deg = torch.zeros(n, dtype=torch.float64).index_add_(0, src, torch.ones(src.numel(), dtype=torch.float64))
        clf = self.classifier_
        mean = torch.as_tensor(clf.mean_)
        std = torch.as_tensor(np.where(clf.std_ > 0, clf.std_, 1.0))
        model = clf.model_.double().eval()
        for prm in model.parameters():
            prm.requires_grad_(False)
        top = v.argmax(1)
        noise = torch.zeros_like(z, requires_grad=True)
        opt = torch.optim.Adam([noise], lr=self.lr)
        for _ in range(self.steps if len(e) else 0):
            opt.zero_grad()
            zz = z + noise
            r = torch.softmax(zz, 1)
            score = torch.softmax(model((torch_pair_features(r[src], v[dst]) - mean) / std), 1)[:, 1]
            per_node = torch.zeros(n, dtype=torch.float64).index_add_(0, src, score) / deg.clamp_min(1)
            zt = zz.gather(1, top[:, None]).squeeze(1)
            other = zz.masked_fill(torch.nn.functional.one_hot(top, a).bool(), -1e9).max(1).values
            hinge = torch.relu(other - zt + 1e-3)
            loss = ((per_node - 0.5).abs() * (deg > 0) + self.c2 * hinge
                    + self.c3 * (r - v).abs().sum(1)).sum()
            loss.backward()
            opt.step()
        with torch.no_grad():
            r = torch.softmax(z + noise, 1)
            keep = (r.argmax(1) != top) | (deg == 0)
            r[keep] = v[keep]
        r, v = r.numpy(), v.numpy()
        l1 = np.abs(r - v).sum(1)
        rng = np.random.default_rng(np.random.SeedSequence([self.seed, 11]))
        prob = np.where(l1 > 0, np.minimum(1.0, self.budget / np.maximum(l1, 1e-300)), 1.0)
        use = rng.random(n) < prob
        released = np.where(use[:, None], r, v)
        assert (released.argmax(1) == v.argmax(1)).all()
        return released, {"memguard_perturbed": int((use & (l1 > 0)).sum()),
                          "memguard_mean_l1": float(np.abs(released - v).sum(1).mean())}
