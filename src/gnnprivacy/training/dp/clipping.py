"""Per-subgraph clipping: clip factors and the clipped gradient sum.

For per-subgraph gradients ``g_i`` and a clip norm ``C`` (Abadi et al. 2016; spec 000
§3.3, spec 002 §3.4)::

    c_i = min(1, C / ‖g_i‖₂),    ḡ = Σ_i c_i g_i,    ‖c_i g_i‖₂ ≤ C.

With clip *groups* (spec 002 ``clip_grouping``: disjoint parameter sets ``l`` with norms
``C_l``) each group is clipped separately, ``c_{i,l} = min(1, C_l/‖g_{i,l}‖)``, and the
whole clipped gradient of a subgraph has norm at most ``C_eff = sqrt(Σ_l C_l²)``; one
group holding every parameter is ordinary (global) clipping.

*Privacy.* Clipping is what bounds the sensitivity: adding, removing or replacing one
subgraph changes ``ḡ`` by at most ``C_eff`` (add/remove) or ``2·C_eff`` (replace). Which
subgraphs one *node* can affect is the sampler's business (spec 000 Theorem 2, spec 002
Lemma 1); the accountant combines the two.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from gnnprivacy._validation import check_positive
from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.training.dp.capture import ActivationCapture

__all__ = ["ClipGroup", "ClippedGradients", "clip_factors", "clipped_gradient_sum",
           "effective_clip_norm", "resolve_groups"]


@dataclass(frozen=True)
class ClipGroup:
    """Parameters clipped together to one norm bound.

    Attributes:
        names: parameter names (as in ``model.named_parameters()``).
        clip_norm: the bound ``C_l`` on the group's per-subgraph gradient norm.
    """

    names: tuple[str, ...]
    clip_norm: float


@dataclass(frozen=True)
class ClippedGradients:
    """Result of one batched clipping pass.

    Attributes:
        sums: parameter name -> ``Σ_i c_i g_i`` (same shape as the parameter).
        norms: ``(B,)`` unclipped per-subgraph gradient norms over all parameters.
        factors: group index -> ``(B,)`` clip factors.
        group_norms: group index -> ``(B,)`` unclipped per-subgraph norms of the group.

    The norms and factors depend on private data: they are diagnostics for tests and must
    never be released.
    """

    sums: dict[str, Tensor]
    norms: Tensor
    factors: dict[int, Tensor]
    group_norms: dict[int, Tensor]

    @property
    def num_subgraphs(self) -> int:
        return int(self.norms.shape[0])


def clip_factors(norms: Tensor, clip_norm: float) -> Tensor:
    """``min(1, C/‖g‖)`` elementwise; exactly 1 where ``‖g‖ ≤ C`` (also for ``‖g‖ = 0``)."""
    # filled on the device (no host-to-GPU copy); a bound past the dtype's range is infinite
    c = torch.full_like(norms, clip_norm if clip_norm <= torch.finfo(norms.dtype).max
                        else math.inf)
    return torch.where(norms > c, c / norms.clamp_min(torch.finfo(norms.dtype).tiny),
                       torch.ones_like(norms))


def resolve_groups(model: nn.Module, clip_norm: float | Sequence[ClipGroup]) -> list[ClipGroup]:
    """One global group for a float, else validate that the groups partition the parameters."""
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    if not isinstance(clip_norm, Sequence):
        return [ClipGroup(tuple(trainable), check_positive("clip_norm", clip_norm))]
    seen: list[str] = []
    for g in clip_norm:
        check_positive("clip_norm", g.clip_norm)
        seen.extend(g.names)
    if sorted(seen) != sorted(trainable):
        raise InvalidParameterError(
            "clip_norm", "clip groups that partition the trainable parameters "
            f"{sorted(trainable)}", sorted(seen))
    return list(clip_norm)


def effective_clip_norm(groups: Sequence[ClipGroup]) -> float:
    """``C_eff = sqrt(Σ_l C_l²)``: the bound on one subgraph's whole clipped gradient."""
    return math.sqrt(sum(g.clip_norm ** 2 for g in groups))


def clip_and_sum(capture: ActivationCapture, losses: Tensor, groups: Sequence[ClipGroup], *,
                 row_mask: Tensor | None = None) -> ClippedGradients:
    """Clipped gradient sum from a recorded forward pass (ONE backward).

    Args:
        capture: the capture whose `recording` saw the forward.
        losses: per-subgraph losses ``(B,)``.
        groups: clip groups from `resolve_groups`.
        row_mask: optional ``(B, R)`` mask of real rows of padded subgraphs.
    """
    num = losses.shape[0]
    params = dict(capture.model.named_parameters())
    per_layer = capture.backprops(losses, row_mask=row_mask)
    norms_sq: dict[nn.Parameter, Tensor] = {}
    for _, module, rule, acts, backs in per_layer:
        norms_sq.update(rule.norms_sq(module, acts, backs))
    dtype = losses.dtype if losses.is_floating_point() else torch.get_default_dtype()
    zero = torch.zeros(num, dtype=dtype, device=losses.device)
    factor_of: dict[nn.Parameter, Tensor] = {}
    factors, group_norms = {}, {}
    total_sq = zero.clone()
    for k, group in enumerate(groups):
        sq = sum((norms_sq.get(params[n], zero) for n in group.names), zero.clone())
        total_sq = total_sq + sq
        group_norms[k] = sq.sqrt()
        factors[k] = clip_factors(group_norms[k], group.clip_norm)
        for n in group.names:
            factor_of[params[n]] = factors[k]
    sums_by_param: dict[nn.Parameter, Tensor] = {}
    for _, module, rule, acts, backs in per_layer:
        sums_by_param.update(rule.clipped_sums(module, acts, backs, factor_of))
    sums = {n: sums_by_param.get(p, torch.zeros_like(p)).detach()
            for n, p in params.items() if p.requires_grad}
    return ClippedGradients(sums, total_sq.sqrt(), factors, group_norms)


def clipped_gradient_sum(model: nn.Module, closure: Callable[[], Tensor], *,
                         clip_norm: float | Sequence[ClipGroup],
                         row_mask: Tensor | None = None) -> ClippedGradients:
    """Per-subgraph clipped gradient sum of ``model`` in one forward and one backward.

    Args:
        model: a model whose trainable modules all have a rule (``nn.Linear``,
            `SelfScale`, or registered ones) and take the
            subgraph index as the leading dimension of their input.
        closure: runs the forward pass and returns the per-subgraph losses ``(B,)``
            (unreduced; term ``i`` depends only on subgraph ``i``).
        clip_norm: global bound ``C``, or a sequence of `ClipGroup`.
        row_mask: optional ``(B, R)`` mask of real rows of padded subgraphs.

    Returns:
        `ClippedGradients` (no noise added).

    Raises:
        UnsupportedModuleError: the model has a trainable module without a rule.
    """
    groups = resolve_groups(model, clip_norm)
    capture = ActivationCapture(model)
    with capture.recording():
        losses = closure()
    return clip_and_sum(capture, losses, groups, row_mask=row_mask)
