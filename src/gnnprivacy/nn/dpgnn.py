"""The one-layer GCN of DP-GNN (node-level DP via degree-bounded subgraphs).

Reference: *Node-Level Differentially Private Graph Neural Networks* (DP-GNN), eq. 2 and
App. E; spec 002 §3.3. Parameters ``Θ = (Θ_enc, Θ_agg, Θ_dec)``::

    Enc(x) = φ(W_n … φ(W_1 x + b_1) … + b_n)            (n_enc affine layers, each then φ)
    a_v    = (1/(d_v+1)) Σ_{u ∈ S_v} Enc(x_u)           (Â = (D+I)^{-1}(A+I), row v)
    z_v    = a_v Θ_agg                                 (no bias by default)
    logits = Dec(z_v)                                  (hidden layers with φ, last to Q)

Training uses only the sampled subgraph ``S_v = {v} ∪ (≤ K neighbours)``, given as a padded
``(B, K+1)`` index tensor (slot 0 = ``v``, ``-1`` = padding) with a mask; the loss term of
``v`` then depends on ``S_v`` only, which the privacy analysis needs. Only row-local
normalisations are allowed (``"inverse_degree"`` = mean over ``S_v``, or ``"sum"``):
symmetric normalisation would make row ``v`` depend on 2-hop degrees (spec 002 §8 A9).

Evaluation (:meth:`OneLayerGCN.forward_full`) uses the whole graph with no degree limit:
``logits = Dec(Â_full Enc(X) Θ_agg)`` (inference setting 1; not covered by the guarantee).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch_geometric.utils import coalesce, remove_self_loops

from gnnprivacy._validation import check_choice, check_int

__all__ = ["ACTIVATIONS", "NORMALIZATIONS", "OneLayerGCN"]

ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU, "elu": nn.ELU}
NORMALIZATIONS = ("inverse_degree", "sum")


def _mlp(dims: list[int], activation: str, last_activation: bool) -> nn.Sequential:
    layers: list[nn.Module] = []
    for k, (d_in, d_out) in enumerate(zip(dims[:-1], dims[1:])):
        layers.append(nn.Linear(d_in, d_out))
        if last_activation or k < len(dims) - 2:
            layers.append(ACTIVATIONS[activation]())
    return nn.Sequential(*layers)


class OneLayerGCN(nn.Module):
    """DP-GNN's one-layer GCN with MLP encoder and decoder.

    Args:
        in_channels: feature dimension ``d``.
        num_classes: ``Q``.
        hidden_channels: width ``h`` (100 by default, spec 002 §3.0).
        encoder_layers: ``n_enc`` affine layers, each followed by ``φ``.
        decoder_layers: ``n_dec`` affine layers (the last gives logits, no activation).
        activation: ``φ``: ``"tanh"`` (default), ``"relu"`` or ``"elu"``.
        normalization: ``"inverse_degree"`` (mean over ``S_v``) or ``"sum"``.
        agg_bias: give ``Θ_agg`` a bias.
        post_agg_activation: apply ``φ`` after ``Θ_agg`` (REF-CODE variant).
    """

    def __init__(self, in_channels: int, num_classes: int, *, hidden_channels: int = 100,
                 encoder_layers: int = 1, decoder_layers: int = 1, activation: str = "tanh",
                 normalization: str = "inverse_degree", agg_bias: bool = False,
                 post_agg_activation: bool = False):
        super().__init__()
        d = check_int("in_channels", in_channels, low=1)
        q = check_int("num_classes", num_classes, low=2)
        h = check_int("hidden_channels", hidden_channels, low=1)
        n_enc = check_int("encoder_layers", encoder_layers, low=1)
        n_dec = check_int("decoder_layers", decoder_layers, low=1)
        self.activation = check_choice("activation", activation, ACTIVATIONS)
        self.normalization = check_choice("normalization", normalization, NORMALIZATIONS)
        self.encoder = _mlp([d] + [h] * n_enc, activation, last_activation=True)
        self.agg = nn.Linear(h, h, bias=bool(agg_bias))
        self.post_act = ACTIVATIONS[activation]() if post_agg_activation else nn.Identity()
        self.decoder = _mlp([h] * n_dec + [q], activation, last_activation=False)

    def _head(self, aggregated: Tensor) -> Tensor:
        return self.decoder(self.post_act(self.agg(aggregated)))

    def forward(self, x: Tensor, nodes: Tensor, mask: Tensor | None = None) -> Tensor:
        """Training forward on padded subgraphs.

        Args:
            x: node features ``(N, d)``.
            nodes: ``(B, K+1)`` node ids, slot 0 the training node, ``-1`` padding.
            mask: ``(B, K+1)`` bool mask of real slots (default ``nodes >= 0``).

        Returns:
            logits ``(B, Q)`` of the training nodes.
        """
        mask = nodes >= 0 if mask is None else mask
        h = self.encoder(x[nodes.clamp_min(0)])                       # (B, K+1, h)
        weights = mask.to(h.dtype).unsqueeze(-1)
        aggregated = (h * weights).sum(1)
        if self.normalization == "inverse_degree":
            aggregated = aggregated / weights.sum(1).clamp_min(1.0)
        return self._head(aggregated)

    def forward_full(self, x: Tensor, edge_index: Tensor) -> Tensor:
        """Full-graph evaluation forward ``Dec(Â_full Enc(X) Θ_agg)``, no degree limit.

        ``edge_index`` columns ``(j, i)`` mean ``i`` aggregates ``j``; self-loops are dropped
        and duplicates merged (``A`` is 0/1), then ``Â = (D+I)^{-1}(A+I)``.
        """
        n = x.shape[0]
        ei, _ = remove_self_loops(edge_index)
        ei = coalesce(ei, num_nodes=n)
        h = self.encoder(x)
        aggregated = h.clone().index_add_(0, ei[1], h[ei[0]])
        if self.normalization == "inverse_degree":
            deg = torch.bincount(ei[1], minlength=n).to(h.dtype) + 1.0
            aggregated = aggregated / deg.unsqueeze(1)
        return self._head(aggregated)

    def extra_repr(self) -> str:
        return f"activation={self.activation!r}, normalization={self.normalization!r}"
