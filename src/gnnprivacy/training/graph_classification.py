"""Graph classification, private (graph-level DP-SGD) or not, with GIN and GCN backbones.

`fit_graph_classifier` trains a `GraphClassifier` on the training graphs of a
`gnnprivacy.datasets.tu_graphs.GraphSet`:

* private (``epsilon`` given): `gnnprivacy.make_private` with ``sampler="graphs"``:
  Poisson sampling of whole graphs, each graph's whole gradient clipped to
  ``max_grad_norm``, one Gaussian draw per step, DP-Adam; unit graph, add/remove one
  training graph. ``delta`` defaults to ``1 / (10 N_train)``;
* non-private: the same model, loss, optimiser, batch size and epochs, shuffled batches.

The model is the user-model path's own: nothing here is special-cased by the engine, so the
built-in task and ``make_private`` in a user's loop are one code path.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from gnnprivacy._validation import check_choice, check_int, check_positive

__all__ = ["BACKBONES", "GraphClassifier", "GraphFit", "fit_graph_classifier",
           "graph_logits"]

BACKBONES = ("gin", "gcn")


class GraphClassifier(nn.Module):
    """Message passing, per-graph pooling, an MLP head: one row of logits per graph.

    ``gin``: GIN layers (Xu et al., ICLR 2019) with a two-layer MLP each and sum pooling;
    with ``edge_dim`` GINE layers read the edge features. ``gcn``: GCN layers and mean
    pooling (edge features unused). Every layer is followed by ReLU and a per-node
    ``LayerNorm`` (per-node statistics: no mixing between graphs, unlike BatchNorm).

    Args:
        in_channels, num_classes: sizes.
        backbone: ``"gin"`` or ``"gcn"``.
        hidden: channels per layer.
        layers: message-passing layers.
        edge_dim: edge-feature size (0: none).
    """

    def __init__(self, in_channels: int, num_classes: int, *, backbone: str = "gin",
                 hidden: int = 32, layers: int = 2, edge_dim: int = 0):
        super().__init__()
        from torch_geometric.nn import (GCNConv, GINConv, GINEConv, global_add_pool,
                                        global_mean_pool)

        #: the keyword arguments that rebuild the model (`gnnprivacy.save_model`'s ``init``)
        self.init_args = {"in_channels": int(in_channels), "num_classes": int(num_classes),
                          "backbone": backbone, "hidden": int(hidden), "layers": int(layers),
                          "edge_dim": int(edge_dim)}

        self.backbone = check_choice("backbone", backbone, BACKBONES)
        self.edge_dim = check_int("edge_dim", edge_dim, low=0) if backbone == "gin" else 0
        convs, norms = [], []
        for i in range(check_int("layers", layers, low=1)):
            f = in_channels if i == 0 else hidden
            if backbone == "gcn":
                convs.append(GCNConv(f, hidden))
            else:
                mlp = nn.Sequential(nn.Linear(f, hidden), nn.ReLU(), nn.Linear(hidden, hidden))
                convs.append(GINEConv(mlp, edge_dim=self.edge_dim)
                             if self.edge_dim else GINConv(mlp))
            norms.append(nn.LayerNorm(hidden))
        self.convs, self.norms = nn.ModuleList(convs), nn.ModuleList(norms)
        self.pool = global_add_pool if backbone == "gin" else global_mean_pool
        self.head = nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU(),
                                  nn.Linear(hidden, num_classes))

    def forward(self, x, edge_index, batch, edge_attr=None):
        h = x
        for conv, norm in zip(self.convs, self.norms):
            h = conv(h, edge_index, edge_attr) if self.edge_dim else conv(h, edge_index)
            h = norm(F.relu(h))
        return self.head(self.pool(h, batch))


def _forward(model, batch):
    """``model(x, edge_index, batch)``, with ``edge_attr`` as a fourth argument when the
    graphs have edge features (the calling convention of `graph_logits` and `accuracy`)."""
    edge_attr = getattr(batch, "edge_attr", None)
    if edge_attr is None:
        return model(batch.x, batch.edge_index, batch.batch)
    return model(batch.x, batch.edge_index, batch.batch, edge_attr)


@torch.no_grad()
def graph_logits(model, graphs: list, *, chunk: int = 512) -> torch.Tensor:
    """Logits of ``graphs`` (eval mode, no gradients), one row per graph in order; any model
    called as ``model(x, edge_index, batch[, edge_attr])``."""
    from torch_geometric.data import Batch

    was = model.training
    model.eval()
    out = [_forward(model, Batch.from_data_list(graphs[i:i + chunk]))
           for i in range(0, len(graphs), chunk)]
    model.train(was)
    return torch.cat(out) if out else torch.zeros(0)


@dataclass
class GraphFit:
    """A trained graph classifier and what its training spent.

    Attributes:
        model: the `GraphClassifier`.
        epsilon, delta: the executed privacy cost (``inf``/``None`` when not private).
        privacy: `PrivateTraining.privacy` (unit graph) or ``{}``.
        ledger: the accountant's ledger, or the non-private event.
        steps: optimiser steps run.
        seconds: training time.
    """

    model: GraphClassifier
    epsilon: float = math.inf
    delta: float | None = None
    privacy: dict = field(default_factory=dict)
    ledger: Any = field(default_factory=lambda: [{"event": "NonPrivateDpEvent", "count": 1}])
    steps: int = 0
    seconds: float = 0.0


#: what a graph-classification run's record adds to ``privacy["unaccounted"]``: its scores
TRAIN_SCORE_UNACCOUNTED = (
    "the record's `train_accuracy` is the released model scored on the raw training graphs: a "
    "statistic of the training data outside the epsilon (publish it only where the training "
    "graphs may be read); `val_accuracy` and `test_accuracy` read held-out graphs only")


def fit_graph_classifier(train_graphs: list, *, num_features: int, num_classes: int,
                         edge_dim: int = 0, backbone: str = "gin", epsilon: float | None = None,
                         delta: float | None = None, epochs: float = 30.0,
                         batch_size: int = 64, lr: float = 0.01, max_grad_norm: float = 1.0,
                         hidden: int = 32, layers: int = 2, seed: int = 0,
                         secure_mode: bool = False, make=None) -> GraphFit:
    """Train a `GraphClassifier` on ``train_graphs``; private when ``epsilon`` is given.

    Args:
        train_graphs: the training graphs (the privacy units when private).
        num_features, num_classes, edge_dim: sizes of the task.
        backbone, hidden, layers: the model (`GraphClassifier`).
        epsilon: target epsilon (graph-level, add/remove); ``None``: non-private.
        delta: default ``1 / (10 N_train)``.
        epochs: expected passes over the training graphs.
        batch_size: expected graphs per step (Poisson rate ``batch_size / N_train`` when
            private; a fixed batch size otherwise).
        lr: Adam learning rate. max_grad_norm: the per-graph clip bound.
        seed: model initialisation, sampling and noise (``secure_mode``: OS entropy noise).
        make: ``make_private`` (default) or another function of its signature, e.g.
            `gnnprivacy.training.sharded.make_private_sharded` with ``train_graphs`` this
            rank's `GraphShard` (the sharded run: the same model, loop and plan).
    """
    from gnnprivacy.random import torch_generator

    check_positive("epochs", epochs)
    check_int("batch_size", batch_size, low=1)
    gen = torch_generator(seed)
    with torch.random.fork_rng():
        torch.manual_seed(int(torch.randint(0, 2 ** 62, (1,), generator=gen)))
        model = GraphClassifier(num_features, num_classes, backbone=backbone, hidden=hidden,
                                layers=layers, edge_dim=edge_dim)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    t0 = time.perf_counter()
    if epsilon is None:
        steps = _fit_nonprivate(model, optimizer, train_graphs, epochs=epochs,
                                batch_size=batch_size, generator=gen)
        return GraphFit(model, steps=steps, seconds=time.perf_counter() - t0)
    import gnnprivacy.training.private as private

    n_train = getattr(train_graphs, "num_train", None) or len(train_graphs)
    pt = (make or private.make_private)(model, optimizer, train_graphs, sampler="graphs",
                                        epsilon=epsilon, delta=delta, epochs=epochs,
                                        batch_size=min(batch_size, n_train),
                                        max_grad_norm=max_grad_norm, secure_mode=secure_mode,
                                        seed=None if secure_mode else seed)
    try:
        while pt.steps < pt.steps_planned:
            for batch in pt.loader:
                optimizer.zero_grad()
                F.cross_entropy(_forward(model, batch), batch.y).backward()
                optimizer.step()
    finally:
        pt.close()
    return GraphFit(model, epsilon=pt.epsilon, delta=pt.delta, privacy=pt.privacy,
                    ledger=pt.ledger, steps=pt.steps, seconds=time.perf_counter() - t0)


def _fit_nonprivate(model, optimizer, graphs, *, epochs: float, batch_size: int,
                    generator: torch.Generator) -> int:
    """Shuffled batches of ``batch_size`` graphs, collated as the private loader does."""
    from gnnprivacy.training.private.graph_sampler import GraphSampler

    loader = GraphSampler()
    loader.setup(graphs)
    n = len(graphs)
    steps = max(1, math.ceil(epochs * n / batch_size))
    order = torch.empty(0, dtype=torch.long)
    model.train()
    for _ in range(steps):
        if order.numel() == 0:
            order = torch.randperm(n, generator=generator)
        picked, order = order[:batch_size], order[batch_size:]
        batch = loader.collate(picked)
        optimizer.zero_grad()
        F.cross_entropy(_forward(model, batch), batch.y).backward()
        optimizer.step()
    return steps


def accuracy(model, graphs: list) -> float:
    """Share of ``graphs`` whose label is the arg-max of the model's logits."""
    if not graphs:
        return float("nan")
    y = torch.cat([g.y.view(-1)[:1] for g in graphs])
    return float((graph_logits(model, graphs).argmax(1) == y).float().mean())
