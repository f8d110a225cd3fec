"""``edge-dp``: edge-level DP node classification through `make_private(sampler="edges")`.

The built-in recipe of the user path (the same sampler, engine, accountant and release):

1. **Encoder, free**: under the edge unit the features and labels are public, so an MLP
   encoder ``e(x)`` is trained on the training nodes without noise, the epoch kept by the
   (public) validation labels, and then frozen (it reads no edge). ``encoding=
   "probabilities"`` (default): ``e`` is a classifier and the graph part aggregates its
   class probabilities ``ē = softmax(e(x))`` (few, informative coordinates: the noise of
   one release spreads over ``classes`` dimensions); ``"hidden"``: ``ē = e(x) / ‖e(x)‖``.
2. **Graph part, DP-SGD**: ``K`` sum-aggregation SAGE layers over ``ē`` and a head over
   ``[ē, h_1, ..., h_K]`` (the head starts as the encoder's classifier, the new blocks at
   zero, so step 0 is the MLP), trained by ``make_private(sampler="edges")`` (Poisson
   centres, per-subgraph clipping, `EdgeSubgraphDpEvent` per step).
3. **Predictions, in the same epsilon** (``inference="noisy"``): one release of each layer's
   noisy aggregate (`gnnprivacy.training.private.edge_inference`); the model is trained
   with the same message clip and aggregate noise (``noise_in_training``) so it reads them.
4. **Refit, free** (``refit=True``): the graph part is fitted again on the released
   aggregates with the public training labels and kept where the validation labels say it
   predicts better (`EdgePrivatePredictor.refit`): a post-processing of the release. With
   ``K = 1`` the release does not depend on the trained weights at all (a SAGE message is
   the source's ``ē``), so the release takes most of the budget (``inference_share`` 0.9).

*Privacy.* Unit edge, add/remove (an undirected edge is both entries). Epsilon covers the
DP-SGD steps and, with ``inference="noisy"``, every prediction on the fitted graph; the
record lists the public parts (features, labels, node set) under ``unaccounted``.
``inference="unprotected"`` trains the same way but predicts on the true graph (no refit:
it would read the edges without noise): its record says the predictions are outside the
epsilon.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from gnnprivacy._estimator import EstimatorParams
from gnnprivacy._validation import check_choice, check_int, check_positive, check_real
from gnnprivacy.training.metrics import accuracy
from gnnprivacy.training.node_dp.common import LogitsClassifier

__all__ = ["EdgeDPTrainer", "EdgeNet", "GraphPart"]

#: the free encoder's minibatch (training nodes)
PRETRAIN_BATCH = 1024
#: the free encoder trains for at least this many minibatch steps (small training sets)
MIN_PRETRAIN_STEPS = 200
#: with ``encoding="probabilities"`` the head starts as this multiple of the identity on
#: the encoder's class probabilities (step 0 predicts as the encoder does)
PROBABILITY_SCALE = 4.0


class GraphPart(nn.Module):
    """``head([h_0, h_1, .., h_K])`` with ``h_k = tanh(SAGE_k(h_{k-1}))`` (sum aggregation)
    over given node encodings ``h_0``: the part of `EdgeNet` that reads edges."""

    def __init__(self, hidden: int, classes: int, hops: int = 1, in_channels: int | None = None,
                 dropout: float = 0.0):
        super().__init__()
        self.dropout = float(dropout)
        from torch_geometric.nn import SAGEConv

        width = hidden if in_channels is None else in_channels
        self.convs = nn.ModuleList([SAGEConv(width if k == 0 else hidden, hidden, aggr="sum")
                                    for k in range(hops)])
        self.head = nn.Linear(width + hidden * hops, classes)

    def forward(self, h: Tensor, edge_index: Tensor) -> Tensor:
        blocks = [h]
        for conv in self.convs:
            h = torch.tanh(conv(h, edge_index))
            blocks.append(h)
        return self.head(F.dropout(torch.cat(blocks, dim=1), self.dropout, self.training))


class EdgeNet(nn.Module):
    """An MLP encoder that reads no edge and a `GraphPart` over its encodings ``ē``.

    ``encoding="probabilities"``: the encoder is a classifier and ``ē = softmax(e(x))``
    (``classes`` wide, norm at most 1); ``"hidden"``: ``ē = e(x) / ‖e(x)‖`` (``hidden``
    wide)."""

    def __init__(self, in_channels: int, hidden: int, classes: int, hops: int = 1,
                 encoding: str = "probabilities", dropout: float = 0.3):
        super().__init__()
        self.init_args = {"in_channels": in_channels, "hidden": hidden, "classes": classes,
                          "hops": hops, "encoding": encoding, "dropout": dropout}
        self.encoding = encoding
        out = classes if encoding == "probabilities" else hidden
        self.encoder = nn.Sequential(nn.Linear(in_channels, hidden), nn.SELU(),
                                     nn.Dropout(dropout), nn.Linear(hidden, out))
        self.graph = GraphPart(hidden, classes, hops, in_channels=out, dropout=dropout)

    def encode(self, x: Tensor) -> Tensor:
        e = self.encoder(x)
        return torch.softmax(e, dim=1) if self.encoding == "probabilities" \
            else F.normalize(e, dim=1)

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


def _nodes(data, mask_name: str) -> Tensor:
    """The indices of ``data``'s ``mask_name`` nodes (none when it has no such mask)."""
    mask = getattr(data, mask_name, None)
    return mask.nonzero().flatten() if mask is not None else torch.zeros(0, dtype=torch.long)


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
        pretrain_epochs: epochs of the (free) encoder (minibatches of `PRETRAIN_BATCH`).
        clip_norm: per-subgraph clip ``C``; hidden: width; lr: Adam.
        noise_in_training: train with the release's clip and noise (``inference="noisy"``).
        encoding: ``"probabilities"`` or ``"hidden"`` (what the graph part aggregates).
        refit, refit_epochs: fit the graph part again on the release (post-processing).
        generator: int seed or ``None``; secure_mode: OS CSPRNG noise.
    """

    name = "edge-dp"

    def __init__(self, *, epsilon: float = 8.0, delta: float | None = None, hops: int = 1,
                 max_out_degree: int | None = None, inference: str = "noisy",
                 inference_share: float = 0.9, steps: int | None = None,
                 batch_size: int | None = None, pretrain_epochs: int = 20,
                 clip_norm: float = 1.0, hidden: int = 64, lr: float = 0.01,
                 noise_in_training: bool = True, encoding: str = "probabilities",
                 refit: bool = True, refit_epochs: int = 200,
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
        self.encoding = check_choice("encoding", encoding, ("probabilities", "hidden"))
        self.refit = bool(refit)
        self.refit_epochs = check_int("refit_epochs", refit_epochs, low=1)
        self.generator = generator
        self.progress = progress
        self.secure_mode = bool(secure_mode)

    def _pretrain(self, model: EdgeNet, x: Tensor, y: Tensor, train: Tensor, val: Tensor,
                  classes: int, gen: torch.Generator):
        """The encoder on the public features and labels (``"hidden"``: with its own linear
        head): Adam with weight decay, dropout, minibatches of `PRETRAIN_BATCH` training nodes,
        ``pretrain_epochs`` epochs and at least `MIN_PRETRAIN_STEPS` steps, keeping the
        epoch with the best accuracy on the (public) validation labels. The model's head
        then starts as the encoder's classifier (step 0 is the MLP), and the encoder is
        frozen in eval mode."""
        probs = self.encoding == "probabilities"
        head = None if probs else nn.Linear(self.hidden, classes)

        def logits(rows: Tensor) -> Tensor:
            return model.encoder(x[rows]) if probs else head(model.encode(x[rows]))

        trained = [*model.encoder.parameters(), *([] if probs else head.parameters())]
        opt = torch.optim.Adam(trained, lr=self.lr, weight_decay=5e-4)
        size = min(PRETRAIN_BATCH, int(train.numel()))
        per_epoch = -(-int(train.numel()) // size)
        epochs = (max(self.pretrain_epochs, -(-MIN_PRETRAIN_STEPS // per_epoch))
                  if self.pretrain_epochs else 0)

        def val_accuracy() -> float:
            model.encoder.eval()
            with torch.no_grad():
                acc = accuracy(logits(val), y[val])
            model.encoder.train()
            return acc

        best, state = -1.0, None
        for _ in range(epochs):
            order = train[torch.randperm(train.numel(), generator=gen)]
            for nodes in order.split(size):
                opt.zero_grad()
                F.cross_entropy(logits(nodes), y[nodes]).backward()
                opt.step()
            if val.numel():
                acc = val_accuracy()
                if acc > best:
                    best, state = acc, [p.detach().clone() for p in trained]
        with torch.no_grad():
            if state is not None:
                for p, v in zip(trained, state):
                    p.copy_(v)
            width = classes if probs else self.hidden
            model.graph.head.weight.zero_()
            model.graph.head.weight[:, :width] = (PROBABILITY_SCALE * torch.eye(classes)
                                                  if probs else head.weight)
            model.graph.head.bias.copy_(torch.zeros(classes) if probs else head.bias)
        for p in model.encoder.parameters():
            p.requires_grad_(False)
        model.encoder.eval()
        self.encoder_val_accuracy_ = best if val.numel() else float("nan")

    def fit(self, data) -> EdgeDPTrainer:
        from gnnprivacy.random import as_torch_generator
        from gnnprivacy.training.nonprivate import num_classes_of, training_graph
        from gnnprivacy.training.private import EdgeSubgraphs, PrivateTraining

        gen = as_torch_generator(self.generator)
        seeds = torch.randint(0, 2**62, (3,), generator=gen).tolist()
        graph = training_graph(data)
        train, val = graph.train_mask.nonzero().flatten(), _nodes(graph, "val_mask")
        self.num_classes_ = classes = num_classes_of(data)
        x = graph.x.float()
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(seeds[0]))
            self.model_ = model = EdgeNet(x.shape[1], self.hidden, classes, self.hops,
                                          encoding=self.encoding)
            self._pretrain(model, x, graph.y, train, val, classes,
                           torch.Generator().manual_seed(int(seeds[0])))
        with torch.no_grad():           # public: the encodings read no edge
            encoded = _with_features(graph, model.encode(x))
        part = model.graph              # the DP-SGD model: it reads the encodings and edges
        # step 0 predicts as the encoder (public): a candidate of the refit's selection
        start = [p.detach().clone() for p in part.parameters() if p.requires_grad]
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
        self.predictor_ = self.refit_ = None
        if self.inference == "noisy":
            with torch.no_grad():
                full = _with_features(data, model.encode(data.x.float()))
            self.predictor_ = pt.release_predictor(full)
            if self.refit:
                self.refit_ = self._refit(data, full.x, int(seeds[2]), start)
        self.epsilon_ = float(pt.epsilon)
        self.delta_ = float(pt.delta)
        self.steps_ = int(pt.steps)
        self.noise_multiplier_ = float(pt.noise_multiplier)
        self.ledger_ = pt.ledger
        privacy = pt.privacy
        privacy["steps"] = pt.steps
        privacy["free_parts"] = ("the encoder trained without noise on the public features "
                                 "and labels (no edge read)")
        if self.predictor_ is not None and self.refit:
            privacy["free_parts"] += ("; the graph part refitted on the released aggregates "
                                      "with the public labels (post-processing)")
        self.privacy_info_ = privacy
        self.info_ = {"num_train": int(train.numel()), "steps_planned": pt.steps_planned,
                      "encoder_val_accuracy": self.encoder_val_accuracy_}
        if self.refit_ is not None:
            self.info_["refit"] = self.refit_
        self.pt_ = pt
        return self

    def _refit(self, data, encoded: Tensor, seed: int, start: list[Tensor]) -> dict:
        """Post-processing of the release: the graph part fitted on the released aggregates
        with the public labels of the training nodes, kept where the validation labels say
        it is better than the DP-SGD weights and than the weights of step 0 (``start``: the
        encoder's classifier, zero on the aggregates; `EdgePrivatePredictor.refit`)."""
        # its dropout draws from its own seed: the global stream's state after training
        # depends on the subgraphs' sizes, which read the edges
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            return self.predictor_.refit(encoded, data.y, _nodes(data, "train_mask"),
                                         _nodes(data, "val_mask"), epochs=self.refit_epochs,
                                         lr=self.lr, candidates={"encoder": start})

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
