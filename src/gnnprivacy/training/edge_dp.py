"""``edge-dp``: edge-level DP node classification through `make_private(sampler="edges")`.

The built-in recipe of the user path (the same sampler, engine, accountant and release):

1. **Encoder, free**: under the edge unit the features and labels are public, so an MLP
   encoder ``e(x)`` with a linear head is trained on the training nodes without noise and
   then frozen (it reads no edge).
2. **Graph part, DP-SGD**: ``K`` sum-aggregation SAGE layers over the row-normalised
   encodings and a head over ``[ē, h_1, ..., h_K]`` (the head starts as the encoder's, the
   new blocks at zero, so step 0 is the MLP), trained by ``make_private(sampler="edges")``
   (Poisson centres, per-subgraph clipping, `EdgeSubgraphDpEvent` per step).
3. **Predictions, in the same epsilon** (``inference="noisy"``): one release of each layer's
   noisy aggregate (`gnnprivacy.training.private.edge_inference`); the model is trained
   with the same message clip and aggregate noise (``noise_in_training``) so it reads them.

*Privacy.* Unit edge, add/remove (an undirected edge is both entries). Epsilon covers the
DP-SGD steps and, with ``inference="noisy"``, every prediction on the fitted graph; the
record lists the public parts (features, labels, node set) under ``unaccounted``.
``inference="unprotected"`` trains the same way but predicts on the true graph: its record
says the predictions are outside the epsilon.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from gnnprivacy._estimator import EstimatorParams
from gnnprivacy._validation import check_choice, check_int, check_positive, check_real
from gnnprivacy.training.node_dp.common import LogitsClassifier

__all__ = ["EdgeDPTrainer", "EdgeNet", "GraphPart"]

#: the free encoder trains for at least this many minibatch steps (small training sets)
MIN_PRETRAIN_STEPS = 200


class GraphPart(nn.Module):
    """``head([h_0, h_1, .., h_K])`` with ``h_k = tanh(SAGE_k(h_{k-1}))`` (sum aggregation)
    over given node encodings ``h_0``: the part of `EdgeNet` that reads edges."""

    def __init__(self, hidden: int, classes: int, hops: int = 1):
        super().__init__()
        from torch_geometric.nn import SAGEConv

        self.convs = nn.ModuleList([SAGEConv(hidden, hidden, aggr="sum") for _ in range(hops)])
        self.head = nn.Linear(hidden * (hops + 1), classes)

    def forward(self, h: Tensor, edge_index: Tensor) -> Tensor:
        blocks = [h]
        for conv in self.convs:
            h = torch.tanh(conv(h, edge_index))
            blocks.append(h)
        return self.head(torch.cat(blocks, dim=1))


class EdgeNet(nn.Module):
    """An MLP encoder ``ē = e(x) / ‖e(x)‖`` (reads no edge) and a `GraphPart` over ``ē``."""

    def __init__(self, in_channels: int, hidden: int, classes: int, hops: int = 1):
        super().__init__()
        self.init_args = {"in_channels": in_channels, "hidden": hidden, "classes": classes,
                          "hops": hops}
        self.encoder = nn.Sequential(nn.Linear(in_channels, hidden), nn.SELU(),
                                     nn.Linear(hidden, hidden))
        self.graph = GraphPart(hidden, classes, hops)

    def encode(self, x: Tensor) -> Tensor:
        return F.normalize(self.encoder(x), dim=1)

    def forward(self, x: Tensor, edge_index: Tensor) -> Tensor:
        return self.graph(self.encode(x), edge_index)


def _with_features(graph, x: Tensor):
    """A light copy of ``graph`` (edges, labels, masks, split) with features ``x``."""
    from torch_geometric.data import Data

    keys = ("edge_index", "y", "train_mask", "val_mask", "test_mask")
    out = Data(x=x, num_nodes=int(graph.num_nodes),
               **{k: graph[k] for k in keys if getattr(graph, k, None) is not None})
    if getattr(graph, "split", None) is not None:
        out.split = graph.split
    return out


class EdgeDPTrainer(LogitsClassifier, EstimatorParams):
    """Edge-level DP node classification (estimator-like): ``fit(data)``,
    ``predict_logits(data)``, ``score(data)``.

    Args:
        epsilon, delta: the target (delta default ``1 / (10 |E|)``, |E| the unit edges).
        hops: message-passing layers ``K`` (1: no degree bound, occurrence 2).
        max_out_degree: ``D`` for ``K >= 2`` (default: the sampler's).
        inference: ``"noisy"`` (predictions in the epsilon) or ``"unprotected"``.
        inference_share: share of epsilon for the release.
        steps, batch_size: DP-SGD steps and expected batch (defaults: the sampler's plan).
        pretrain_epochs: epochs of the (free) encoder (minibatches of 256).
        clip_norm: per-subgraph clip ``C``; hidden: width; lr: Adam.
        generator: int seed or ``None``; secure_mode: OS CSPRNG noise.
    """

    name = "edge-dp"

    def __init__(self, *, epsilon: float = 8.0, delta: float | None = None, hops: int = 1,
                 max_out_degree: int | None = None, inference: str = "noisy",
                 inference_share: float = 0.5, steps: int | None = None,
                 batch_size: int | None = None, pretrain_epochs: int = 20,
                 clip_norm: float = 1.0, hidden: int = 32, lr: float = 0.01,
                 noise_in_training: bool = True,
                 generator: torch.Generator | int | None = None,
                 progress: Callable | None = None, secure_mode: bool = False):
        self.epsilon = check_positive("epsilon", epsilon)
        self.delta = None if delta is None else check_real("delta", delta, low=0.0, high=1.0,
                                                             low_open=True, high_open=True)
        self.hops = check_int("hops", hops, low=1)
        self.max_out_degree = (None if max_out_degree is None
                               else check_int("max_out_degree", max_out_degree, low=1))
        self.inference = check_choice("inference", inference, ("noisy", "unprotected"))
        self.inference_share = check_real("inference_share", inference_share, low=0.0,
                                          high=1.0, low_open=True, high_open=True)
        self.steps = None if steps is None else check_int("steps", steps, low=1)
        self.batch_size = None if batch_size is None else check_int("batch_size", batch_size,
                                                                    low=1)
        self.pretrain_epochs = check_int("pretrain_epochs", pretrain_epochs, low=0)
        self.clip_norm = check_positive("clip_norm", clip_norm)
        self.hidden = check_int("hidden", hidden, low=1)
        self.lr = check_positive("lr", lr)
        self.noise_in_training = bool(noise_in_training)
        self.generator = generator
        self.progress = progress
        self.secure_mode = bool(secure_mode)

    def _pretrain(self, model: EdgeNet, x: Tensor, y: Tensor, train: Tensor, classes: int,
                  gen: torch.Generator):
        """The encoder with its own linear head on the public features and labels: Adam,
        minibatches of 256 training nodes, ``pretrain_epochs`` epochs and at least
        `MIN_PRETRAIN_STEPS` steps. The model's head then starts as that head on the ``ē``
        block and zero on the others (step 0 is the MLP), and the encoder is frozen."""
        head = nn.Linear(self.hidden, classes)
        opt = torch.optim.Adam([*model.encoder.parameters(), *head.parameters()], lr=self.lr)
        size = min(256, int(train.numel()))
        per_epoch = -(-int(train.numel()) // size)
        steps = max(self.pretrain_epochs * per_epoch, MIN_PRETRAIN_STEPS) \
            if self.pretrain_epochs else 0
        order = torch.zeros(0, dtype=torch.long)
        for _ in range(steps):
            if order.numel() == 0:
                order = train[torch.randperm(train.numel(), generator=gen)]
            nodes, order = order[:size], order[size:]
            opt.zero_grad()
            F.cross_entropy(head(model.encode(x[nodes])), y[nodes]).backward()
            opt.step()
        with torch.no_grad():
            model.graph.head.weight.zero_()
            model.graph.head.weight[:, :self.hidden] = head.weight
            model.graph.head.bias.copy_(head.bias)
        for p in model.encoder.parameters():
            p.requires_grad_(False)

    def fit(self, data) -> EdgeDPTrainer:
        from gnnprivacy.random import as_torch_generator
        from gnnprivacy.training.nonprivate import num_classes_of, training_graph
        from gnnprivacy.training.private import EdgeSubgraphs, PrivateTraining

        gen = as_torch_generator(self.generator)
        seeds = torch.randint(0, 2**62, (2,), generator=gen).tolist()
        graph = training_graph(data)
        train = graph.train_mask.nonzero().flatten()
        self.num_classes_ = classes = num_classes_of(data)
        x = graph.x.float()
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(seeds[0]))
            self.model_ = model = EdgeNet(x.shape[1], self.hidden, classes, self.hops)
            self._pretrain(model, x, graph.y, train, classes,
                           torch.Generator().manual_seed(int(seeds[0])))
        with torch.no_grad():           # public: the encodings read no edge
            encoded = _with_features(graph, model.encode(x))
        part = model.graph              # the DP-SGD model: it reads the encodings and edges
        opt = torch.optim.Adam([p for p in part.parameters() if p.requires_grad], lr=self.lr)
        sampler = EdgeSubgraphs(hops=self.hops, max_out_degree=self.max_out_degree,
                                inference=self.inference,
                                inference_share=self.inference_share,
                                noise_in_training=self.noise_in_training
                                and self.inference == "noisy")
        pt = PrivateTraining(part, opt, encoded, sampler=sampler, epsilon=self.epsilon,
                             delta=self.delta, max_grad_norm=self.clip_norm, steps=self.steps,
                             batch_size=self.batch_size, secure_mode=self.secure_mode,
                             seed=None if self.secure_mode else int(seeds[1]))
        bar = self.progress("edge-dp", pt.steps_planned) if self.progress else None
        for batch in pt.loader:
            opt.zero_grad()
            out = part(batch.x, batch.edge_index)
            F.cross_entropy(out[batch.center], batch.y[batch.center]).backward()
            opt.step()
            if bar is not None:
                bar.update(1)
        pt.close()
        self.predictor_ = None
        if self.inference == "noisy":
            with torch.no_grad():
                full = _with_features(data, model.encode(data.x.float()))
            self.predictor_ = pt.release_predictor(full)
        self.epsilon_ = float(pt.epsilon)
        self.delta_ = float(pt.delta)
        self.steps_ = int(pt.steps)
        self.noise_multiplier_ = float(pt.noise_multiplier)
        self.ledger_ = pt.ledger
        privacy = pt.privacy
        privacy["steps"] = pt.steps
        privacy["free_parts"] = ("the encoder trained without noise on the public features "
                                 "and labels (no edge read)")
        self.privacy_info_ = privacy
        self.info_ = {"num_train": int(train.numel()), "steps_planned": pt.steps_planned}
        self.pt_ = pt
        return self

    def predict_logits(self, data) -> Tensor:
        """Logits of every node: from the released aggregates (``inference="noisy"``: the
        edges of ``data`` are not read) or from the model on ``data``'s graph."""
        if not hasattr(self, "model_"):
            raise RuntimeError("EdgeDPTrainer is not fitted; call fit(data) first")
        if self.predictor_ is not None:
            with torch.no_grad():
                return self.predictor_(self.model_.encode(data.x.float()))
        self.model_.eval()
        with torch.no_grad():
            return self.model_(data.x.float(), data.edge_index)

    def privacy_record(self) -> dict:
        return dict(self.privacy_info_)

    def __repr__(self) -> str:
        return (f"EdgeDPTrainer(epsilon={self.epsilon:g}, hops={self.hops}, "
                f"inference={self.inference!r})")
