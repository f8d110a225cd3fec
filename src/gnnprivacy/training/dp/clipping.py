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
from gnnprivacy.training.dp.flat_capture import BatchLayout, FlatCapture, trainable
from gnnprivacy.training.dp.flat_rules import Contribution
from gnnprivacy.training.dp.noise import unflatten

__all__ = ["ClipGroup", "ClippedGradients", "clip_and_sum", "clip_contributions",
           "clip_factors", "clipped_gradient_sum", "effective_clip_norm", "resolve_groups"]


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
        sums: parameter name -> ``Σ_i c_i g_i`` (same shape as the parameter); views of one
            flat vector (a `FlatSums`) when the parameters share a dtype.
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


def _as(t: Tensor, dtype: torch.dtype) -> Tensor:
    return t if t.dtype == dtype else t.to(dtype)


def clip_contributions(contributions: dict[nn.Parameter, Contribution],
                       named: Sequence[tuple[str, nn.Parameter]], groups: Sequence[ClipGroup],
                       num: int, *, scale: float = 1.0,
                       device: torch.device | None = None) -> ClippedGradients:
    """Per-subgraph clipping of every clip group and the clipped sums: the one clipping
    path of `DPEngine` and `gnnprivacy.make_private`.

    In each group the parameters whose rules materialised their per-subgraph gradients are
    clipped together (one norm and one product ``c @ G`` over their concatenation); every
    other parameter adds its ghost norm and gives its clipped sum from the factors
    (``weighted``). The sums come out laid end to end in one vector (group by group), which
    the noise and the update read whole.

    Args:
        contributions: parameter -> `Contribution` (from the capture's rules); a trainable
            parameter without one has gradient zero.
        named: the trainable ``(name, parameter)`` pairs.
        groups: the clip groups (names of ``named``).
        num: ``B``.
        scale: the captured gradients times ``scale`` are those of the per-subgraph losses
            (the realised batch under a mean loss; every rule is linear in them): applied
            once here, to the norms and the clip factors.
    """
    params = dict(named)
    dtype = named[0][1].dtype if named else torch.float32
    device = device if device is not None else (named[0][1].device if named
                                                else torch.device("cpu"))
    factors, group_norms, total = {}, {}, None
    parts: list[tuple[list[str], Tensor]] = []     # (names, their flat clipped sums)
    for k, group in enumerate(groups):
        mat, rest, absent = [], [], []
        for n in group.names:
            c = contributions.get(params[n])
            (absent if c is None else mat if c.materialised else rest).append(n)
        sq = grads = None
        if mat:
            grads = _side_by_side([contributions[params[n]] for n in mat], dtype)
            sq = grads.square().sum(1)
        for part in _ghost_norms([contributions[params[n]] for n in rest]):
            part = _as(part, dtype)
            sq = part if sq is None else sq + part
        if sq is None:
            sq = torch.zeros(num, dtype=dtype, device=device)
        if scale != 1.0:
            sq = sq * (scale * scale)
        norms = sq.sqrt()
        factor = clip_factors(norms, group.clip_norm)
        factors[k], group_norms[k] = factor, norms
        total = sq if total is None else total + sq
        weights = factor * scale if scale != 1.0 else factor
        if mat:
            parts.append((mat, _as(weights, grads.dtype) @ grads))
        for n in rest:
            parts.append(([n], contributions[params[n]].weighted(weights).reshape(-1)))
        for n in absent:
            parts.append(([n], torch.zeros(params[n].numel(), dtype=dtype, device=device)))
    if total is None:
        total = torch.zeros(num, dtype=dtype, device=device)
    return ClippedGradients(_laid_out(parts, params, dtype), total.sqrt(), factors,
                            group_norms)


def _ghost_norms(found: list[Contribution]) -> list[Tensor]:
    """The squared norms of ``found``, those of a whole Gram batch summed in one operation
    (every term of a batch in ``found``)."""
    out, batches = [], {}
    for c in found:
        lazy = c.lazy_norm
        if lazy is None:
            out.append(c.norm_sq)
        else:
            batches.setdefault(id(lazy.batch), (lazy.batch, []))[1].append(lazy.k)
    for batch, ks in batches.values():
        norms = batch.norms()
        out.append(norms.sum(0) if len(ks) == norms.shape[0] else norms[ks].sum(0))
    return out


def _side_by_side(found: list[Contribution], dtype: torch.dtype) -> Tensor:
    """``(B, P)``: the per-subgraph gradients of ``found`` side by side; a view of a batch's
    sums when they are its consecutive columns (no copy), else one concatenation."""
    cols = [c.columns for c in found]
    if cols[0] is not None and all(
            c is not None and c.batch is cols[0].batch and c.lo == prev.hi
            for prev, c in zip(cols, cols[1:])):
        whole = cols[0].batch.total()
        if whole.dtype == dtype:
            return whole[:, cols[0].lo:cols[-1].hi]
    parts = [_as(c.per_segment, dtype) for c in found]
    return parts[0] if len(parts) == 1 else torch.cat(parts, 1)


def _laid_out(parts: list[tuple[list[str], Tensor]], params: dict[str, nn.Parameter],
              dtype: torch.dtype) -> dict[str, Tensor]:
    """The clipped sums in the model's parameter order (the noise is one draw over them
    laid end to end: its coordinates follow that order), as views of one flat vector (a
    `FlatSums`), or, for parameters of several dtypes, one tensor each. ``parts``: the
    flat clipped sums of consecutive parameters (``names``)."""
    order = list(params)
    if [n for names, _ in parts for n in names] != order:
        found = {}
        for names, flat in parts:
            found.update(zip(names, flat.split([params[n].numel() for n in names])))
        parts = [([n], found[n]) for n in order]
    if all(p.dtype == dtype for p in params.values()):
        values = [_as(v, dtype) for _, v in parts]
        flat = (values[0] if len(values) == 1 else torch.cat(values) if values
                else torch.zeros(0, dtype=dtype))
        return unflatten(flat, params)
    return {names[0]: _as(v, params[names[0]].dtype).view(params[names[0]].shape)
            for names, v in parts}


def clip_and_sum(capture: FlatCapture, losses: Tensor, groups: Sequence[ClipGroup], *,
                 row_mask: Tensor | None = None) -> ClippedGradients:
    """Clipped gradient sum from a recorded forward pass (ONE backward).

    Args:
        capture: the capture whose `FlatCapture.recording` saw the forward.
        losses: per-subgraph losses ``(B,)``.
        groups: clip groups from `resolve_groups`.
        row_mask: optional ``(B, R)`` mask of real rows of padded subgraphs.
    """
    num = losses.shape[0]
    try:
        capture.backward(losses, row_mask)
        layout = BatchLayout.for_subgraphs(num, losses.device)
        with torch.no_grad():
            contributions = capture.contributions(layout)
            named = trainable(capture.model)
            return clip_contributions(contributions, named, groups, num, device=losses.device)
    finally:
        capture.reset()


def clipped_gradient_sum(model: nn.Module, closure: Callable[[], Tensor], *,
                         clip_norm: float | Sequence[ClipGroup],
                         row_mask: Tensor | None = None) -> ClippedGradients:
    """Per-subgraph clipped gradient sum of ``model`` in one forward and one backward.

    Args:
        model: a model whose trainable modules all have a rule (`check_model`) and take
            the subgraph index as the leading dimension of their input.
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
    capture = FlatCapture(model, fallback=False)
    with capture.recording():
        losses = closure()
    return clip_and_sum(capture, losses, groups, row_mask=row_mask)
