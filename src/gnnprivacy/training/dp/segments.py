"""Segment algebra: per-subgraph sums and Gram products over rows grouped by subgraph.

A batch of disjoint subgraphs stored PyG-style has all rows of all subgraphs stacked, with
``seg[r]`` the subgraph of row ``r`` (``Data.batch``). The ghost-clipping rules need, per
subgraph ``i``, quantities like ``‖Σ_{r∈i} δ_r a_rᵀ‖²``. :func:`segment_buckets` groups
subgraphs of similar size (powers of two) and pads each group to its largest member, so the
padding never more than doubles the work even when one subgraph is a thousand times larger
than the others (a hub's star); a single global padding to the largest subgraph could.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

__all__ = ["Bucket", "segment_buckets", "segment_sum", "linear_norms_sq"]


@dataclass(frozen=True)
class Bucket:
    """Subgraphs of one size class.

    Attributes:
        segments: ``(S,)`` subgraph ids.
        rows: ``(S, L)`` row ids of each subgraph, ``-1`` beyond its size.
        valid: ``(S, L)`` bool, ``rows >= 0``.
    """

    segments: Tensor
    rows: Tensor
    valid: Tensor

    def gather(self, t: Tensor) -> Tensor:
        """``(S, L, *t.shape[1:])`` rows of ``t``, zero where padded (``index_select`` on
        the flat ids: several times faster than 2-D advanced indexing on CPU)."""
        out = t.index_select(0, self.rows.clamp_min(0).reshape(-1)).view(
            *self.rows.shape, *t.shape[1:])
        if bool(self.valid.all()):
            return out
        mask = self.valid.view(*self.valid.shape, *([1] * (t.dim() - 1)))
        return out * mask.to(out.dtype)


def segment_buckets(seg: Tensor, num_segments: int) -> list[Bucket]:
    """Group the rows of each subgraph, subgraphs bucketed by size (``1``, ``2``, ``3-4``,
    ``5-8``, ...); empty subgraphs are left out.

    Args:
        seg: ``(R,)`` subgraph id of every row, in ``[0, num_segments)``, any order.
        num_segments: ``B``.
    """
    counts = torch.bincount(seg, minlength=num_segments)
    order = torch.argsort(seg, stable=True)
    starts = torch.cumsum(counts, 0) - counts
    nonzero = counts > 0
    size_class = torch.zeros_like(counts)
    size_class[nonzero] = torch.ceil(torch.log2(counts[nonzero].double())).long()
    out = []
    for k in torch.unique(size_class[nonzero]).tolist():
        segs = (nonzero & (size_class == k)).nonzero().flatten()
        width = int(counts[segs].max())
        pos = torch.arange(width, device=seg.device)
        valid = pos.unsqueeze(0) < counts[segs].unsqueeze(1)
        idx = (starts[segs].unsqueeze(1) + pos.unsqueeze(0)).clamp_max(max(seg.numel() - 1, 0))
        rows = torch.where(valid, order[idx], torch.full_like(idx, -1))
        out.append(Bucket(segs, rows, valid))
    return out


def segment_sum(t: Tensor, seg: Tensor, num_segments: int) -> Tensor:
    """``(B, *t.shape[1:])``: the sum of the rows of each subgraph."""
    out = torch.zeros((num_segments, *t.shape[1:]), dtype=t.dtype, device=t.device)
    return out.index_add_(0, seg, t)


def linear_norms_sq(a: Tensor, d: Tensor, buckets: list[Bucket], num_segments: int) -> Tensor:
    """``‖Σ_{r∈i} d_r a_rᵀ‖²_F`` for every subgraph ``i`` of a linear map's weight.

    Per bucket of ``S`` subgraphs of at most ``L`` rows it takes the cheaper of two exact
    forms: the Gram form ``Σ_{r,r'} ⟨d_r,d_r'⟩⟨a_r,a_r'⟩`` (``S L² (p+q)`` flops) or the
    materialised per-subgraph gradient ``d_iᵀ a_i`` (``S L p q`` flops), chunked so that no
    temporary exceeds about 64 MB.

    Args:
        a: ``(R, q)`` layer inputs; d: ``(R, p)`` gradients of the layer outputs.
    """
    out = torch.zeros(num_segments, dtype=d.dtype, device=d.device)
    p, q = d.shape[1], a.shape[1]
    for b in buckets:
        width = b.rows.shape[1]
        if width == 1:
            rows = b.rows[:, 0]
            out[b.segments] = (torch.linalg.vector_norm(d.index_select(0, rows), dim=1).square()
                               * torch.linalg.vector_norm(a.index_select(0, rows),
                                                          dim=1).square())
            continue
        gram = width * (p + q) <= p * q
        per_seg = width * width if gram else p * q
        chunk = max(1, (16 * 2**20) // max(per_seg, 1))
        for s in range(0, b.segments.numel(), chunk):
            part = Bucket(b.segments[s:s + chunk], b.rows[s:s + chunk], b.valid[s:s + chunk])
            dp, ap = part.gather(d), part.gather(a)
            if gram:
                val = (torch.bmm(dp, dp.transpose(1, 2)) * torch.bmm(ap, ap.transpose(1, 2))
                       ).sum((1, 2)).clamp_min(0)
            else:
                val = torch.bmm(dp.transpose(1, 2), ap).square().sum((1, 2))
            out[part.segments] = val
    return out
