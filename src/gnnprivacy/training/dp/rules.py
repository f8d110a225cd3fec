"""Per-layer ghost-clipping rules: per-subgraph gradient norms and clipped sums.

A *rule* turns what one parameterised layer saw during the forward pass (its inputs ``a``)
and the backward pass (the gradient ``δ`` of the summed per-subgraph losses with respect
to its outputs) into

* the squared norm of every subgraph's gradient for each of that layer's parameters,
  without materialising the per-subgraph gradients ("ghost" norms, Goodfellow 2015; Li et
  al. 2022; Bu et al. 2023), and
* the clipped sum ``Σ_i c_i g_i`` of those gradients for given clip factors ``c`` (one
  factor vector per parameter, so per-tensor clipping groups are possible), formed
  directly as one matrix product.

Shapes. Every captured tensor has the subgraph index as its leading dimension: a layer
input ``(B, d)`` has one row per subgraph, ``(B, R, d)`` has ``R`` (possibly padded) rows
per subgraph. Several calls of the same module in one forward pass are concatenated along
the row dimension, which is exact because the per-subgraph gradient of a shared weight is
the sum over all its uses.

For ``nn.Linear`` (``y = a Wᵀ + b``) and subgraph ``i`` with rows ``r``:

* ``g_i(W) = Σ_r δ_ir a_irᵀ``, ``‖g_i(W)‖² = Σ_{r,r'} ⟨δ_ir, δ_ir'⟩⟨a_ir, a_ir'⟩``, which is
  ``‖δ_i‖²‖a_i‖²`` for one row;
* ``g_i(b) = Σ_r δ_ir``;
* clipped sums ``Σ_i c_i g_i(W) = (c ⊙ Δ)ᵀ A`` over all rows, ``Σ_i c_i Σ_r δ_ir``.

For an elementwise scale ``y = (offset + w) ⊙ x`` with ``w`` a scalar or a vector over the
last dimension (GIN's ``(1 + λ) x_u``): ``g_i(w) = Σ_r δ_ir ⊙ x_ir`` reduced to ``w``'s shape.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from gnnprivacy._fixed_shapes import fixed_shapes
from gnnprivacy.errors import GnnPrivacyError
from gnnprivacy.nn.dpgnn import IndexedLinear
from gnnprivacy.nn.star import SelfScale

__all__ = [
    "GhostRule",
    "UnsupportedModuleError",
    "register_rule",
    "rule_for",
    "supported_module_types",
]


#: what `gnnprivacy.make_private` trains, as the "Supported modules" table of
#: docs/own-model.md lists it (the modules a user writes, not the library's internal ones)
MAKE_PRIVATE_SUPPORTED = (
    "torch nn.Linear, nn.LayerNorm, nn.Embedding, PyG Linear, GCNConv, SAGEConv, GraphConv, "
    "GINConv, GINEConv, LayerNorm(mode='node'), GraphNorm/InstanceNorm with batch=batch.batch, "
    "and any other module that maps one tensor to one tensor through the exact fallback "
    "(the 'Supported modules' table of docs/own-model.md)")


def _engine_supported() -> str:
    """What `DPEngine`'s `check_model` trains: ``nn.Linear`` and the rules users registered
    (the library's own internal modules are not named)."""
    own = sorted(t.__name__ for t in _RULES if not t.__module__.startswith("gnnprivacy.")
                 and t is not nn.Linear)
    return ("torch nn.Linear" + "".join(f", {n}" for n in own)
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


ParamTensors = dict[nn.Parameter, Tensor]


@dataclass(frozen=True)
class GhostRule:
    """The two functions the engine needs for one module type.

    Attributes:
        norms_sq: ``(module, acts, backs) -> {param: (B,)}``: squared per-subgraph gradient
            norm of each of the module's own trainable parameters; ``acts`` and ``backs``
            are lists with one entry per call of the module.
        clipped_sums: ``(module, acts, backs, factors) -> {param: Σ_i c_i g_i}`` where
            ``factors`` maps each trainable parameter to its ``(B,)`` clip factors.
    """

    norms_sq: Callable[[nn.Module, list[Tensor], list[Tensor]], ParamTensors]
    clipped_sums: Callable[[nn.Module, list[Tensor], list[Tensor], ParamTensors], ParamTensors]


_RULES: dict[type, GhostRule] = {}


def register_rule(module_type: type, rule: GhostRule) -> None:
    """Register ``rule`` for exactly ``module_type``.

    Subclasses are not covered: a subclass may change ``forward``, and a wrong rule would
    silently break the clipping bound, so each type is registered explicitly.
    """
    if not (isinstance(module_type, type) and issubclass(module_type, nn.Module)):
        raise TypeError(f"module_type must be an nn.Module subclass; got {module_type!r}")
    _RULES[module_type] = rule


def rule_for(module: nn.Module) -> GhostRule | None:
    """The rule registered for ``type(module)`` (exact type), or ``None``."""
    return _RULES.get(type(module))


def supported_module_types() -> tuple[type, ...]:
    """Module types the engine can clip."""
    return tuple(_RULES)


def _as_rows(t: Tensor) -> Tensor:
    """View ``(B, d)`` as ``(B, 1, d)`` and ``(B, r1, r2, ..., d)`` as ``(B, R, d)``."""
    if t.dim() == 2:
        return t.unsqueeze(1)
    rows = 1
    for size in t.shape[1:-1]:
        rows *= size
    return t.reshape(t.shape[0], rows, t.shape[-1])


def _stack_calls(tensors: list[Tensor]) -> Tensor:
    """Concatenate the rows of several calls of one module: ``(B, ΣR, d)``."""
    rows = [_as_rows(t) for t in tensors]
    return rows[0] if len(rows) == 1 else torch.cat(rows, dim=1)


def _row_sq_norms(t: Tensor) -> Tensor:
    """``‖t_b‖²`` over the last dimension (``vector_norm`` is several times faster than
    ``square().sum()`` on CPU)."""
    return torch.linalg.vector_norm(t, dim=-1).square()


def _single_row(acts: list[Tensor]) -> bool:
    return len(acts) == 1 and acts[0].dim() == 2


# ---------------------------------------------------------------- nn.Linear
def _linear_norms_sq(layer: nn.Linear, acts: list[Tensor], backs: list[Tensor]) -> ParamTensors:
    out: ParamTensors = {}
    bias = layer.bias if layer.bias is not None and layer.bias.requires_grad else None
    if _single_row(acts):
        a, d = acts[0], backs[0]
        d_sq = _row_sq_norms(d)
        if layer.weight.requires_grad:
            out[layer.weight] = d_sq * _row_sq_norms(a)
        if bias is not None:
            out[bias] = d_sq
        return out
    a, d = _stack_calls(acts), _stack_calls(backs)
    if layer.weight.requires_grad:
        d_gram = torch.bmm(d, d.transpose(1, 2))
        a_gram = torch.bmm(a, a.transpose(1, 2))
        out[layer.weight] = (d_gram * a_gram).sum((1, 2)).clamp_min(0)
    if bias is not None:
        out[bias] = _row_sq_norms(d.sum(1))
    return out


def _scaled_rows(d: Tensor, c: Tensor) -> Tensor:
    """``(B·R, p)`` rows of ``d`` scaled by their subgraph's factor."""
    return (d * c.to(d.dtype).view(-1, 1, 1)).reshape(-1, d.shape[-1])


def _linear_clipped_sums(layer: nn.Linear, acts: list[Tensor], backs: list[Tensor],
                         factors: ParamTensors) -> ParamTensors:
    a, d = _stack_calls(acts), _stack_calls(backs)
    out: ParamTensors = {}
    scaled_w = None
    if layer.weight.requires_grad:
        scaled_w = _scaled_rows(d, factors[layer.weight])
        out[layer.weight] = scaled_w.t() @ a.reshape(-1, a.shape[-1])
    if layer.bias is not None and layer.bias.requires_grad:
        c_b = factors[layer.bias]
        same = scaled_w is not None and c_b is factors[layer.weight]
        out[layer.bias] = (scaled_w if same else _scaled_rows(d, c_b)).sum(0)
    return out


register_rule(nn.Linear, GhostRule(_linear_norms_sq, _linear_clipped_sums))


# ---------------------------------------------------------------- SelfScale
def _scale_per_sample(module: SelfScale, acts: list[Tensor], backs: list[Tensor]) -> Tensor:
    """Materialised per-subgraph gradients ``(B, *w.shape)``: at most ``B x d`` numbers."""
    prod = (_stack_calls(backs) * _stack_calls(acts)).sum(1)  # (B, d)
    return prod.sum(1) if module.weight.dim() == 0 else prod


def _scale_norms_sq(module: SelfScale, acts: list[Tensor], backs: list[Tensor]) -> ParamTensors:
    if not module.weight.requires_grad:
        return {}
    g = _scale_per_sample(module, acts, backs)
    return {module.weight: g.square() if g.dim() == 1 else _row_sq_norms(g)}


def _scale_clipped_sums(module: SelfScale, acts: list[Tensor], backs: list[Tensor],
                        factors: ParamTensors) -> ParamTensors:
    if not module.weight.requires_grad:
        return {}
    g = _scale_per_sample(module, acts, backs)
    c = factors[module.weight].to(g.dtype)
    summed = (c * g).sum(0) if g.dim() == 1 else c @ g
    return {module.weight: summed.reshape(module.weight.shape)}


register_rule(SelfScale, GhostRule(_scale_norms_sq, _scale_clipped_sums))


# IndexedLinear: the first encoder layer of DP-GNN, x[S_v] W^T computed as (x W^T)[S_v].

def _indexed_backs(acts: list[Tensor], backs: list[Tensor]) -> tuple[Tensor, Tensor]:
    if len(acts) != 1:
        raise ValueError("IndexedLinear must be called once per forward pass under the DP engine")
    nodes, d = acts[0], backs[0]
    # in place (idempotent): both rule functions see the masked δ; unconditional, since
    # asking whether there is padding would read a device value on the host
    d.masked_fill_((nodes < 0).unsqueeze(-1), 0.0)
    return nodes, d


def _indexed_norms_sq(layer: IndexedLinear, acts: list[Tensor], backs: list[Tensor]) -> ParamTensors:
    """``‖g_i(W)‖² = Σ_{r,r'} ⟨δ_ir, δ_ir'⟩ ⟨x_{n_ir}, x_{n_ir'}⟩`` (Gram of the input rows,
    cached for DP-GNN's fixed subgraphs), ``‖g_i(b)‖² = ‖Σ_r δ_ir‖²``."""
    nodes, d = _indexed_backs(acts, backs)
    out = {}
    if layer.weight.requires_grad:
        d_gram = torch.bmm(d, d.transpose(1, 2))
        out[layer.weight] = (d_gram * layer.input_grams(nodes)).sum((1, 2)).clamp_min(0)
    if layer.bias is not None and layer.bias.requires_grad:
        out[layer.bias] = torch.linalg.vector_norm(d.sum(1), dim=-1).square()
    return out


def _indexed_clipped_sums(layer: IndexedLinear, acts: list[Tensor], backs: list[Tensor],
                          factors: ParamTensors) -> ParamTensors:
    """``Σ_i c_i Σ_r δ_ir x_{n_ir}ᵀ = Sᵀ x`` with ``S_u = Σ_{(i,r): n_ir = u} c_i δ_ir``:
    one scatter-add and one matrix product over distinct nodes, no gathered block."""
    nodes, d = _indexed_backs(acts, backs)
    x, out = layer.features, {}
    flat = nodes.clamp_min(0).reshape(-1)
    if layer.weight.requires_grad and fixed_shapes(d.device):
        # no unique ids and no sparse product (both read sizes on the host on a GPU):
        # gather the rows, or scatter δ onto every node when there are fewer nodes
        b, r, h = d.shape
        scaled = (d * factors[layer.weight].to(d.dtype).view(-1, 1, 1)).reshape(b * r, h)
        if flat.numel() < x.shape[0]:
            out[layer.weight] = scaled.t() @ x.index_select(0, flat).to(d.dtype)
        else:
            s = torch.zeros(x.shape[0], h, dtype=d.dtype, device=d.device)
            out[layer.weight] = s.index_add_(0, flat, scaled).t() @ x.to(d.dtype)
    elif layer.weight.requires_grad:
        # S = P δ with P[u, (i, r)] = c_i [n_ir = u]: one sparse product, so the scaled
        # (B·(K+1), h) copy of δ is never formed (it was the step's largest temporary).
        b, r, h = d.shape
        c = factors[layer.weight].to(d.dtype)
        if flat.numel() < x.shape[0]:
            uniq, target = torch.unique(flat, return_inverse=True)
            rows_x = x[uniq]
        else:
            target, rows_x = flat, x
        cols = torch.arange(b * r, device=d.device)
        p = torch.sparse_coo_tensor(torch.stack([target, cols]), c.repeat_interleave(r),
                                    (rows_x.shape[0], b * r), check_invariants=False)
        s = torch.sparse.mm(p, d.reshape(b * r, h))
        out[layer.weight] = s.t() @ rows_x
    if layer.bias is not None and layer.bias.requires_grad:
        out[layer.bias] = factors[layer.bias].to(d.dtype) @ d.sum(1)
    return out


register_rule(IndexedLinear, GhostRule(_indexed_norms_sq, _indexed_clipped_sums))
