"""Per-subgraph gradient rules: one rule per module type, for every layout the engine sees.

The rows of many subgraphs are stacked (``seg[r]`` the subgraph of row ``r``, a
`Segments`): PyG batches of `gnnprivacy.make_private` (node, edge or pooled rows) and the
padded batches of the built-in trainers (``W`` consecutive rows per subgraph). Each rule
receives, for one module, every call of it in a forward pass (its inputs, the gradient ``δ``
of the summed per-subgraph losses with respect to its output, and the `Segments` of its
output rows) and returns, for each of the module's *own* trainable parameters, a
`Contribution`: the squared norm of every subgraph's gradient and the clip-weighted sum
``Σ_i c_i g_i`` for given factors ``c``.

Rules (a subgraph's gradient is the sum over its rows):

* ``nn.Linear`` and PyG ``Linear``: ``g_i(W) = Σ_{r∈i} δ_r a_rᵀ``; ghost norms (Gram form for
  small subgraphs, materialised in bounded pieces for large ones) and the clipped sum as the
  one product a non-private backward does, ``(c_seg ⊙ Δ)ᵀ A`` (book-keeping); or, when the
  cost model of `.segments` says so, the per-subgraph gradients kept and ``c @ G``;
* `IndexedLinear` (DP-GNN's first layer, ``x[S_v] Wᵀ``): Gram norms from the cached input
  Grams, the clipped sum by one scatter and one product over the distinct nodes;
* ``nn.LayerNorm`` and PyG ``LayerNorm(mode="node")``: ``g_i(w) = Σ_r δ_r ⊙ x̂_r``,
  ``g_i(b) = Σ_r δ_r`` with ``x̂`` the normalised input (recomputed);
* `SelfScale` (``(offset + w) ⊙ x``, HeterPoisson's GIN): ``g_i(w) = Σ_r δ_r ⊙ x_r``;
* ``nn.Embedding``: ``g_i(W) = Σ_r e_{idx_r} δ_rᵀ``; norms from the per-(subgraph, index)
  sums;
* a bias added to a module's output (``GCNConv.bias``): ``g_i(b) = Σ_r δ_r``;
* ``GINConv``/``GINEConv``'s trained ``eps`` (``h = aggr + (1 + ε) x``, then ``nn(h)``):
  ``g_i(ε) = Σ_{r∈i} ⟨∂L/∂h_r, x_r⟩``, with ``∂L/∂h`` caught by a probe on ``nn``'s input;
* ``GATConv``'s attention vectors: with ``γ_e = ∂L/∂(logit of edge e)`` caught by a probe
  on the edge update, ``g_i(a_src) = Σ_{n∈i} (Σ_{e: src(e)=n} γ_e) x'_n`` (per head),
  ``a_dst`` likewise by target, ``g_i(a_edge) = Σ_{e∈i} γ_e lin_edge(attr_e)``: every edge
  lies inside one subgraph, so its term belongs to that subgraph;
* anything else with trainable parameters of its own: `exact_fallback`, per-subgraph
  vector-Jacobian products of the module alone (``torch.func.vjp`` under ``vmap``), for
  `gnnprivacy.make_private`; `DPEngine`'s `check_model` refuses such modules instead.

The rules see only the module's own parameters: the parameters of a child module are the
child's business (``GCNConv.lin`` is a ``Linear``, ``SAGEConv.lin_l`` too), which is what
makes them compose for models of any depth. Every rule is linear in ``δ``.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from gnnprivacy.errors import GnnPrivacyError
from gnnprivacy.nn.dpgnn import IndexedLinear
from gnnprivacy.nn.star import SelfScale
from gnnprivacy.training.dp.segments import (LazyColumns, LazyRow, Segments, keep_materialised,
                                             linear_weight_grads, linear_weight_norms,
                                             segment_sum)

__all__ = ["Call", "Contribution", "FlatRule", "Probe", "UnsupportedModuleError",
           "exact_fallback", "flat_probe_for", "flat_rule_for", "register_flat_rule",
           "register_rule", "supported_module_types"]

#: what `gnnprivacy.make_private` trains, as the "Supported modules" table of
#: docs/own-model.md lists it (the modules a user writes, not the library's internal ones)
MAKE_PRIVATE_SUPPORTED = (
    "torch nn.Linear, nn.LayerNorm, nn.Embedding, PyG Linear, GCNConv, SAGEConv, GraphConv, "
    "GINConv, GINEConv, GATConv, LayerNorm(mode='node'), GraphNorm/InstanceNorm with "
    "batch=batch.batch, and any other module that maps one tensor to one tensor through the "
    "exact fallback (the 'Supported modules' table of docs/own-model.md)")


def _engine_supported() -> str:
    """What `DPEngine`'s `check_model` trains: the modules with rules (the library's own
    internal ones not named)."""
    own = sorted({t.__name__ for t in _RULES if not t.__module__.startswith(
        ("gnnprivacy.", "torch_geometric.")) and t not in (nn.Linear, nn.LayerNorm,
                                                           nn.Embedding)})
    return ("torch nn.Linear, nn.LayerNorm, nn.Embedding" + "".join(f", {n}" for n in own)
            + " and modules given a rule with gnnprivacy.training.dp.register_rule; "
            "gnnprivacy.make_private trains PyG models (" + MAKE_PRIVATE_SUPPORTED + ")")


class UnsupportedModuleError(GnnPrivacyError, ValueError):
    """A trainable module has no per-subgraph gradient rule (so it cannot be clipped).

    The message names the module path and type, why it is refused (with what to use instead
    where there is a replacement) and the documented modules that are supported.
    """

    def __init__(self, path: str, module: nn.Module, reason: str | None = None, *,
                 supported: str | None = None):
        self.path = path
        self.module_type = type(module).__name__
        why = reason or "it has trainable parameters but no per-subgraph gradient rule"
        super().__init__(
            f"module {path or '<root>'!r} of type {self.module_type} is not supported by the "
            f"DP engine: {why}; supported: {supported or _engine_supported()}"
        )


@dataclass
class Call:
    """One call of a module in a recorded forward pass.

    Attributes:
        args, kwargs: the inputs (tensors detached).
        grad: ``δ``, the gradient of the summed per-subgraph losses w.r.t. the output.
        segs: the `Segments` of the output's leading dimension.
    """

    args: tuple
    kwargs: dict
    grad: Tensor
    segs: Segments
    cache: dict = field(default_factory=dict)
    #: what the rule's probe kept during this call (values, and the gradients of watched
    #: tensors, scaled like ``grad``)
    extra: dict = field(default_factory=dict)

    @property
    def seg(self) -> Tensor:
        """``(R,)`` subgraph of each output row."""
        return self.segs.seg

    @property
    def num_segments(self) -> int:
        return self.segs.num


class Contribution:
    """Per-subgraph gradient facts for one parameter.

    Attributes:
        norm_sq: ``(B,)`` squared norm of every subgraph's gradient (computed on first read
            from ``per_segment`` when the rule gives ``None``).
        weighted: ``c -> Σ_i c_i g_i`` for clip factors ``c`` of shape ``(B,)``.
        per_segment: ``(B, numel)`` the per-subgraph gradients themselves when the rule
            materialised them (then the clipping path clips all such parameters with one
            norm and one product), else ``None``.
    """

    __slots__ = ("_norm_sq", "weighted", "_per_segment")

    def __init__(self, norm_sq: Tensor | LazyRow | None,
                 weighted: Callable[[Tensor], Tensor] | None,
                 per_segment: Tensor | LazyColumns | None = None):
        if norm_sq is None and per_segment is None:
            raise ValueError("Contribution needs norm_sq or per_segment")
        self._norm_sq, self.weighted, self._per_segment = norm_sq, weighted, per_segment

    @property
    def materialised(self) -> bool:
        return self._per_segment is not None

    @property
    def per_segment(self) -> Tensor | None:
        found = self._per_segment
        return found.resolve() if isinstance(found, LazyColumns) else found

    @property
    def columns(self) -> LazyColumns | None:
        """The per-subgraph gradients as columns of a batch of sums, when they are."""
        found = self._per_segment
        return found if isinstance(found, LazyColumns) else None

    @property
    def lazy_norm(self) -> LazyRow | None:
        """The norms as a row of a Gram batch not yet read, when they are."""
        found = self._norm_sq
        return found if isinstance(found, LazyRow) else None

    @property
    def norm_sq(self) -> Tensor:
        found = self._norm_sq
        if found is None:
            found = self._norm_sq = self.per_segment.square().sum(1)
        elif isinstance(found, LazyRow):
            found = self._norm_sq = found.resolve()
        return found

    def __repr__(self) -> str:
        return (f"Contribution(subgraphs={self.norm_sq.shape[0]}, materialised="
                f"{self.materialised})")


#: a rule returns ``None`` when it cannot handle the calls (then the exact fallback runs)
FlatRule = Callable[[nn.Module, list[Call]], "dict[nn.Parameter, Contribution] | None"]


class Probe:
    """What a rule's probe may do inside a call of its module (implemented by the capture):

    * ``keep(module, key, value)``: store ``value`` (detached) in the call's ``extra``;
    * ``watch(module, key, tensor) -> tensor``: use the returned tensor in place of
      ``tensor``; the gradient of the loss with respect to it lands in ``extra[key]``.

    Both do nothing outside a recorded call of ``module``."""

    def keep(self, module: nn.Module, key: str, value) -> None:  # pragma: no cover
        raise NotImplementedError

    def watch(self, module: nn.Module, key: str, tensor: Tensor) -> Tensor:  # pragma: no cover
        raise NotImplementedError


#: ``(module, probe) -> hook handles``: registers the hooks a rule needs inside the module
ProbeFn = Callable[[nn.Module, Probe], list]
_RULES: dict[type, FlatRule] = {}
_PROBES: dict[type, ProbeFn] = {}


def register_flat_rule(module_type: type, rule: FlatRule, *, probe: ProbeFn | None = None
                       ) -> None:
    """Register ``rule`` for exactly ``module_type`` (subclasses are not covered: a subclass
    may change ``forward``, and a wrong rule would silently break the clipping bound);
    ``probe`` registers hooks inside the module that keep what the rule needs."""
    if not (isinstance(module_type, type) and issubclass(module_type, nn.Module)):
        raise TypeError(f"module_type must be an nn.Module subclass; got {module_type!r}")
    _RULES[module_type] = rule
    if probe is None:
        _PROBES.pop(module_type, None)
    else:
        _PROBES[module_type] = probe


#: the public name: one registry serves `DPEngine` and `gnnprivacy.make_private`
register_rule = register_flat_rule


def flat_probe_for(module: nn.Module) -> ProbeFn | None:
    """The probe registered with ``type(module)``'s rule, or ``None``."""
    return _PROBES.get(type(module))


def flat_rule_for(module: nn.Module) -> FlatRule | None:
    """The rule for ``type(module)`` (exact type), or ``None`` (then the exact fallback)."""
    rule = _RULES.get(type(module))
    if rule is _layer_norm_rule and getattr(module, "mode", "node") != "node":
        return None
    return rule


def supported_module_types() -> tuple[type, ...]:
    """Module types with a rule."""
    return tuple(_RULES)


def _materialised(per_seg: Tensor | LazyColumns, shape: torch.Size) -> Contribution:
    """A contribution from per-subgraph gradients ``(B, P)`` (or a batch's columns)."""
    def weighted(c: Tensor) -> Tensor:
        g = per_seg.resolve() if isinstance(per_seg, LazyColumns) else per_seg
        return (c.to(g.dtype) @ g).reshape(shape)

    return Contribution(None, weighted, per_seg)


#: from this many rows per subgraph on average, parameters with per-row gradients keep their
#: per-subgraph sums (``B x n``, few and large subgraphs) instead of the Gram form
SUMMED_ROWS = 4


def _summed(segs: Segments, rows: Tensor, shape: torch.Size) -> Contribution:
    """The contribution of a parameter whose per-subgraph gradients are the sums of
    ``rows`` (``(R, P)``, per-row gradients): in the padded layout or for large subgraphs
    materialised with the other such parameters (one sum), else ghost norms from the batch
    of these rows' Gram terms and the clipped sum ``c_rows @ rows``."""
    if segs.per_row or segs.width is not None or segs.rows >= SUMMED_ROWS * segs.num:
        # padded rows, or large subgraphs (whole graphs): per-subgraph sums, one scatter for
        # every such parameter on these rows
        return _materialised(segs.columns(rows.dtype).add(rows), shape)
    batch = segs.gram(rows.dtype)
    norms, block = batch.add_rows(rows.reshape(rows.shape[0], -1))
    return Contribution(norms, lambda c: batch.weighted(block, c).reshape(shape))


def _rows(calls: list[Call], arg: Callable[[Call], Tensor]) -> tuple[Tensor, Tensor, Segments]:
    """``(inputs, output grads, segments)`` of all calls, rows concatenated; inputs of shape
    ``(R, k..., q)`` become ``k...`` rows per output row (weights shared across them)."""
    a_parts, d_parts, s_parts = [], [], []
    for call in calls:
        a, d = arg(call), call.grad
        per_row = 1
        for size in a.shape[1:-1]:
            per_row *= size
        a_parts.append(a.reshape(-1, a.shape[-1]))
        d_parts.append(d.reshape(-1, d.shape[-1]))
        s_parts.append(call.segs.repeat(per_row))
    if len(calls) == 1:
        return a_parts[0], d_parts[0], s_parts[0]
    return (torch.cat(a_parts), torch.cat(d_parts),
            Segments(torch.cat([s.seg for s in s_parts]), calls[0].num_segments))


# ------------------------------------------------------------------------------ Linear
def _linear_rule(layer: nn.Module, calls: list[Call]) -> dict[nn.Parameter, Contribution]:
    a, d, segs = _rows(calls, lambda c: c.args[0])
    a = a if a.dtype == d.dtype else a.to(d.dtype)
    out: dict[nn.Parameter, Contribution] = {}
    bias = getattr(layer, "bias", None)
    with_bias = bias is not None and bias.requires_grad
    if layer.weight.requires_grad:
        p, q = d.shape[1], a.shape[1]
        if segs.per_row:                 # small batch: per-row outer products, summed
            out[layer.weight] = _summed(segs, (d.unsqueeze(2) * a.unsqueeze(1)),
                                        layer.weight.shape)
        elif keep_materialised(segs, p, q):
            out[layer.weight] = _materialised(linear_weight_grads(a, d, segs),
                                              layer.weight.shape)
        elif segs.width is None:         # ghost norms of weight and bias in one pass
            batch = segs.gram(d.dtype)
            weight, joint = batch.add(a, d, segs.limit_for(p, q), bias=with_bias)
            out[layer.weight] = Contribution(weight,
                                             lambda c: _scaled_product(d, a, segs.expand(c)))
            if with_bias:
                block = len(batch.tensors) - 2          # d's block (weighted: c_rows @ d)
                out[bias] = Contribution(joint, lambda c: batch.weighted(block, c))
            return out
        else:
            out[layer.weight] = Contribution(linear_weight_norms(a, d, segs),
                                             lambda c: _scaled_product(d, a, segs.expand(c)))
    if with_bias:
        out[bias] = _summed(segs, d, bias.shape)
    return out


def _scaled_product(d: Tensor, a: Tensor, c_rows: Tensor) -> Tensor:
    """``(c ⊙ d)ᵀ a``, the narrower of ``d`` and ``a`` scaled and taken as the product's
    rows (a CPU BLAS product with a few output columns, an edge map's 4 inputs or a head's
    10 classes, takes several times longer than its transpose)."""
    c_rows = c_rows.to(d.dtype).unsqueeze(1)
    if a.shape[1] < d.shape[1]:
        return ((a * c_rows).t() @ d).t()
    return (d * c_rows).t() @ a


register_flat_rule(nn.Linear, _linear_rule)


# ------------------------------------------------------------------------------ IndexedLinear
def _indexed_rule(layer: IndexedLinear, calls: list[Call]
                  ) -> dict[nn.Parameter, Contribution] | None:
    """``x[S_v] Wᵀ`` over padded rows ``(B, R)`` (ids ``-1`` padding): ``‖g_i(W)‖² =
    Σ_{r,r'} ⟨δ_ir, δ_ir'⟩ ⟨x_{n_ir}, x_{n_ir'}⟩`` with the input Grams cached for DP-GNN's
    fixed subgraphs; ``Σ_i c_i g_i(W) = Sᵀ x`` with ``S_u = Σ_{(i,r): n_ir = u} c_i δ_ir``:
    one scatter and one product over the nodes, no gathered block."""
    if len(calls) != 1:
        return None
    call = calls[0]
    nodes, d = call.args[0], call.grad
    if nodes.dim() != 2 or d.dim() != 3 or not (call.segs.width == 1
                                                 and call.segs.num == nodes.shape[0]):
        return None
    # padded slots: zero δ (no size is read on the host)
    d = d.masked_fill((nodes < 0).unsqueeze(-1), 0.0)
    out: dict[nn.Parameter, Contribution] = {}
    if layer.weight.requires_grad:
        d_gram = torch.bmm(d, d.transpose(1, 2))
        norms = (d_gram * layer.input_grams(nodes)).sum((1, 2)).clamp_min(0)
        out[layer.weight] = Contribution(norms, lambda c: _indexed_sum(layer, nodes, d, c))
    if layer.bias is not None and layer.bias.requires_grad:
        out[layer.bias] = _materialised(d.sum(1), layer.bias.shape)
    return out


def _indexed_sum(layer: IndexedLinear, nodes: Tensor, d: Tensor, c: Tensor) -> Tensor:
    x = layer.features
    b, r, h = d.shape
    flat = nodes.clamp_min(0).reshape(-1)
    scaled = (d * c.to(d.dtype).view(-1, 1, 1)).reshape(b * r, h)
    if flat.numel() < x.shape[0]:          # gather the rows (fewer than the nodes)
        return scaled.t() @ x.index_select(0, flat).to(d.dtype)
    s = torch.zeros(x.shape[0], h, dtype=d.dtype, device=d.device)
    return s.index_add_(0, flat, scaled).t() @ x.to(d.dtype)


register_flat_rule(IndexedLinear, _indexed_rule)


# ------------------------------------------------------------------------------ SelfScale
def _self_scale_rule(module: SelfScale, calls: list[Call]) -> dict[nn.Parameter, Contribution]:
    """``g_i(w) = Σ_{r∈i} δ_r ⊙ x_r``, summed over the features for a scalar ``w``."""
    w = module.weight
    if not w.requires_grad:
        return {}
    x, d, segs = _rows(calls, lambda c: c.args[0])
    rows = d * x.to(d.dtype)
    return {w: _summed(segs, rows.sum(1, keepdim=True) if w.dim() == 0 else rows, w.shape)}


register_flat_rule(SelfScale, _self_scale_rule)


# ------------------------------------------------------------------------------ LayerNorm
#: up to this many elements ``x̂`` comes from torch's own ``layer_norm`` (one operation);
#: above, written out (about two thirds of ``F.layer_norm``'s time on a CPU for narrow rows)
NATIVE_NORM_ELEMENTS = 2 ** 14


def _normalised(x: Tensor, shape: tuple, eps: float) -> Tensor:
    """``x̂``, layer normalisation without the affine map over the trailing ``shape``:
    ``(x - mean) / sqrt(var + eps)`` (biased variance, as ``F.layer_norm``)."""
    if x.numel() <= NATIVE_NORM_ELEMENTS:
        return torch.layer_norm(x, shape, None, None, eps)
    size = 1
    for n in shape:
        size *= n
    rows = x.reshape(-1, size)
    centred = rows - rows.mean(1, keepdim=True)
    return (centred * torch.rsqrt(centred.square().mean(1, keepdim=True) + eps)).view(x.shape)


def _layer_norm_rule(norm: nn.Module, calls: list[Call]) -> dict[nn.Parameter, Contribution]:
    shape = tuple(norm.normalized_shape) if hasattr(norm, "normalized_shape") else (
        norm.in_channels,)
    xhat_parts, d_parts, s_parts = [], [], []
    for call in calls:
        x = call.args[0]
        xhat = _normalised(x if x.dtype == call.grad.dtype else x.to(call.grad.dtype), shape,
                           norm.eps)
        lead = x.shape[:x.dim() - len(shape)]
        per_row = 1
        for size in lead[1:]:
            per_row *= size
        xhat_parts.append(xhat.reshape(-1, *shape))
        d_parts.append(call.grad.reshape(-1, *shape))
        s_parts.append(call.segs.repeat(per_row))
    xhat, d = _cat(xhat_parts), _cat(d_parts)
    segs = s_parts[0] if len(s_parts) == 1 else Segments(
        torch.cat([s.seg for s in s_parts]), calls[0].num_segments)
    rows = {}                    # parameter -> its per-row gradients
    if norm.weight is not None and norm.weight.requires_grad:
        rows[norm.weight] = (d * xhat).flatten(1)
    if norm.bias is not None and norm.bias.requires_grad:
        rows[norm.bias] = d.flatten(1)
    # summed per subgraph with the other small parameters on these rows (one sum)
    return {p: _summed(segs, r, p.shape) for p, r in rows.items()}


def _cat(parts: list[Tensor]) -> Tensor:
    """The rows of every call (no copy for one call)."""
    return parts[0] if len(parts) == 1 else torch.cat(parts)


register_flat_rule(nn.LayerNorm, _layer_norm_rule)


# ------------------------------------------------------------------------------ Embedding
def _embedding_rule(emb: nn.Embedding, calls: list[Call]) -> dict[nn.Parameter, Contribution]:
    if not emb.weight.requires_grad:
        return {}
    idx, d, segs = _rows(calls, lambda c: c.args[0].unsqueeze(-1))
    idx, seg = idx.reshape(-1), segs.seg
    num, vocab = segs.num, emb.weight.shape[0]
    if emb.padding_idx is not None:
        keep = idx != emb.padding_idx
        idx, d, seg = idx[keep], d[keep], seg[keep]
    keys, inverse = torch.unique(seg * vocab + idx, return_inverse=True)
    per_key = torch.zeros(keys.numel(), d.shape[1], dtype=d.dtype, device=d.device)
    per_key.index_add_(0, inverse, d)
    norms = torch.zeros(num, dtype=d.dtype, device=d.device).index_add_(
        0, keys // vocab, torch.linalg.vector_norm(per_key, dim=1).square())

    def weighted(c: Tensor) -> Tensor:
        out = torch.zeros_like(emb.weight, dtype=d.dtype)
        return out.index_add_(0, idx, d * c.to(d.dtype)[seg].unsqueeze(1))

    return {emb.weight: Contribution(norms, weighted)}


register_flat_rule(nn.Embedding, _embedding_rule)


# ------------------------------------------------------------------------------ output bias
def output_bias_rule(module: nn.Module, calls: list[Call]) -> dict[nn.Parameter, Contribution]:
    """For modules whose only own parameter is a ``bias`` added to every output row (after
    message passing, e.g. PyG's ``GCNConv``): ``g_i(b) = Σ_{r∈i} δ_r``."""
    bias = module.bias
    if bias is None or not bias.requires_grad:
        return {}
    if len(calls) == 1:
        return {bias: _summed(calls[0].segs, calls[0].grad.reshape(-1, bias.numel()),
                              bias.shape)}
    total = sum(c.segs.sum(c.grad.reshape(-1, bias.numel())) for c in calls)
    return {bias: _materialised(total, bias.shape)}


# ------------------------------------------------------------------------------ fallback
#: cotangents materialised at once by the fallback (elements)
FALLBACK_CHUNK_ELEMENTS = 2 ** 24


def exact_fallback(module: nn.Module, calls: list[Call]) -> dict[nn.Parameter, Contribution]:
    """Exact per-subgraph gradients of ``module``'s own parameters for any differentiable
    module: re-run the module alone with ``torch.func.functional_call`` and take one
    vector-Jacobian product per subgraph (``δ`` restricted to that subgraph's output rows),
    ``vmap``-ed over subgraphs in chunks. Costs about ``B`` backward passes of this module
    (not of the model); the parameters' per-subgraph gradients are materialised.

    Correct when the module's output rows of subgraph ``i`` depend only on subgraph ``i``'s
    inputs (checked for the whole model by the engine's independence probe).
    """
    from torch.func import functional_call, vjp, vmap

    own = {n: p for n, p in module.named_parameters(recurse=False) if p.requires_grad}
    if not own:
        return {}
    num = calls[0].num_segments
    totals = {n: torch.zeros((num, p.numel()), dtype=p.dtype, device=p.device)
              for n, p in own.items()}
    for call in calls:
        params = {n: p.detach() for n, p in own.items()}

        def run(p, call=call):
            return functional_call(module, p, call.args, call.kwargs, strict=False)

        with call.cache.get("context", nullcontext)():
            _, pullback = vjp(run, params)
        grad, seg = call.grad, call.seg
        rows = grad.reshape(grad.shape[0], -1)
        chunk = max(1, FALLBACK_CHUNK_ELEMENTS // max(rows.numel(), 1))
        ids = torch.arange(num, device=grad.device)
        for s in range(0, num, chunk):
            part = ids[s:s + chunk]
            mask = (seg.unsqueeze(0) == part.unsqueeze(1)).to(grad.dtype)   # (c, R)
            cot = (mask.view(*mask.shape, *([1] * (grad.dim() - 1))) * grad.unsqueeze(0))
            grads = vmap(lambda t: pullback(t)[0])(cot)
            for n in own:
                totals[n][s:s + chunk] += grads[n].reshape(part.numel(), -1).to(
                    totals[n].dtype)
    return {p: _materialised(totals[n], p.shape) for n, p in own.items()}



# ------------------------------------------------------------------------------ GIN's eps
def _unknown_params(module: nn.Module, known: tuple[str, ...]) -> bool:
    """Whether ``module`` owns a trainable parameter its rule does not know (another PyG
    version's): then the rule falls back rather than give it no gradient."""
    return any(p.requires_grad and n not in known
               for n, p in module.named_parameters(recurse=False))


def _arg(call: Call, pos: int, name: str):
    """The module call's argument ``name`` (positional ``pos`` or keyword)."""
    return call.args[pos] if len(call.args) > pos else call.kwargs.get(name)


def _gin_probe(conv: nn.Module, probe: Probe) -> list:
    """Watch the input ``h = aggr + (1 + ε) x`` of ``conv.nn``."""
    def pre(_, args):
        return (probe.watch(conv, "h", args[0]), *args[1:]) if args else None

    return [conv.nn.register_forward_pre_hook(pre)]


def _gin_rule(conv: nn.Module, calls: list[Call]) -> dict[nn.Parameter, Contribution] | None:
    """``g_i(ε) = Σ_{r∈i} ⟨∂L/∂h_r, x_r⟩`` for ``h = aggr + (1 + ε) x_r``."""
    eps = conv.eps
    if _unknown_params(conv, ("eps",)):
        return None
    if not (isinstance(eps, nn.Parameter) and eps.requires_grad):
        return {}
    found = []                               # (segments, per-row gradients) of each call
    for call in calls:
        x = _arg(call, 0, "x")
        x_r = x[1] if isinstance(x, (tuple, list)) else x
        dh = call.extra.get("h")
        if x_r is None or dh is None:        # ε unused, or no gradient reached h
            continue
        if dh.shape != x_r.shape or dh.shape[0] != call.segs.rows:
            return None
        rows = dh.shape[0]                   # row dots as one bmm: no (N, F) temporary
        found.append((call.segs, torch.bmm(dh.reshape(rows, 1, -1),
                                           x_r.to(dh.dtype).reshape(rows, -1, 1)).view(rows, 1)))
    if len(found) == 1:
        return {eps: _summed(found[0][0], found[0][1], eps.shape)}
    grad = calls[0].grad
    total = torch.zeros(calls[0].num_segments, 1, dtype=grad.dtype, device=grad.device)
    for segs, per_row in found:
        total = total + segs.sum(per_row).to(total.dtype)
    return {eps: _materialised(total, eps.shape)}


# ------------------------------------------------------------------------------ GATConv
def _gat_probe(conv: nn.Module, probe: Probe) -> list:
    """Keep the projected features ``x'`` (and ``lin_edge``'s output), the edges after
    self-loops, and watch ``alpha_j`` in the edge update: its gradient is ``γ``, the
    gradient of every edge's attention logit."""
    def keep(key):
        return lambda _, args, out: probe.keep(conv, key, out)

    handles = []
    for name in ("lin", "lin_src", "lin_dst", "lin_edge"):
        child = getattr(conv, name, None)
        if isinstance(child, nn.Module):
            handles.append(child.register_forward_hook(keep(name)))

    def pre(_, inputs):
        edge_index, size, kwargs = inputs
        if "alpha_j" not in kwargs:          # PyG's non-template path: the rule falls back
            return None
        probe.keep(conv, "edge_index", edge_index)
        kwargs = dict(kwargs)
        kwargs["alpha_j"] = probe.watch(conv, "alpha_j", kwargs["alpha_j"])
        return edge_index, size, kwargs

    handles.append(conv.register_edge_update_forward_pre_hook(pre))
    return handles


def _gat_rule(conv: nn.Module, calls: list[Call]) -> dict[nn.Parameter, Contribution] | None:
    """Attention vectors from ``γ`` (see the module docstring); the bias from ``δ``. Falls
    back (``None``) for bipartite inputs, sparse adjacencies and PyG's non-template path."""
    if _unknown_params(conv, ("att_src", "att_dst", "att_edge", "bias")):
        return None
    own = {n: p for n, p in conv.named_parameters(recurse=False) if p.requires_grad}
    num, h, c = calls[0].num_segments, conv.heads, conv.out_channels
    dtype, device = calls[0].grad.dtype, calls[0].grad.device
    per_seg = {n: torch.zeros(num, p.numel(), dtype=dtype, device=device)
               for n, p in own.items() if n != "bias"}
    for call in calls:
        x, extra, seg = _arg(call, 0, "x"), call.extra, call.seg
        ei = extra.get("edge_index")
        if not isinstance(x, Tensor) or not isinstance(ei, Tensor) or ei.dim() != 2:
            return None
        x_src = extra.get("lin", extra.get("lin_src"))
        x_dst = extra.get("lin", extra.get("lin_dst"))
        if x_src is None or x_dst is None or x_src.shape[0] != seg.numel():
            return None
        gamma = extra.get("alpha_j")
        if gamma is None:                    # no gradient reached the attention
            continue
        if gamma.shape[0] != ei.shape[1]:
            return None
        x_src, x_dst = x_src.to(dtype).view(-1, h, c), x_dst.to(dtype).view(-1, h, c)
        for name, end, feats in (("att_src", 0, x_src), ("att_dst", 1, x_dst)):
            if name in per_seg:
                d_node = torch.zeros(seg.numel(), h, dtype=dtype, device=device)
                d_node.index_add_(0, ei[end], gamma)
                per_seg[name] += segment_sum((d_node.unsqueeze(-1) * feats).flatten(1),
                                             seg, num)
        emb = extra.get("lin_edge")
        if "att_edge" in per_seg and emb is not None:
            terms = (gamma.unsqueeze(-1) * emb.to(dtype).view(-1, h, c)).flatten(1)
            per_seg["att_edge"] += segment_sum(terms, seg[ei[1]], num)
    out = {own[n]: _materialised(t, own[n].shape) for n, t in per_seg.items()}
    if "bias" in own:
        out.update(output_bias_rule(conv, calls))
    return out


def _register_pyg() -> None:
    """Rules for the PyG types (imported lazily so this module does not need PyG at import)."""
    try:
        from torch_geometric.nn import GATConv, GCNConv, GINConv, GINEConv
        from torch_geometric.nn import LayerNorm as PygLayerNorm
        from torch_geometric.nn.dense.linear import Linear as PygLinear
    except ImportError:  # pragma: no cover - PyG is a dependency
        return
    register_flat_rule(PygLinear, _linear_rule)
    register_flat_rule(PygLayerNorm, _layer_norm_rule)
    register_flat_rule(GCNConv, output_bias_rule)
    for gin in (GINConv, GINEConv):
        register_flat_rule(gin, _gin_rule, probe=_gin_probe)
    register_flat_rule(GATConv, _gat_rule, probe=_gat_probe)


_register_pyg()
