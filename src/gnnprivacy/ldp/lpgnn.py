"""LPGNN baseline: multi-bit features, KProp, label denoising with forward correction (Drop).

Sajadmanesh and Gatica-Perez, "Locally Private Graph Neural Networks", CCS 2021, Sections
4-5; as used by RGNN's Table II (spec 004 §10.3). From a `ServerView` with multi-bit
feature reports ``x*`` and GRR label reports:

1. rectify: ``x' = MultiBit.rectify(x*)`` (unbiased, public bounds ``[0, 1]``);
2. KProp: ``x~ = S^{K_x} x'`` with ``S = D^{-1/2} A D^{-1/2}`` (no self-loops), computed once;
3. Drop targets: the noisy one-hot labels of train ∪ val (test rows zero) propagated
   ``K_y`` steps with ``S``, argmax (a node whose propagated row is all zero keeps its own
   report);
4. model: ``p(y|x) = softmax(GNN(x~))``; forward correction ``p(y'|x) = p(y|x) T`` with ``T``
   the GRR transition matrix; ``p(y~|x) = softmax(S^{K_y} p(y'|x))`` (``K_y = 0``: ``p(y'|x)``);
   loss ``-log p(y~_v|x)`` averaged over the training nodes;
5. the epoch with the best accuracy of ``argmax p(y|x)`` against the Drop targets on the
   validation nodes is reported.

The GNN uses SELU activations (LPGNN's choice). Budget parity with RGNN (spec §13.16): the
multi-bit encoder gets ``m * eps_x`` in total, i.e. ``eps_x`` per sampled dimension.

Privacy: post-processing of the reports; no event (the reports' budget is in
`gnnprivacy.ldp.budget`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from gnnprivacy._estimator import EstimatorParams
from gnnprivacy._validation import check_int
from gnnprivacy.ldp.backbone import ServerModelConfig, build_backbone, seeded
from gnnprivacy.ldp.propagation import propagate, sym_adjacency
from gnnprivacy.ldp.reconstruction import check_label_reports
from gnnprivacy.ldp.reports import ServerView
from gnnprivacy.ldp.training import TrainOutcome, train_full_batch
from gnnprivacy.mechanisms import grr_probabilities


@dataclass(frozen=True)
class LPGNNConfig(ServerModelConfig):
    """Server-side hyperparameters of the LPGNN baseline (shared ones: `ServerModelConfig`)."""

    activation: str = "selu"
    forward_correction: bool = True


def grr_transition_matrix(epsilon: float, num_classes: int) -> Tensor:
    """``T[i, j] = P[y' = j | y = i]`` of GRR: ``p`` on the diagonal, ``q`` elsewhere."""
    p, q = grr_probabilities(epsilon, num_classes)
    return torch.full((num_classes, num_classes), q) + (p - q) * torch.eye(num_classes)


def drop_targets(adj_sym: Tensor, y_reports: Tensor, labeled_mask: Tensor, *, num_classes: int,
                 steps: int) -> Tensor:
    """LPGNN's denoised targets: argmax of ``S^K onehot(y')`` on labelled nodes, else ``-1``."""
    y = check_label_reports(y_reports, labeled_mask, num_classes)
    onehot = torch.zeros(y.numel(), num_classes)
    onehot[labeled_mask] = torch.nn.functional.one_hot(y[labeled_mask], num_classes).float()
    prop = propagate(adj_sym, onehot, check_int("steps", steps, low=0))
    empty = prop.sum(dim=1) <= 0
    out = torch.where(empty, y, prop.argmax(dim=1))
    return torch.where(labeled_mask, out, torch.full_like(y, -1))


@dataclass
class LPGNNFit:
    """One trained LPGNN: configuration, training outcome and model."""

    config: LPGNNConfig
    outcome: TrainOutcome
    model: torch.nn.Module

    @property
    def logits(self) -> Tensor:
        return self.outcome.logits


def train_lpgnn(view: ServerView, config: LPGNNConfig, *, generator: torch.Generator,
                device: torch.device | str = "cpu") -> LPGNNFit:
    """Train LPGNN on multi-bit feature reports and GRR label reports (the backbone and the
    propagations on ``device``; the returned logits on the CPU)."""
    if view.feature_mechanism != "multibit":
        raise ValueError(f"LPGNN needs multi-bit feature reports; got {view.feature_mechanism!r}")
    cfg = config
    adj = sym_adjacency(view.edge_index, view.num_nodes)
    x = view.mechanisms["features"].rectify(view.x_reports).to(torch.float32)
    x = propagate(adj, x, cfg.kx)
    targets = drop_targets(adj, view.y_reports, view.labeled_mask,
                           num_classes=view.num_classes, steps=cfg.ky)
    trans = grr_transition_matrix(view.label_epsilon, view.num_classes)
    train_idx = view.train_mask.nonzero().view(-1)
    model = build_backbone(cfg.backbone, x.size(1), view.num_classes, hidden=cfg.hidden,
                           dropout=cfg.dropout, heads=cfg.heads, activation=cfg.activation,
                           generator=generator)
    dev = torch.device(device)
    if dev.type != "cpu":
        model, adj, x, targets = model.to(dev), adj.to(dev), x.to(dev), targets.to(dev)
        trans, train_idx = trans.to(dev), train_idx.to(dev)
    edge_index = view.edge_index.to(dev)

    def loss_fn(logits: Tensor) -> Tensor:
        p = torch.softmax(logits, dim=1)
        if cfg.forward_correction:
            p = p @ trans
        if cfg.ky > 0:
            p = torch.softmax(propagate(adj, p, cfg.ky), dim=1)
        return torch.nn.functional.nll_loss(torch.log(p[train_idx] + 1e-20), targets[train_idx])

    with seeded(generator, dev):
        outcome = train_full_batch(model, lambda: model(x, edge_index), loss_fn,
                                   val_mask=view.val_mask.to(dev), val_targets=targets,
                                   epochs=cfg.epochs, lr=cfg.lr, weight_decay=cfg.weight_decay,
                                   grad_clip=cfg.grad_clip)
    outcome.logits = outcome.logits.cpu()
    return LPGNNFit(config=cfg, outcome=outcome, model=model)


class LPGNN(EstimatorParams):
    """Estimator wrapper: ``LPGNN(config).fit(view, generator=g)``; ``fit_``, ``logits_`` after.

    *Privacy*: local DP, as `RGNN`: the server sees the users' multi-bit feature reports
    (``collect_reports(..., feature_mechanism="multibit")``) and GRR label reports only;
    training is post-processing.

    Example:
        >>> import torch
        >>> from gnnprivacy.ldp import LPGNN, LPGNNConfig, collect_reports
        >>> g = torch.Generator().manual_seed(0)
        >>> y = torch.randint(0, 3, (300,), generator=g)
        >>> x = torch.nn.functional.one_hot(y, 8).float()      # features in [0, 1]
        >>> split = [torch.arange(300) % 3 == r for r in range(3)]
        >>> view = collect_reports(x, y, edge_index=torch.randint(0, 300, (2, 1200), generator=g),
        ...                        train_mask=split[0], val_mask=split[1], test_mask=split[2],
        ...                        num_classes=3, eps_x=2.0, eps_y=2.0, m=None,
        ...                        feature_mechanism="multibit", generator=g)
        >>> LPGNN(LPGNNConfig(epochs=10)).fit(view, generator=g).predict().shape
        torch.Size([300])
    """

    def __init__(self, config: LPGNNConfig | None = None):
        self.config = config or LPGNNConfig()

    def fit(self, view: ServerView, *, generator: torch.Generator,
            device: torch.device | str = "cpu") -> LPGNN:
        self.fit_ = train_lpgnn(view, self.config, generator=generator, device=device)
        self.logits_ = self.fit_.logits
        return self

    def predict(self) -> Tensor:
        return self.logits_.argmax(dim=1)

    def __repr__(self) -> str:
        return f"LPGNN(config={self.config!r})"


__all__ = ["LPGNN", "LPGNNConfig", "LPGNNFit", "drop_targets", "grr_transition_matrix",
           "train_lpgnn"]
