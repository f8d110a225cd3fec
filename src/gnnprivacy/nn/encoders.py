"""Configurable GNN encoders (GCN, GraphSAGE, GIN, GAT) and an MLP baseline.

Each encoder is a thin wrapper around PyTorch Geometric's ready-made models
(`torch_geometric.nn.models.GCN`, ``GraphSAGE``, ``GIN``, ``GAT``, ``MLP``): ``num_layers``
message-passing layers of width ``hidden_channels`` with ``activation`` and ``dropout`` between
them, the last layer mapping to ``out_channels`` (logits). The wrapper adds dropout on the input
features, as the original papers do (Kipf & Welling, ICLR 2017; Velickovic et al., ICLR 2018),
a uniform ``forward(x, edge_index)`` for graph and feature-only models, seeded initialisation that
never touches the global RNG, and a one-line ``__repr__``.

References:
    GCN: Kipf & Welling, "Semi-Supervised Classification with Graph Convolutional Networks",
    ICLR 2017. GraphSAGE: Hamilton et al., NeurIPS 2017. GIN: Xu et al., "How Powerful are Graph
    Neural Networks?", ICLR 2019. GAT: Velickovic et al., ICLR 2018.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor
from torch_geometric.nn import models as pyg_models

from gnnprivacy._validation import check_int, check_probability
from gnnprivacy.errors import InvalidParameterError, UnknownNameError
from gnnprivacy.nn.activations import ACTIVATIONS
from gnnprivacy.nn.sparse import feature_dropout


#: Encoders whose first operation on ``x`` is a linear map, so ``x`` may be a sparse CSR tensor
#: (GraphSAGE and GIN aggregate raw features first and need a dense ``x``).
SPARSE_INPUT_ENCODERS = frozenset({"gcn", "gat", "mlp"})

_BUILDERS: dict[str, Callable[..., torch.nn.Module]] = {}


def register_encoder(name: str):
    """Decorator registering a builder ``fn(in, hidden, out, layers, act, dropout, heads)``."""

    def decorator(fn):
        if name in _BUILDERS:
            raise ValueError(f"encoder {name!r} is already registered")
        _BUILDERS[name] = fn
        return fn

    return decorator


def list_encoders() -> list[str]:
    """Names accepted by `build_encoder`, sorted."""
    return sorted(_BUILDERS)


@register_encoder("gcn")
def _gcn(in_channels, hidden, out, layers, act, dropout, heads):
    return pyg_models.GCN(in_channels, hidden, layers, out, dropout=dropout, act=act)


@register_encoder("sage")
def _sage(in_channels, hidden, out, layers, act, dropout, heads):
    return pyg_models.GraphSAGE(in_channels, hidden, layers, out, dropout=dropout, act=act)


@register_encoder("gin")
def _gin(in_channels, hidden, out, layers, act, dropout, heads):
    # `layers` GINConvs, each wrapping a 2-layer MLP [c_in, hidden, hidden] (GIN-0: epsilon = 0),
    # then a linear head hidden -> out (jk="last"), as in Xu et al. A final GINConv mapping to
    # the classes (PyG's default) squeezes its MLP through a ReLU of width `out`, which often
    # dies and leaves a constant predictor.
    return pyg_models.GIN(in_channels, hidden, layers, out, dropout=dropout, act=act, jk="last")


@register_encoder("gat")
def _gat(in_channels, hidden, out, layers, act, dropout, heads):
    # Hidden layers concatenate `heads` heads of hidden/heads channels; the last layer averages
    # `heads` heads of `out` channels. Attention coefficients use the same dropout.
    return pyg_models.GAT(in_channels, hidden, layers, out, dropout=dropout, act=act, heads=heads)


@register_encoder("mlp")
def _mlp(in_channels, hidden, out, layers, act, dropout, heads):
    return pyg_models.MLP(in_channels=in_channels, hidden_channels=hidden, out_channels=out,
                          num_layers=layers, dropout=dropout, act=act, norm=None)


class Encoder(torch.nn.Module):
    """A node encoder: input dropout, then a PyG model; ``forward(x, edge_index) -> logits``.

    Build it with `build_encoder`. The ``mlp`` encoder ignores ``edge_index``.

    Attributes:
        name: registry name (``gcn``, ``sage``, ``gin``, ``gat``, ``mlp``).
        model: the wrapped PyG model.
        input_dropout: dropout probability on the input features (training mode only).
        uses_graph: whether the output depends on ``edge_index``.
        accepts_sparse: whether ``x`` may be a sparse CSR tensor.
    """

    def __init__(self, name: str, model: torch.nn.Module, *, config: dict, input_dropout: float):
        super().__init__()
        self.name = name
        self.model = model
        self.config = dict(config)
        self.input_dropout = input_dropout
        self.uses_graph = name != "mlp"
        self.accepts_sparse = name in SPARSE_INPUT_ENCODERS

    @property
    def in_channels(self) -> int:
        return self.config["in_channels"]

    @property
    def out_channels(self) -> int:
        return self.config["out_channels"]

    def forward(self, x: Tensor, edge_index: Tensor | None = None) -> Tensor:
        """Logits of shape ``(num_nodes, out_channels)``.

        Args:
            x: node features ``(N, in_channels)``, dense or (for
                `SPARSE_INPUT_ENCODERS`) sparse CSR, much faster for sparse
                bag-of-words features.
            edge_index: ``(2, E)`` edges ``j -> i`` (``i`` aggregates ``j``); unused by ``mlp``.
        """
        if x.layout != torch.strided and not self.accepts_sparse:
            raise InvalidParameterError(
                "x", f"a dense tensor for encoder {self.name!r} (sparse input: "
                f"{sorted(SPARSE_INPUT_ENCODERS)})", f"a tensor with layout {x.layout}")
        x = feature_dropout(x, self.input_dropout, self.training)
        if not self.uses_graph:
            return self.model(x)
        if edge_index is None:
            raise InvalidParameterError("edge_index", f"an edge index for encoder {self.name!r}",
                                        None)
        return self.model(x, edge_index)

    def num_parameters(self) -> int:
        """Number of trainable scalars."""
        return sum(p.numel() for p in self.parameters() if p.requires_grad)

    def __repr__(self) -> str:
        items = ", ".join(f"{k}={v!r}" for k, v in self.config.items())
        return (f"Encoder(name={self.name!r}, {items}, input_dropout={self.input_dropout!r}, "
                f"parameters={self.num_parameters()})")


def _init_seed(generator: torch.Generator | None) -> int | None:
    if generator is None:
        return None
    return int(torch.randint(0, 2**62, (1,), generator=generator).item())


def build_encoder(name: str, in_channels: int, out_channels: int, *, hidden_channels: int = 64,
                  num_layers: int = 2, activation: str = "relu", dropout: float = 0.5,
                  heads: int = 8, input_dropout: float | None = None,
                  generator: torch.Generator | None = None) -> Encoder:
    """Build a registered encoder with freshly initialised weights.

    *Privacy*: a model, no mechanism (the non-private baselines and the local-DP methods'
    backbones use it).

    Architectures (``L = num_layers``, ``h = hidden_channels``, ``act`` between layers,
    dropout on the input and after every hidden layer):

    * ``gcn``: ``L`` GCNConv layers, ``H' = D^-1/2 (A + I) D^-1/2 H W`` (Kipf & Welling).
    * ``sage``: ``L`` SAGEConv layers, ``h_i' = W_1 h_i + W_2 mean_{j in N(i)} h_j``.
    * ``gin``: ``L`` GINConv layers ``h_i' = MLP(h_i + sum_{j in N(i)} h_j)`` (2-layer MLPs,
      GIN-0) of width ``h``, then a linear head ``h -> out_channels`` (Xu et al.).
    * ``gat``: ``L`` GATConv layers; hidden layers concatenate ``heads`` heads of
      ``h / heads`` channels, the last averages ``heads`` heads.
    * ``mlp``: ``L`` linear layers on the features only.

    Args:
        name: one of `list_encoders` (``gcn``, ``sage``, ``gin``, ``gat``, ``mlp``).
        in_channels: input feature dimension.
        out_channels: output dimension (number of classes for node classification).
        hidden_channels: width of the hidden layers (for ``gat``: total over the heads, so it
            must be divisible by ``heads`` when ``num_layers > 1``).
        num_layers: number of layers (>= 1; ``1`` is a single layer ``in -> out``).
        activation: one of `ACTIVATIONS`, applied after every layer but the last.
        dropout: dropout probability after every hidden layer (and on GAT attention weights).
        heads: attention heads of ``gat`` (ignored by the other encoders).
        input_dropout: dropout on the input features; default ``dropout`` (as in GCN and GAT).
        generator: seeds the initialisation. The global RNG is forked, seeded from
            ``generator`` and restored, so the caller's global state never changes. ``None``
            uses (and advances) the global RNG, like any ``torch.nn`` module.

    Returns:
        An `Encoder` in training mode.

    Raises:
        UnknownNameError: unknown ``name`` or ``activation`` (the message lists the choices).
        InvalidParameterError: a size, probability or head count out of range.

    Example:
        >>> import torch
        >>> from gnnprivacy.nn import build_encoder
        >>> model = build_encoder("gcn", 8, 3, hidden_channels=16, generator=torch.Generator().manual_seed(0))
        >>> model(torch.randn(5, 8), torch.tensor([[0, 1], [1, 0]])).shape
        torch.Size([5, 3])
    """
    if name not in _BUILDERS:
        raise UnknownNameError("encoder", name, _BUILDERS)
    if activation not in ACTIVATIONS:
        raise UnknownNameError("activation", activation, ACTIVATIONS)
    config = {
        "in_channels": check_int("in_channels", in_channels, low=1),
        "out_channels": check_int("out_channels", out_channels, low=1),
        "hidden_channels": check_int("hidden_channels", hidden_channels, low=1),
        "num_layers": check_int("num_layers", num_layers, low=1),
        "activation": activation,
        "dropout": check_probability("dropout", dropout, allow_one=False),
    }
    in_drop = dropout if input_dropout is None else input_dropout
    in_drop = check_probability("input_dropout", in_drop, allow_one=False)
    if name == "gat":
        config["heads"] = check_int("heads", heads, low=1)
        if num_layers > 1 and hidden_channels % heads:
            raise InvalidParameterError(
                "hidden_channels", f"a multiple of heads={heads} for the gat encoder",
                hidden_channels)
    seed = _init_seed(generator)
    with torch.random.fork_rng(devices=[], enabled=seed is not None):
        if seed is not None:
            torch.manual_seed(seed)
        model = _BUILDERS[name](config["in_channels"], config["hidden_channels"],
                                config["out_channels"], config["num_layers"], activation,
                                config["dropout"], heads)
    return Encoder(name, model, config=config, input_dropout=in_drop)


__all__ = ["ACTIVATIONS", "SPARSE_INPUT_ENCODERS", "Encoder", "build_encoder", "list_encoders",
           "register_encoder"]
