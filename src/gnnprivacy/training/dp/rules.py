"""Per-layer ghost-clipping rules: per-subgraph gradient norms and clipped sums.

A *rule* turns what one parameterised layer saw during the forward pass (its inputs ``a``)
and the backward pass (the gradient ``δ`` of the summed per-subgraph losses with respect
to its outputs) into

* the squared norm of every subgraph's gradient for that layer's parameters, without
  materialising the per-subgraph gradients ("ghost" norms, Goodfellow 2015; Li et al.
  2022; Bu et al. 2023), and
* the clipped sum ``Σ_i c_i g_i`` of those gradients for given clip factors ``c``, formed
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

from gnnprivacy.errors import GnnPrivacyError
from gnnprivacy.nn.star import SelfScale

__all__ = [
    "GhostRule",
    "UnsupportedModuleError",
    "register_rule",
    "rule_for",
    "supported_module_types",
]


class UnsupportedModuleError(GnnPrivacyError, ValueError):
    """A trainable module has no per-subgraph gradient rule (so it cannot be clipped).

    The message names the module path and type and lists the supported types.
    """

    def __init__(self, path: str, module: nn.Module, reason: str | None = None):
        self.path = path
        self.module_type = type(module).__name__
        supported = sorted(t.__name__ for t in _RULES)
        why = reason or "it has trainable parameters but no per-subgraph gradient rule"
        super().__init__(
            f"module {path or '<root>'!r} of type {self.module_type} is not supported by the "
            f"DP engine: {why}; supported parameterised modules: {supported} "
            "(register a rule with gnnprivacy.training.dp.register_rule)"
        )


@dataclass(frozen=True)
class GhostRule:
    """The two functions the engine needs for one module type.

    Attributes:
        norms_sq: ``(module, acts, backs) -> (B,)`` squared per-subgraph gradient norm of the
            module's own trainable parameters; ``acts``/``backs`` are lists (one per call).
        clipped_sums: ``(module, acts, backs, factors) -> {param: Σ_i c_i g_i}``.
    """

    norms_sq: Callable[[nn.Module, list[Tensor], list[Tensor]], Tensor]
    clipped_sums: Callable[[nn.Module, list[Tensor], list[Tensor], Tensor], dict[nn.Parameter, Tensor]]


_RULES: dict[type, GhostRule] = {}


def register_rule(module_type: type, rule: GhostRule) -> None:
    """Register ``rule`` for ``module_type`` (and its subclasses)."""
    if not (isinstance(module_type, type) and issubclass(module_type, nn.Module)):
        raise TypeError(f"module_type must be an nn.Module subclass; got {module_type!r}")
    _RULES[module_type] = rule


def rule_for(module: nn.Module) -> GhostRule | None:
    """The rule of the most specific registered type ``module`` is an instance of."""
    for klass in type(module).__mro__:
        if klass in _RULES:
            return _RULES[klass]
    return None


def supported_module_types() -> tuple[type, ...]:
    """Module types the engine can clip."""
    return tuple(_RULES)


def _as_rows(t: Tensor) -> Tensor:
    """View ``(B, d)`` as ``(B, 1, d)`` and ``(B, r1, r2, ..., d)`` as ``(B, R, d)``."""
    if t.dim() == 2:
        return t.unsqueeze(1)
    return t.reshape(t.shape[0], -1, t.shape[-1])


def _stack_calls(tensors: list[Tensor]) -> Tensor:
    """Concatenate the rows of several calls of one module: ``(B, ΣR, d)``."""
    rows = [_as_rows(t) for t in tensors]
    return rows[0] if len(rows) == 1 else torch.cat(rows, dim=1)


def _single_row(acts: list[Tensor]) -> bool:
    return len(acts) == 1 and acts[0].dim() == 2


# ---------------------------------------------------------------- nn.Linear
def _linear_norms_sq(layer: nn.Linear, acts: list[Tensor], backs: list[Tensor]) -> Tensor:
    if _single_row(acts):
        a, d = acts[0], backs[0]
        d_sq = d.square().sum(1)
        total = d_sq * a.square().sum(1) if layer.weight.requires_grad else torch.zeros_like(d_sq)
        if layer.bias is not None and layer.bias.requires_grad:
            total = total + d_sq
        return total
    a, d = _stack_calls(acts), _stack_calls(backs)
    d_gram = torch.bmm(d, d.transpose(1, 2))
    total = torch.zeros(a.shape[0], dtype=d.dtype, device=d.device)
    if layer.weight.requires_grad:
        a_gram = torch.bmm(a, a.transpose(1, 2))
        total = total + (d_gram * a_gram).sum((1, 2)).clamp_min(0)
    if layer.bias is not None and layer.bias.requires_grad:
        total = total + d.sum(1).square().sum(1)
    return total


def _linear_clipped_sums(layer: nn.Linear, acts: list[Tensor], backs: list[Tensor],
                         factors: Tensor) -> dict[nn.Parameter, Tensor]:
    a, d = _stack_calls(acts), _stack_calls(backs)
    scaled = d * factors.to(d.dtype).view(-1, 1, 1)
    flat_d = scaled.reshape(-1, scaled.shape[-1])
    out: dict[nn.Parameter, Tensor] = {}
    if layer.weight.requires_grad:
        out[layer.weight] = flat_d.t() @ a.reshape(-1, a.shape[-1])
    if layer.bias is not None and layer.bias.requires_grad:
        out[layer.bias] = flat_d.sum(0)
    return out


register_rule(nn.Linear, GhostRule(_linear_norms_sq, _linear_clipped_sums))


# ---------------------------------------------------------------- SelfScale
def _scale_per_sample(module: SelfScale, acts: list[Tensor], backs: list[Tensor]) -> Tensor:
    """Materialised per-subgraph gradients ``(B, *w.shape)``: at most ``B x d`` numbers."""
    prod = (_stack_calls(backs) * _stack_calls(acts)).sum(1)  # (B, d)
    return prod.sum(1) if module.weight.dim() == 0 else prod


def _scale_norms_sq(module: SelfScale, acts: list[Tensor], backs: list[Tensor]) -> Tensor:
    g = _scale_per_sample(module, acts, backs)
    if not module.weight.requires_grad:
        return torch.zeros(g.shape[0], dtype=g.dtype, device=g.device)
    return g.square() if g.dim() == 1 else g.square().sum(1)


def _scale_clipped_sums(module: SelfScale, acts: list[Tensor], backs: list[Tensor],
                        factors: Tensor) -> dict[nn.Parameter, Tensor]:
    if not module.weight.requires_grad:
        return {}
    g = _scale_per_sample(module, acts, backs)
    c = factors.to(g.dtype)
    summed = (c * g).sum(0) if g.dim() == 1 else c @ g
    return {module.weight: summed.reshape(module.weight.shape)}


register_rule(SelfScale, GhostRule(_scale_norms_sq, _scale_clipped_sums))
