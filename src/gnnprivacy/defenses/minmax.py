"""Min-Max adversarial regularisation adapted to links (Nasr et al., CCS 2018; spec 003 §5.1,
our adaptation §9 A13).

The GNN ``f`` is trained jointly with an inference adversary ``h``: an Attack-3-style pair
classifier on ``[OPS(p_u, p_w), D8(p_u, p_w), E(p_u, p_w)]`` of the model's posteriors, whose
"members" are the training graph's edges and "non-members" its non-edges. Each epoch takes one
Adam step of ``h`` (binary cross-entropy on a balanced batch of pairs, model outputs detached),
then one step of ``f`` on ``CE(train nodes) + lambda * mean_{(u,w) in E} log h(u, w)``, which lowers
the adversary's confidence on true edges. ``lambda = 0`` is plain training. Early stopping on the
validation accuracy restores the best weights, as the library's trainers do.

*Privacy*: empirical defence (a regulariser); no DP guarantee, no privacy event.
"""

from __future__ import annotations

import numpy as np

from gnnprivacy._estimator import EstimatorParams
from gnnprivacy._validation import check_int, check_positive, check_real

__all__ = ["MinMaxTrainer", "torch_attack3_features"]


def torch_attack3_features(p, q):
    """Differentiable Attack-3 features ``[OPS(p, q), D8(p, q), E(p, q)]``."""
    import torch

    from gnnprivacy.defenses.memguard import torch_pair_features

    d = p - q
    return torch.cat([(p + q) / 2, p * q, d.abs(), d * d, torch_pair_features(p, q)], 1)


class MinMaxTrainer(EstimatorParams):
    """Train a GNN with link-adversarial regularisation; ``fit(data)``, ``predict_logits(data)``.

    *Privacy*: an empirical defence (adversarial regularisation); it claims no epsilon.

    Args:
        encoder: ``gcn``, ``gat``, ``sage`` or ``gin``; ``hidden_channels``, ``heads``, ``dropout``,
            ``lr``, ``weight_decay``: its architecture and optimiser.
        lam: the adversarial weight ``lambda`` (>= 0).
        epochs: training epochs.
        patience: early-stopping patience in epochs (validation accuracy).
        adv_lr: the adversary's Adam learning rate.
        seed: seeds initialisation, dropout and pair sampling.

    Example:
        >>> from gnnprivacy.datasets import load_dataset
        >>> from gnnprivacy.defenses import MinMaxTrainer
        >>> data = load_dataset("csbm", num_nodes=300, seed=0)
        >>> model = MinMaxTrainer(lam=0.5, epochs=5).fit(data)
        >>> model.predict_logits(data).shape
        torch.Size([300, 4])
    """

    def __init__(self, encoder: str = "gcn", *, lam: float = 1.0, hidden_channels: int = 16,
                 heads: int = 8, dropout: float = 0.5, lr: float = 0.01, weight_decay: float = 5e-4,
                 epochs: int = 200, patience: int = 50, adv_lr: float = 0.01,
                 normalize_features: bool = False, seed: int = 0):
        self.encoder = encoder
        self.lam = check_real("lam", lam, low=0.0)
        self.arch = {"hidden_channels": hidden_channels, "heads": heads, "dropout": dropout}
        self.lr, self.weight_decay = check_positive("lr", lr), check_real("weight_decay", weight_decay, low=0.0)
        self.epochs, self.patience = check_int("epochs", epochs, low=1), check_int("patience", patience, low=1)
        self.adv_lr = check_positive("adv_lr", adv_lr)
        self.normalize_features = normalize_features
        self.seed = check_int("seed", seed, low=0)

    def _x(self, data):
        from gnnprivacy.training.nonprivate import l1_normalize_rows

        return l1_normalize_rows(data.x) if self.normalize_features else data.x

    def fit(self, data) -> "MinMaxTrainer":
        import copy

        import torch
        import torch.nn.functional as F

        from gnnprivacy.datasets.link_splits import sample_non_edges, undirected_edges
        from gnnprivacy.nn.encoders import build_encoder

        gen = torch.Generator().manual_seed(self.seed)
        rng = np.random.default_rng(self.seed)
        x, ei, y = self._x(data), data.edge_index, data.y
        edges = undirected_edges(ei.numpy())
        non = sample_non_edges(data.num_nodes, len(edges), edges, generator=rng)
        eu, ew = torch.as_tensor(edges[:, 0]), torch.as_tensor(edges[:, 1])
        nu, nw = torch.as_tensor(non[:, 0]), torch.as_tensor(non[:, 1])
        c = int(y.max()) + 1
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed)
            self.model_ = build_encoder(self.encoder, x.size(1), c, generator=gen, **self.arch)
            adv = torch.nn.Sequential(torch.nn.Linear(4 * c + 12, 32), torch.nn.ReLU(),
                                      torch.nn.Linear(32, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
            opt = torch.optim.Adam(self.model_.parameters(), lr=self.lr, weight_decay=self.weight_decay)
            opt_h = torch.optim.Adam(adv.parameters(), lr=self.adv_lr)
            best, best_state, bad = -1.0, None, 0
            for _ in range(self.epochs):
                self.model_.train()
                p = torch.softmax(self.model_(x, ei), 1)
                if len(edges) and self.lam > 0:
                    pd = p.detach()
                    logits_h = torch.cat([adv(torch_attack3_features(pd[eu], pd[ew])),
                                          adv(torch_attack3_features(pd[nu], pd[nw]))]).squeeze(1)
                    target = torch.cat([torch.ones(len(eu)), torch.zeros(len(nu))])
                    opt_h.zero_grad()
                    F.binary_cross_entropy_with_logits(logits_h, target).backward()
                    opt_h.step()
                loss = F.nll_loss(torch.log(p[data.train_mask] + 1e-12), y[data.train_mask])
                if len(edges) and self.lam > 0:
                    gain = F.logsigmoid(adv(torch_attack3_features(p[eu], p[ew]))).mean()
                    loss = loss + self.lam * gain
                opt.zero_grad()
                loss.backward()
                opt.step()
                self.model_.eval()
                with torch.no_grad():
                    pred = self.model_(x, ei).argmax(1)
                val = float((pred[data.val_mask] == y[data.val_mask]).float().mean()) if data.val_mask.any() else 0.0
                if val > best:
                    best, best_state, bad = val, copy.deepcopy(self.model_.state_dict()), 0
                else:
                    bad += 1
                    if bad >= self.patience:
                        break
            if best_state is not None:
                self.model_.load_state_dict(best_state)
        self.model_.eval()
        return self

    def predict_logits(self, data):
        import torch

        with torch.no_grad():
            return self.model_(self._x(data), data.edge_index)
