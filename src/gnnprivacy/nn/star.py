"""One-layer GNNs on star subgraphs, the models of HeterPoisson node-level DP training.

Reference: Z. Xiang, T. Wang, D. Wang, *Preserving Node-level Privacy in Graph Neural
Networks*, IEEE S&P 2024, App. A.1 and §5 (spec 000 §3.4).

A star subgraph is a centre ``u`` with peripheral nodes ``N_u`` (edges ``j → u``). With
``x`` the raw feature matrix, one message-passing layer and a linear classifier compute

* GCN:  ``h_u = φ( x_u / d_u + Σ_{j∈N_u} x_j / sqrt(d_u) )``, i.e.
  ``Σ_{j∈N_u∪{u}} x_j / sqrt(d_j d_u)`` with ``d_u = |N_u| + 1`` and ``d_j = 1`` (PyG's
  ``GCNConv`` on the star with self-loops, normalised by in-degree);
* GIN:  ``h_u = φ( Σ_{j∈N_u} x_j + (1 + λ) x_u )`` with a learnable scalar ``λ``;
* SAGE: ``h_u = φ( mean{ x_j : j ∈ N_u ∪ {u} } )``;

and ``logits_u = W_c h_u + b_c``. ``φ`` is an MLP with ELU activations (hidden width 128).
The aggregation acts on raw features *before* any parameter, so it costs one sparse
gather-sum per step and every trainable layer sees exactly one row per subgraph; this is
what lets the DP engine compute per-subgraph gradient norms cheaply (ghost clipping).

The removal of overlapping nodes (spec 000 §3.2 note (a)) happens in the sampler: a removed
peripheral is absent from ``periph_nodes``, so it changes neither the sum nor ``d_u``.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from gnnprivacy._validation import check_choice, check_int, check_real

__all__ = ["AGGREGATORS", "SelfScale", "StarGNN", "neighbor_sum", "star_aggregate"]

AGGREGATORS = ("gcn", "gin", "sage")


class SelfScale(nn.Module):
    """Elementwise learnable scale ``y = (offset + w) ⊙ x`` (GIN's ``(1 + λ) x_u``).

    Args:
        init: initial value of ``w`` (``λ``); GIN uses 0.
        offset: the constant added to ``w`` (1 for GIN).
        size: ``None`` for a scalar ``w``, else the size of a per-feature vector ``w``.
    """

    def __init__(self, init: float = 0.0, offset: float = 1.0, size: int | None = None):
        super().__init__()
        init = check_real("init", init)
        self.offset = check_real("offset", offset)
        shape = () if size is None else (check_int("size", size, low=1),)
        self.weight = nn.Parameter(torch.full(shape, init))

    def forward(self, x: Tensor) -> Tensor:
        return (self.offset + self.weight) * x

    def extra_repr(self) -> str:
        return f"offset={self.offset:g}, shape={tuple(self.weight.shape)}"


def _sparse_rows(x: Tensor, num: int, rows: Tensor, cols: Tensor, vals: Tensor) -> Tensor:
    """``A @ x`` for the ``(num, N)`` sparse matrix with entries ``A[rows, cols] = vals``.

    One sparse-dense product is several times faster than gathering ``(B, F)`` rows and
    adding them with ``index_add_``.
    """
    matrix = torch.sparse_coo_tensor(torch.stack([rows, cols]), vals, (num, x.shape[0]),
                                     check_invariants=False)
    return torch.sparse.mm(matrix, x)


def star_aggregate(x: Tensor, batch, aggregator: str) -> Tensor:
    """Parameter-free aggregation of the GCN or SAGE star layer, ``(B, F)``.

    Args:
        x: node features ``(N, F)``.
        batch: StarBatch-like object with ``centers`` ``(B,)``, ``periph_nodes`` ``(E_b,)``
            and ``periph_subgraph`` ``(E_b,)`` (index into ``centers``).
        aggregator: ``"gcn"`` or ``"sage"`` (GIN has a parameter; see `StarGNN`).
    """
    check_choice("aggregator", aggregator, ("gcn", "sage"))
    num, sub = batch.centers.numel(), batch.periph_subgraph
    mask = getattr(batch, "periph_mask", None)
    if mask is not None:
        return _padded_aggregate(x, batch, aggregator)
    deg = torch.bincount(sub, minlength=num).to(x.dtype) + 1.0
    if aggregator == "gcn":
        w_center, w_periph = 1.0 / deg, deg.rsqrt()[sub]
    else:
        w_center, w_periph = 1.0 / deg, (1.0 / deg)[sub]
    rows = torch.cat([torch.arange(num, device=x.device), sub])
    cols = torch.cat([batch.centers, batch.periph_nodes])
    return _sparse_rows(x, num, rows, cols, torch.cat([w_center, w_periph]))


def neighbor_sum(x: Tensor, batch) -> Tensor:
    """``Σ_{j∈N_u} x_j`` per star, ``(B, F)``."""
    sub = batch.periph_subgraph
    mask = getattr(batch, "periph_mask", None)
    if mask is not None:
        return _gather_rows(x, batch, None, mask.to(x.dtype))
    return _sparse_rows(x, batch.centers.numel(), sub, batch.periph_nodes,
                        torch.ones(sub.numel(), dtype=x.dtype, device=x.device))


def _gather_rows(x: Tensor, batch, w_center: Tensor | None, w_periph: Tensor) -> Tensor:
    """``w_center ⊙ x[centers] + Σ w_periph ⊙ x[periph]`` per star with gathers and one
    ``index_add_``: no size is read on the host (a sparse product coalesces on a GPU)."""
    if w_center is None:
        out = x.new_zeros(batch.centers.numel(), x.shape[1])
    else:
        out = x.index_select(0, batch.centers) * w_center.unsqueeze(1)
    rows = x.index_select(0, batch.periph_nodes) * w_periph.unsqueeze(1)
    return out.index_add_(0, batch.periph_subgraph, rows)


def _padded_aggregate(x: Tensor, batch, aggregator: str) -> Tensor:
    """`star_aggregate` of a `PaddedStarBatch`:
    padding peripherals get weight 0 and count in no degree."""
    weight = batch.periph_mask.to(x.dtype)
    sub = batch.periph_subgraph
    deg = torch.zeros(batch.centers.numel(), dtype=x.dtype, device=x.device).index_add_(
        0, sub, weight) + 1.0
    w_periph = (deg.rsqrt() if aggregator == "gcn" else 1.0 / deg)[sub] * weight
    return _gather_rows(x, batch, 1.0 / deg, w_periph)


class StarGNN(nn.Module):
    """HeterPoisson's one-layer GNN on star subgraphs (GCN, GIN or SAGE-mean).

    *Privacy*: a model, no mechanism: with ``HeterPoissonTrainer`` every trainable layer sees
    one row per star subgraph, which is what per-subgraph clipping needs.

    Args:
        in_channels: feature dimension ``F``.
        num_classes: number of classes ``C``.
        aggregator: ``"gcn"``, ``"gin"`` or ``"sage"``.
        hidden_channels: width of the update MLP ``φ`` (128 in the paper).
        update_layers: number of ``Linear + ELU`` layers in ``φ`` (1 gives ``F-128-C``).
        gin_init: initial ``λ`` of the GIN self weight.

    Forward: ``model(x, batch) -> logits (B, C)``, one row per star (its centre).

    Example:
        >>> import torch
        >>> from gnnprivacy.nn import StarGNN
        >>> from gnnprivacy.sampling import StarBatch
        >>> model = StarGNN(8, 3, aggregator="gcn", hidden_channels=16)
        >>> batch = StarBatch(centers=torch.tensor([0, 5]), periph_nodes=torch.tensor([1, 2, 6]),
        ...                    periph_subgraph=torch.tensor([0, 0, 1]), num_subgraphs=2)
        >>> model(torch.randn(10, 8), batch).shape      # one row of logits per star
        torch.Size([2, 3])
    """

    def __init__(self, in_channels: int, num_classes: int, *, aggregator: str = "gcn",
                 hidden_channels: int = 128, update_layers: int = 1, gin_init: float = 0.0):
        super().__init__()
        self.aggregator = check_choice("aggregator", aggregator, AGGREGATORS)
        in_channels = check_int("in_channels", in_channels, low=1)
        num_classes = check_int("num_classes", num_classes, low=2)
        hidden = check_int("hidden_channels", hidden_channels, low=1)
        layers = check_int("update_layers", update_layers, low=1)
        self.self_scale = SelfScale(gin_init) if aggregator == "gin" else None
        dims = [in_channels] + [hidden] * layers
        mlp: list[nn.Module] = []
        for d_in, d_out in zip(dims[:-1], dims[1:]):
            mlp += [nn.Linear(d_in, d_out), nn.ELU()]
        self.update = nn.Sequential(*mlp)
        self.classifier = nn.Linear(hidden, num_classes)

    def aggregate(self, x: Tensor, batch) -> Tensor:
        """The message-passing input of ``φ``, ``(B, F)``."""
        if self.self_scale is None:
            return star_aggregate(x, batch, self.aggregator)
        return neighbor_sum(x, batch) + self.self_scale(x[batch.centers])

    def forward(self, x: Tensor, batch) -> Tensor:
        return self.classifier(self.update(self.aggregate(x, batch)))

    def extra_repr(self) -> str:
        return f"aggregator={self.aggregator!r}"
