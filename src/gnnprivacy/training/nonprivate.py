"""Non-private node classification: full-batch and neighbour-sampled mini-batch trainers.

Estimator-like (scikit-learn): ``__init__`` validates and stores hyperparameters, ``fit(data)``
trains a fresh encoder (so repeated fits are independent), learned state ends in ``_``.
Training minimises the cross-entropy on the training nodes with Adam (``lr``,
``weight_decay``), for at most ``epochs`` epochs, stopping early when the validation accuracy
has not improved for ``patience`` epochs and restoring the best weights.

Settings: transductive (default) trains on the whole graph with the loss on ``train_mask``.
When ``data.split.kind == "inductive"``, the model is trained (and early-stopped) on
``gnnprivacy.datasets.inductive_train_graph(data)`` -- the graph induced by the training and
validation nodes, which contains no test node and no edge touching one -- and
`predict` then runs on whatever graph it is given (normally the full graph).

Privacy: none. These trainers are the non-private baselines (epsilon = infinity); no unit or
neighbouring relation is protected and no privacy event is emitted.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor
from torch_geometric.data import Data

from gnnprivacy._estimator import EstimatorParams
from gnnprivacy._validation import check_choice, check_int, check_positive, check_real
from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.random import as_torch_generator
from gnnprivacy.nn.encoders import SPARSE_INPUT_ENCODERS, build_encoder, list_encoders
from gnnprivacy.nn.sparse import to_sparse_csr
from gnnprivacy.training.early_stopping import EarlyStopping
from gnnprivacy.training.metrics import accuracy, evaluate
from gnnprivacy.training.neighbor_loader import NeighborBatchLoader, parse_fanouts


def training_graph(data: Data) -> Data:
    """The graph a model may be trained on: ``data`` itself, or in the inductive setting
    (``data.split.kind == "inductive"``) the subgraph without test nodes."""
    if getattr(getattr(data, "split", None), "kind", None) == "inductive":
        from gnnprivacy.datasets import inductive_train_graph

        return inductive_train_graph(data)
    return data


def num_classes_of(data: Data) -> int:
    """``data.num_classes`` when set, else ``max(y) + 1``."""
    c = getattr(data, "num_classes", None)
    return int(c) if c is not None else int(data.y.max()) + 1


#: Largest fraction of non-zero features for which ``sparse_features=None`` picks sparse CSR.
SPARSE_DENSITY = 0.05

_EpochFn = Callable[[torch.optim.Optimizer], tuple[float, float]]


def _node_tensors(graph: Data, device: torch.device) -> Data:
    """A new Data holding only what training reads, on ``device`` (``graph`` is not modified)."""
    keys = ("x", "edge_index", "y", "train_mask", "val_mask")
    return Data(**{k: graph[k].to(device) for k in keys}, num_nodes=graph.num_nodes)


def l1_normalize_rows(x: Tensor) -> Tensor:
    """``x`` with every row divided by its L1 norm (all-zero rows unchanged); a new tensor."""
    return x / x.abs().sum(dim=1, keepdim=True).clamp(min=torch.finfo(x.dtype).tiny)


def gcn_adjacency(edge_index: Tensor, num_nodes: int, *, improved: bool = False,
                  add_self_loops: bool = True, dtype: torch.dtype = torch.float32) -> Tensor:
    """The GCN propagation matrix ``D^-1/2 (A + I) D^-1/2`` as a sparse CSR ``adj_t``.

    Row ``i`` holds the weights with which node ``i`` aggregates its in-neighbours (edges
    ``j -> i`` of ``edge_index``), so ``adj_t @ h`` is exactly what
    `torch_geometric.nn.GCNConv` computes from ``edge_index`` with ``normalize=True``
    (same `gcn_norm`, duplicate edges summed), but as one
    sparse matrix product instead of an ``(E, C)`` gather, multiply and scatter per layer.
    """
    from torch_geometric.nn.conv.gcn_conv import gcn_norm

    ei, w = gcn_norm(edge_index, None, num_nodes, improved, add_self_loops, dtype=dtype)
    coo = torch.sparse_coo_tensor(torch.stack([ei[1], ei[0]]), w, (num_nodes, num_nodes),
                                  check_invariants=False)
    return to_sparse_csr(coo.coalesce())


#: Largest extra memory (bytes) the buffered input dropout may hold; above it the encoder's
#: own ``F.dropout`` runs.
INPUT_DROPOUT_BUFFER_BYTES = 2**30


class _InputDropout:
    """Dropout on a fixed dense feature matrix with preallocated buffers.

    Only the non-zero entries draw a Bernoulli variable (a dropped zero is still zero), so the
    output has the distribution of ``F.dropout(x, p)`` at the cost of ``nnz(x)`` uniforms, and
    every epoch writes into the same buffers instead of allocating (and page-faulting) fresh
    ``x``-sized temporaries. Draws from the global RNG, as ``F.dropout`` does (``fit`` forks and
    seeds it). The returned tensor is overwritten by the next call.
    """

    def __init__(self, x: Tensor, p: float):
        flat = x.reshape(-1)
        self.p = p
        self.index = torch.nonzero(flat).squeeze(1)
        self.values = flat[self.index] / (1.0 - p)
        self.out = torch.zeros_like(x)
        self.uniform = torch.empty_like(self.values)
        self.keep = torch.empty(self.values.shape, dtype=torch.bool, device=x.device)
        self.kept = torch.empty_like(self.values)

    def __call__(self) -> Tensor:
        torch.rand(self.uniform.shape, out=self.uniform, device=self.uniform.device)
        torch.ge(self.uniform, self.p, out=self.keep)
        torch.mul(self.values, self.keep, out=self.kept)
        self.out.view(-1).index_copy_(0, self.index, self.kept)
        return self.out


class _FullGraphInputs:
    """What full-graph epochs feed the model, built once per fit (not once per epoch).

    For ``gcn`` the normalised adjacency is precomputed as a sparse CSR matrix and the
    GCNConv layers' per-forward normalisation is switched off while it is in use; dense input
    features get `_InputDropout` in place of the encoder's own input dropout. Both are
    the same model and the same distribution; every call restores the model on exit, so
    mini-batch steps and `FullBatchTrainer.predict` work on any graph.
    """

    def __init__(self, model: torch.nn.Module, graph: Data, *, full_graph_training: bool):
        from torch_geometric.nn import GCNConv

        self.model = model
        self.x, self.edges = graph.x, graph.edge_index
        convs = [m for m in model.modules() if isinstance(m, GCNConv)]
        flags = {(c.normalize, c.cached, c.improved, c.add_self_loops) for c in convs}
        self.convs = convs if model.name == "gcn" and len(flags) == 1 and \
            next(iter(flags))[:2] == (True, False) else []
        if self.convs:
            c = self.convs[0]
            self.edges = gcn_adjacency(graph.edge_index, graph.num_nodes, improved=c.improved,
                                       add_self_loops=c.add_self_loops, dtype=graph.x.dtype)
        p = float(model.input_dropout)
        use = full_graph_training and p > 0.0 and graph.x.layout == torch.strided
        if use:  # buffers of ~21 bytes per non-zero: beyond the cap keep F.dropout
            use = 21 * int(torch.count_nonzero(graph.x)) <= INPUT_DROPOUT_BUFFER_BYTES
        self.dropout = _InputDropout(graph.x, p) if use else None

    def __call__(self, *, training: bool, x: Tensor | None = None) -> Tensor:
        """The model's full-graph output (the model's own train/eval mode is left as set);
        ``x`` replaces the graph's features for this call (no input dropout then)."""
        dropout = self.dropout if training and x is None else None
        saved = self.model.input_dropout
        try:
            for conv in self.convs:
                conv.normalize = False
            if dropout is not None:
                self.model.input_dropout = 0.0
            feats = dropout() if dropout is not None else (self.x if x is None else x)
            return self.model(feats, self.edges)
        finally:
            for conv in self.convs:
                conv.normalize = True
            self.model.input_dropout = saved


class FullBatchTrainer(EstimatorParams):
    """Full-batch training of a GNN encoder (one gradient step per epoch on the whole graph).

    Args:
        encoder: encoder name (``gcn``, ``sage``, ``gin``, ``gat``, ``mlp``).
        hidden_channels: width of the hidden layers (see `gnnprivacy.nn.build_encoder`).
        num_layers: number of layers.
        activation: activation between layers.
        dropout: dropout probability.
        heads: attention heads (``gat`` only).
        lr: Adam learning rate.
        weight_decay: Adam L2 penalty.
        epochs: maximum number of epochs.
        patience: early-stopping patience in epochs (validation accuracy).
        normalize_features: divide every node's feature vector by its L1 norm (rows of zeros
            stay zero) before training and prediction, as Kipf & Welling do for the citation
            graphs (meant for non-negative bag-of-words features; a public per-node map).
        sparse_features: train on ``x`` as a sparse CSR tensor (same model, same distribution
            of input dropout; much faster on bag-of-words features). ``None`` (auto): when the
            encoder accepts it (``gcn``, ``gat``, ``mlp``) and at most
            ``SPARSE_DENSITY`` (5 %) of ``x`` is non-zero.
        generator: randomness of initialisation, dropout (and sampling): a ``torch.Generator``
            (advanced by each fit), an int seed (each fit restarts from it, so repeated fits are
            identical) or ``None`` (fresh OS entropy). The global RNG is forked during ``fit``
            and left unchanged.
        progress: optional ``progress(description, total)`` returning an object with
            ``update(n)`` (or ``None``); advanced once per epoch, and its ``close()`` (if
            it has one) called when early stopping ends training before ``epochs``.
        device: torch device.

    Attributes:
        model_: the trained `Encoder` (best weights, eval mode).
        history_: per-epoch lists ``epoch``, ``loss``, ``train_accuracy`` (in training mode,
            during the epoch), ``val_accuracy``, ``val_loss`` (eval mode, on the training graph;
            ``nan`` without validation nodes).
        best_epoch_, best_val_accuracy_, epochs_run_, num_classes_: as named.
        sparse_features_: whether training used a sparse CSR ``x``.

    Privacy: none (non-private baseline; no event emitted).

    Example:
        >>> from gnnprivacy.datasets import load_dataset
        >>> data = load_dataset("csbm", num_nodes=400, seed=0)     # a PyG Data with masks
        >>> from gnnprivacy.training import FullBatchTrainer
        >>> trainer = FullBatchTrainer("gcn", hidden_channels=16, epochs=20, generator=0).fit(data)
        >>> trainer.evaluate(data, "test_mask")["accuracy"] > 0.5
        True
    """

    kind = "full-batch"

    def __init__(self, encoder: str = "gcn", *, hidden_channels: int = 64, num_layers: int = 2,
                 activation: str = "relu", dropout: float = 0.5, heads: int = 8,
                 lr: float = 0.01, weight_decay: float = 5e-4, epochs: int = 200,
                 patience: int = 50, normalize_features: bool = False,
                 sparse_features: bool | None = None,
                 generator: torch.Generator | int | None = None,
                 progress: Callable[[str, int], object] | None = None, device: str = "cpu"):
        self.encoder = check_choice("encoder", encoder, list_encoders())
        self.encoder_kwargs = {"hidden_channels": hidden_channels, "num_layers": num_layers,
                               "activation": activation, "dropout": dropout, "heads": heads}
        # Validate the architecture now (a throwaway generator keeps the global RNG untouched).
        build_encoder(encoder, 1, 1, **self.encoder_kwargs, generator=torch.Generator())
        self.lr = check_positive("lr", lr)
        self.weight_decay = check_real("weight_decay", weight_decay, low=0.0)
        self.epochs = check_int("epochs", epochs, low=1)
        self.patience = check_int("patience", patience, low=1)
        if sparse_features not in (None, True, False):
            raise InvalidParameterError("sparse_features", "True, False or None (auto)",
                                        sparse_features)
        if sparse_features and encoder not in SPARSE_INPUT_ENCODERS:
            raise InvalidParameterError(
                "sparse_features", f"False or None for encoder {encoder!r} (sparse input: "
                f"{sorted(SPARSE_INPUT_ENCODERS)})", sparse_features)
        self.sparse_features = sparse_features
        if not isinstance(normalize_features, bool):
            raise InvalidParameterError("normalize_features", "a bool", normalize_features)
        self.normalize_features = normalize_features
        self.generator = generator
        self.progress = progress
        from gnnprivacy.training.device import resolve_device

        self.device = resolve_device(device)  # an unusable device: one-line error, now

    # -- fitting ---------------------------------------------------------------------------
    def fit(self, data: Data) -> FullBatchTrainer:
        """Train a fresh encoder on ``data`` (see the module docstring for the settings)."""
        gen = as_torch_generator(self.generator)
        seed = int(torch.randint(0, 2**62, (1,), generator=gen).item())
        cuda = [self.device.index or 0] if self.device.type == "cuda" else []
        with torch.random.fork_rng(devices=cuda):
            torch.manual_seed(seed)
            self._fit(data, gen)
        return self

    def _fit(self, data: Data, gen: torch.Generator) -> None:
        graph = _node_tensors(training_graph(data), self.device)
        if self.normalize_features:
            graph.x = l1_normalize_rows(graph.x)
        self.sparse_features_ = self._use_sparse(graph.x)
        if self.sparse_features_:
            graph.x = to_sparse_csr(graph.x)
        self.num_classes_ = num_classes_of(data)
        self.model_ = build_encoder(self.encoder, data.num_features, self.num_classes_,
                                    **self.encoder_kwargs).to(self.device)
        optimizer = torch.optim.Adam(self.model_.parameters(), lr=self.lr,
                                     weight_decay=self.weight_decay)
        stopper = EarlyStopping(self.patience)
        self.history_ = {k: [] for k in ("epoch", "loss", "train_accuracy", "val_accuracy",
                                         "val_loss")}
        inputs = _FullGraphInputs(self.model_, graph,
                                  full_graph_training=self.kind == "full-batch")
        self._train_epochs(graph, inputs, optimizer, stopper, gen)
        stopper.restore(self.model_)
        self.model_.eval()
        self.best_epoch_ = stopper.best_epoch
        self.best_val_accuracy_ = float(stopper.best_accuracy)
        self.epochs_run_ = len(self.history_["epoch"])

    def _train_epochs(self, graph: Data, inputs: _FullGraphInputs,
                      optimizer: torch.optim.Optimizer, stopper: EarlyStopping,
                      gen: torch.Generator) -> None:
        epoch_fn = self._epoch_fn(graph, inputs, gen)
        bar = self.progress(f"{self.kind} {self.encoder}", self.epochs) if self.progress else None
        has_val = bool(graph.val_mask.any())
        for epoch in range(self.epochs):
            self.model_.train()
            loss, train_acc = epoch_fn(optimizer)
            val_acc, val_loss = (self._validate(graph, inputs) if has_val
                                 else (float("nan"),) * 2)
            for key, value in zip(self.history_, (epoch, loss, train_acc, val_acc, val_loss)):
                self.history_[key].append(value)
            if bar is not None:
                bar.update(1)
            if stopper.step(epoch, self.model_, val_acc, val_loss):
                if bar is not None and epoch + 1 < self.epochs and hasattr(bar, "close"):
                    bar.close()                 # ends the bar (no stale ETA heartbeats)
                break

    def _use_sparse(self, x: Tensor) -> bool:
        if self.sparse_features is not None:
            return self.sparse_features
        if self.encoder not in SPARSE_INPUT_ENCODERS or x.numel() == 0:
            return False
        return float(torch.count_nonzero(x)) / x.numel() <= SPARSE_DENSITY

    def _epoch_fn(self, graph: Data, inputs: _FullGraphInputs,
                  gen: torch.Generator) -> _EpochFn:
        """One epoch: returns (mean training loss, training accuracy in training mode)."""
        mask, y = graph.train_mask, graph.y[graph.train_mask]

        def epoch(optimizer: torch.optim.Optimizer) -> tuple[float, float]:
            optimizer.zero_grad(set_to_none=False)
            out = inputs(training=True)[mask]
            loss = F.cross_entropy(out, y)
            loss.backward()
            optimizer.step()
            return float(loss.detach()), accuracy(out, y)

        return epoch

    @torch.no_grad()
    def _validate(self, graph: Data, inputs: _FullGraphInputs) -> tuple[float, float]:
        """(accuracy, loss) on the validation nodes, eval mode, full-graph forward."""
        self.model_.eval()
        out = inputs(training=False)[graph.val_mask]
        y = graph.y[graph.val_mask]
        return accuracy(out, y), float(F.cross_entropy(out, y))

    # -- inference -------------------------------------------------------------------------
    def _check_fitted(self) -> None:
        if not hasattr(self, "model_"):
            raise RuntimeError(f"{type(self).__name__} is not fitted; call fit(data) first")

    @torch.no_grad()
    def predict_logits(self, data: Data) -> Tensor:
        """Logits ``(N, C)`` for every node of ``data`` (full-graph forward, eval mode, on CPU)."""
        self._check_fitted()
        self.model_.eval()
        x = data.x.to(self.device)
        x = l1_normalize_rows(x) if self.normalize_features else x
        return self.model_(x, data.edge_index.to(self.device)).cpu()

    def query_fn(self, data: Data) -> Callable[[Tensor], Tensor]:
        """The trained model as an inference API on ``data``'s graph: ``x -> logits (N, C)``.

        Made for many queries on one graph with different features (LinkTeller asks once per
        target): GCN's propagation matrix is built once here instead of in every forward.
        ``x`` may be dense or sparse CSR (`query_features` gives the layout the model
        trained on; on sparse features such as Facebook's 22,470 x 4,714 a query is about 20x
        faster than a dense forward). Eval mode, no gradients; the output equals
        `predict_logits` on ``data`` with ``x`` as its features.
        """
        self._check_fitted()
        self.model_.eval()
        graph = Data(x=data.x[:1].to(self.device), edge_index=data.edge_index.to(self.device),
                     num_nodes=data.num_nodes)
        inputs = _FullGraphInputs(self.model_, graph, full_graph_training=False)

        @torch.no_grad()
        def query(x: Tensor) -> Tensor:
            x = x.to(self.device)
            if self.normalize_features:
                sparse = x.layout == torch.sparse_csr
                x = l1_normalize_rows(x.to_dense() if sparse else x)
                x = to_sparse_csr(x) if sparse else x
            return inputs(training=False, x=x).cpu()

        return query

    def query_features(self, data: Data) -> Tensor:
        """``data.x`` in the layout the model trained on (sparse CSR for sparse features)."""
        self._check_fitted()
        return to_sparse_csr(data.x) if self.sparse_features_ else data.x

    def predict(self, data: Data) -> Tensor:
        """Predicted class of every node of ``data``."""
        return self.predict_logits(data).argmax(dim=1)

    def evaluate(self, data: Data, mask: Tensor | str = "test_mask") -> dict[str, float]:
        """`gnnprivacy.training.metrics.evaluate` on ``mask`` (a tensor or attribute name)."""
        mask = data[mask] if isinstance(mask, str) else mask
        return evaluate(self.predict_logits(data), data.y, mask, num_classes=self.num_classes_)

    def __repr__(self) -> str:
        kw = ", ".join(f"{k}={v!r}" for k, v in self.encoder_kwargs.items())
        return (f"{type(self).__name__}(encoder={self.encoder!r}, {kw}, lr={self.lr}, "
                f"weight_decay={self.weight_decay}, epochs={self.epochs}, "
                f"patience={self.patience}{self._extra_repr()})")

    def _extra_repr(self) -> str:
        return ""


class MiniBatchTrainer(FullBatchTrainer):
    """Mini-batch training with uniform neighbour sampling (GraphSAGE-style).

    Each epoch shuffles the training nodes into batches of ``batch_size`` seeds, samples
    ``fanouts[h]`` in-neighbours per node at hop ``h`` (see
    `NeighborBatchLoader`), and takes one Adam step
    per batch on the seeds' loss. Validation and `predict` use full-graph forwards.

    Args:
        batch_size: seed nodes per batch.
        fanouts: neighbours per hop, ``"10,10"``, ``10`` or ``[10, 10]`` (one value is repeated
            for every layer; ``-1`` = all neighbours).
        **kwargs: as `FullBatchTrainer`.

    Privacy: none (non-private baseline; no event emitted).

    Example:
        >>> from gnnprivacy.datasets import load_dataset
        >>> data = load_dataset("csbm", num_nodes=400, seed=0)     # a PyG Data with masks
        >>> from gnnprivacy.training import MiniBatchTrainer
        >>> trainer = MiniBatchTrainer("sage", batch_size=64, fanouts="5,5", epochs=3, generator=0)
        >>> trainer.fit(data).epochs_run_
        3
    """

    kind = "mini-batch"

    def __init__(self, encoder: str = "gcn", *, batch_size: int = 512,
                 fanouts: str | int | Sequence[int] = "10,10", **kwargs):
        super().__init__(encoder, **kwargs)
        self.batch_size = check_int("batch_size", batch_size, low=1)
        self.fanouts = parse_fanouts(fanouts, self.encoder_kwargs["num_layers"])

    def _epoch_fn(self, graph: Data, inputs: _FullGraphInputs,
                  gen: torch.Generator) -> _EpochFn:
        loader = NeighborBatchLoader(_node_tensors(graph, torch.device("cpu")),
                                     graph.train_mask.cpu(), fanouts=self.fanouts,
                                     batch_size=self.batch_size, generator=gen)

        def epoch(optimizer: torch.optim.Optimizer) -> tuple[float, float]:
            total, correct, count = 0.0, 0, 0
            for batch in loader:
                batch = batch.to(self.device)
                optimizer.zero_grad()
                out = self.model_(batch.x, batch.edge_index)[: batch.batch_size]
                y = batch.y[: batch.batch_size]
                loss = F.cross_entropy(out, y)
                loss.backward()
                optimizer.step()
                total += float(loss.detach()) * batch.batch_size
                correct += int((out.detach().argmax(1) == y).sum())
                count += batch.batch_size
            return total / max(count, 1), correct / max(count, 1)

        return epoch

    def _extra_repr(self) -> str:
        return f", batch_size={self.batch_size}, fanouts={self.fanouts}"


__all__ = ["FullBatchTrainer", "MiniBatchTrainer", "gcn_adjacency", "l1_normalize_rows",
           "num_classes_of", "training_graph"]
