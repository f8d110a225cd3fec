"""The one-layer GCN of DP-GNN (node-level DP via degree-bounded subgraphs).

Reference: *Node-Level Differentially Private Graph Neural Networks* (DP-GNN), eq. 2 and
App. E; spec 002 §3.3. Parameters ``Θ = (Θ_enc, Θ_agg, Θ_dec)``:

```
Enc(x) = φ(W_n … φ(W_1 x + b_1) … + b_n)            (n_enc affine layers, each then φ)
a_v    = (1/(d_v+1)) Σ_{u ∈ S_v} Enc(x_u)           (Â = (D+I)^{-1}(A+I), row v)
z_v    = a_v Θ_agg                                 (no bias by default)
logits = Dec(z_v)                                  (hidden layers with φ, last to Q)
```

Training uses only the sampled subgraph ``S_v = {v} ∪ (≤ K neighbours)``, given as a padded
``(B, K+1)`` index tensor (slot 0 = ``v``, ``-1`` = padding) with a mask; the loss term of
``v`` then depends on ``S_v`` only, which the privacy analysis needs. Only row-local
normalisations are allowed (``"inverse_degree"`` = mean over ``S_v``, or ``"sum"``):
symmetric normalisation would make row ``v`` depend on 2-hop degrees (spec 002 §8 A9).

With ``indexed_input=True`` (what the DP-GNN trainer uses) the first encoder layer is an
`IndexedLinear`: ``x[S_v] W_1ᵀ`` is computed as ``(x W_1ᵀ)[S_v]`` over distinct nodes,
so the ``(B, K+1, d)`` block of gathered features never exists (same function, same
parameters; its DP-engine rule lives in `gnnprivacy.training.dp.flat_rules`).

Evaluation (`OneLayerGCN.forward_full`) uses the whole graph with no degree limit:
``logits = Dec(Â_full Enc(X) Θ_agg)`` (inference setting 1; not covered by the guarantee).
"""

from __future__ import annotations

import weakref

import torch
from torch import Tensor, nn
from torch.nn import functional as F
from torch_geometric.utils import coalesce, remove_self_loops

from gnnprivacy._fixed_shapes import fixed_shapes
from gnnprivacy._validation import check_choice, check_int

__all__ = ["ACTIVATIONS", "IndexedLinear", "NORMALIZATIONS", "OneLayerGCN", "row_grams"]

ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU, "elu": nn.ELU}
NORMALIZATIONS = ("inverse_degree", "sum")


def row_grams(x: Tensor, nodes: Tensor, *, chunk_elements: int = 2**25) -> Tensor:
    """Gram matrices ``G_i[r, r'] = ⟨x_{n_ir}, x_{n_ir'}⟩`` of padded rows, shape ``(B, R, R)``.

    Computed in chunks of subgraphs so that at most ``chunk_elements`` gathered feature
    values exist at once (padding ids ``-1`` read row 0; callers mask them).
    """
    b, r = nodes.shape
    out = torch.empty(b, r, r, dtype=x.dtype, device=x.device)
    step = max(1, chunk_elements // max(1, r * x.shape[1]))
    for s in range(0, b, step):
        a = x[nodes[s:s + step].clamp_min(0)]
        torch.bmm(a, a.transpose(1, 2), out=out[s:s + step])
    return out


class IndexedLinear(nn.Linear):
    """``nn.Linear`` applied to the rows ``x[nodes]`` of a fixed feature matrix, without
    materialising the gathered ``(B, R, d)`` block (the first encoder layer of DP-GNN).

    ``forward(nodes, x)`` returns ``(B, R, out)`` = ``(x[nodes] Wᵀ + b)``, computed as
    ``(x[u] Wᵀ + b)`` over the distinct ids ``u`` (or all of ``x`` when the batch has more
    occurrences than ``x`` has rows), then gathered. Padding ids ``-1`` read row 0: the
    caller masks those slots. The DP engine's ghost rule for this layer
    (`gnnprivacy.training.dp.flat_rules`) needs the per-subgraph Gram matrices of the
    input rows; `cache_grams` precomputes them once for fixed subgraphs.
    """

    def forward(self, nodes: Tensor, x: Tensor) -> Tensor:  # type: ignore[override]
        self._features = weakref.ref(x)
        flat = nodes.clamp_min(0)
        if flat.numel() < x.shape[0]:
            if fixed_shapes(x.device):      # no unique ids (their count is read on the host)
                rows = x.index_select(0, flat.reshape(-1))
                return F.linear(rows, self.weight, self.bias).view(*flat.shape, -1)
            uniq, inv = torch.unique(flat, return_inverse=True)
            return F.linear(x[uniq], self.weight, self.bias)[inv]
        return F.linear(x, self.weight, self.bias)[flat]

    @property
    def features(self) -> Tensor:
        """The feature matrix of the last forward call."""
        x = self._features() if getattr(self, "_features", None) is not None else None
        if x is None:
            raise RuntimeError("IndexedLinear has no live feature matrix; run forward first")
        return x

    def cache_grams(self, x: Tensor, nodes: Tensor) -> None:
        """Precompute `row_grams` of the padded rows ``nodes`` (slot 0 distinct ids)."""
        first = nodes[:, 0]
        if first.unique().numel() != first.numel() or bool((first < 0).any()):
            raise ValueError("cache_grams needs distinct, non-padded slot-0 ids")
        row_of = torch.full((x.shape[0],), -1, dtype=torch.long, device=nodes.device)
        row_of[first] = torch.arange(first.numel(), device=nodes.device)
        self._gram_cache = (weakref.ref(x), nodes.clone(), row_of, row_grams(x, nodes))

    def input_grams(self, nodes: Tensor) -> Tensor:
        """``(B, R, R)`` Gram matrices of ``features[nodes]``, from the cache when it holds
        exactly these rows for this feature matrix, else computed."""
        x, cache = self.features, getattr(self, "_gram_cache", None)
        if cache is not None and cache[0]() is x and cache[1].shape[1] == nodes.shape[1]:
            rows = cache[2][nodes[:, 0].clamp_min(0)]
            if fixed_shapes(x.device):
                # checking the rows here would read the device on the host: the check is
                # recorded on the device and read once after the step loop
                # (check_gram_cache), which refuses the run if a step used a wrong Gram
                safe = rows.clamp_min(0)
                bad = (rows < 0).any() | (cache[1][safe] != nodes).any()
                self._cache_misses = bad if getattr(self, "_cache_misses", None) is None \
                    else self._cache_misses | bad
                return cache[3][safe].to(x.dtype)
            if bool((rows >= 0).all()) and torch.equal(cache[1][rows], nodes):
                return cache[3][rows].to(x.dtype)
        return row_grams(x, nodes)

    def check_gram_cache(self) -> None:
        """Raise if a step on a fixed-shape device used cached Gram matrices of other rows
        than its batch's (one host read; the run must then be discarded)."""
        misses, self._cache_misses = getattr(self, "_cache_misses", None), None
        if misses is not None and bool(misses):
            raise RuntimeError("IndexedLinear: a step's rows differed from the cached Gram "
                               "matrices' rows; its per-subgraph norms were wrong and the "
                               "run must be discarded")

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state.pop("_features", None)
        state.pop("_gram_cache", None)
        state.pop("_cache_misses", None)
        return state


def _mlp(dims: list[int], activation: str, last_activation: bool,
         indexed_input: bool = False) -> nn.Sequential:
    layers: list[nn.Module] = []
    for k, (d_in, d_out) in enumerate(zip(dims[:-1], dims[1:])):
        layers.append((IndexedLinear if indexed_input and k == 0 else nn.Linear)(d_in, d_out))
        if last_activation or k < len(dims) - 2:
            layers.append(ACTIVATIONS[activation]())
    return nn.Sequential(*layers)


class OneLayerGCN(nn.Module):
    """DP-GNN's one-layer GCN with MLP encoder and decoder.

    *Privacy*: a model, no mechanism: the loss of node ``v`` depends on its degree-bounded
    subgraph only (row-local normalisation), which `DPGNNTrainer`'s sensitivity bound needs.

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
        indexed_input: make the first encoder layer an `IndexedLinear`, which
            never materialises the ``(B, K+1, d)`` gathered features (same function, same
            parameters; much less memory and time for large ``d``). The DP engine then
            needs the rule registered by `gnnprivacy.training.dp.flat_rules`.

    Example:
        >>> import torch
        >>> from gnnprivacy.nn import OneLayerGCN
        >>> model = OneLayerGCN(8, 3, hidden_channels=16)
        >>> nodes = torch.tensor([[0, 1, 2], [3, 4, -1]])     # slot 0: the node; -1: padding
        >>> model(torch.randn(5, 8), nodes, nodes >= 0).shape
        torch.Size([2, 3])
    """

    def __init__(self, in_channels: int, num_classes: int, *, hidden_channels: int = 100,
                 encoder_layers: int = 1, decoder_layers: int = 1, activation: str = "tanh",
                 normalization: str = "inverse_degree", agg_bias: bool = False,
                 post_agg_activation: bool = False, indexed_input: bool = False):
        super().__init__()
        d = check_int("in_channels", in_channels, low=1)
        q = check_int("num_classes", num_classes, low=2)
        h = check_int("hidden_channels", hidden_channels, low=1)
        n_enc = check_int("encoder_layers", encoder_layers, low=1)
        n_dec = check_int("decoder_layers", decoder_layers, low=1)
        self.activation = check_choice("activation", activation, ACTIVATIONS)
        self.normalization = check_choice("normalization", normalization, NORMALIZATIONS)
        self.encoder = _mlp([d] + [h] * n_enc, activation, last_activation=True,
                            indexed_input=bool(indexed_input))
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
        if isinstance(self.encoder[0], IndexedLinear):
            h = self.encoder[0](torch.where(mask, nodes, -1), x)
            for layer in self.encoder[1:]:
                h = layer(h)                                          # (B, K+1, h)
        else:
            h = self.encoder(x[nodes.clamp_min(0)])                   # (B, K+1, h)
        weights = mask.to(h.dtype).unsqueeze(1)                        # (B, 1, K+1)
        aggregated = torch.bmm(weights, h).squeeze(1)  # masked sum, no (B, K+1, h) temporary
        if self.normalization == "inverse_degree":
            aggregated = aggregated / weights.sum(2).clamp_min(1.0)
        return self._head(aggregated)

    def forward_full(self, x: Tensor, edge_index: Tensor, *, chunk_size: int = 65536,
                     transform=None) -> Tensor:
        """Full-graph evaluation forward ``Dec(Â_full Enc(X) Θ_agg)``, no degree limit.

        ``edge_index`` columns ``(j, i)`` mean ``i`` aggregates ``j``; self-loops are dropped
        and duplicates merged (``A`` is 0/1), then ``Â = (D+I)^{-1}(A+I)``.

        Evaluated in chunks of ``chunk_size`` nodes: the encoder and the head see one chunk
        at a time (``transform``, e.g. feature preprocessing, is applied per chunk, so no
        full copy of ``x`` is made); only the ``(N, h)`` encodings live at once.
        """
        n = x.shape[0]
        ei, _ = remove_self_loops(edge_index)
        ei = coalesce(ei, num_nodes=n, sort_by_row=False)  # sorted by (target, source)
        h = None
        for s in range(0, n, chunk_size):
            part = x[s:s + chunk_size]
            part = part if transform is None else transform(part)
            for layer in self.encoder:
                part = (nn.Linear.forward(layer, part) if isinstance(layer, IndexedLinear)
                        else layer(part))
            if h is None:
                h = part.new_empty(n, part.shape[1])
            h[s:s + part.shape[0]] = part
        # A[i, j] = 1 for each edge j -> i; sparse product instead of gathering h[ei[0]]
        ones = torch.ones(ei.shape[1], dtype=h.dtype, device=h.device)
        adj = torch.sparse_coo_tensor(ei.flip(0), ones,
                                      (n, n), is_coalesced=True, check_invariants=False)
        aggregated = torch.sparse.mm(adj, h).add_(h)
        del h
        if self.normalization == "inverse_degree":
            deg = torch.bincount(ei[1], minlength=n).to(aggregated.dtype) + 1.0
            aggregated.div_(deg.unsqueeze(1))
        return torch.cat([self._head(aggregated[s:s + chunk_size])
                          for s in range(0, n, chunk_size)])

    def extra_repr(self) -> str:
        return f"activation={self.activation!r}, normalization={self.normalization!r}"
