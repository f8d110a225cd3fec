"""Segment algebra: per-subgraph sums and Gram products over rows grouped by subgraph.

A batch of disjoint subgraphs stored PyG-style has all rows of all subgraphs stacked, with
``seg[r]`` the subgraph of row ``r`` (``Data.batch``). The ghost-clipping rules need, per
subgraph ``i``, quantities like ``‖Σ_{r∈i} δ_r a_rᵀ‖²``. `segment_buckets` groups
subgraphs of equal size (up to 4 rows) or of similar size (powers of two beyond) and pads
each group to its largest member, so the padding never more than doubles the work even when
one subgraph is a thousand times larger than the others (a hub's star); a single global
padding to the largest subgraph could. The grouping is computed once per batch and shared by
every layer; each layer then gathers its rows in one ``index_select`` per tensor.
For small weights `segment_chunks` is cheaper still: every subgraph's rows cut into chunks of
16, one batched product for all chunks and one sum per subgraph, with no per-class loop.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

__all__ = ["Bucket", "Buckets", "Chunks", "segment_buckets", "segment_chunks", "segment_sum",
           "linear_norms_sq", "chunked_linear_grads"]

#: subgraphs of at most this many rows are grouped by exact size (no padding)
EXACT_SIZES = 4


@dataclass(frozen=True)
class Bucket:
    """Subgraphs of one size class.

    Attributes:
        segments: ``(S,)`` subgraph ids.
        rows: ``(S, L)`` row ids of each subgraph, ``-1`` beyond its size.
        valid: ``(S, L)`` bool, ``rows >= 0``.
        offset: where the bucket's ``S L`` rows start in `Buckets.flat_rows`.
    """

    segments: Tensor
    rows: Tensor
    valid: Tensor
    offset: int = 0
    #: first row when the bucket's rows are one contiguous block in subgraph order (no
    #: padding): then a layer's rows are read as a view, with no copy
    start: int | None = None

    @property
    def width(self) -> int:
        return int(self.rows.shape[1])

    def gather(self, t: Tensor) -> Tensor:
        """``(S, L, *t.shape[1:])`` rows of ``t``, zero where padded."""
        out = t.index_select(0, self.rows.clamp_min(0).reshape(-1)).view(
            *self.rows.shape, *t.shape[1:])
        if bool(self.valid.all()):
            return out
        mask = self.valid.view(*self.valid.shape, *([1] * (t.dim() - 1)))
        return out * mask.to(out.dtype)


@dataclass(frozen=True)
class Buckets:
    """The buckets of one batch and their rows laid end to end (for one gather per tensor).

    Attributes:
        buckets: the `Bucket` list (width-1 bucket first when present).
        flat_rows: every bucket's ``rows`` flattened and concatenated (padding -> row 0).
        flat_valid: matching validity, as a float column (zeroes padded rows).
        padded: whether any row is padding.
    """

    buckets: list
    flat_rows: Tensor
    flat_valid: Tensor
    padded: bool

    def __iter__(self):
        return iter(self.buckets)

    def gather(self, t: Tensor, *, zero_padding: bool = True) -> Tensor:
        """The rows of ``t`` of every bucket that is not a contiguous block, in one
        ``index_select`` (padded rows zeroed)."""
        if self.flat_rows.numel() == 0:
            return t[:0]
        out = t.index_select(0, self.flat_rows)
        if zero_padding and self.padded:
            out = out * self.flat_valid.to(out.dtype).view(-1, *([1] * (t.dim() - 1)))
        return out

    @staticmethod
    def view(flat: Tensor, b: Bucket, t: Tensor | None = None) -> Tensor:
        """Bucket ``b``'s ``(S, L, ...)`` rows: a view of ``t`` itself for a contiguous
        bucket, else its block of the `gather` result ``flat``."""
        size = b.rows.numel()
        if b.start is not None and t is not None:
            return t[b.start:b.start + size].view(*b.rows.shape, *t.shape[1:])
        return flat[b.offset:b.offset + size].view(*b.rows.shape, *flat.shape[1:])


def segment_buckets(seg: Tensor, num_segments: int) -> Buckets:
    """Group the rows of each subgraph: subgraphs of the same size up to
    `EXACT_SIZES` together, larger ones by powers of two (``5-8``, ``9-16``, ...);
    empty subgraphs are left out.

    Args:
        seg: ``(R,)`` subgraph id of every row, in ``[0, num_segments)``, any order.
        num_segments: ``B``.
    """
    counts = torch.bincount(seg, minlength=num_segments)
    order = torch.argsort(seg, stable=True)
    starts = torch.cumsum(counts, 0) - counts
    nonzero = counts > 0
    size_class = counts.clone()
    big = counts > EXACT_SIZES
    size_class[big] = EXACT_SIZES + torch.ceil(torch.log2(counts[big].double())).long()
    out, offset = [], 0
    for k in torch.unique(size_class[nonzero]).tolist():
        segs = (nonzero & (size_class == k)).nonzero().flatten()
        width = int(counts[segs].max())
        pos = torch.arange(width, device=seg.device)
        valid = pos.unsqueeze(0) < counts[segs].unsqueeze(1)
        idx = (starts[segs].unsqueeze(1) + pos.unsqueeze(0)).clamp_max(max(seg.numel() - 1, 0))
        rows = torch.where(valid, order[idx], torch.full_like(idx, -1))
        first = int(rows[0, 0])
        block = bool(valid.all()) and bool(
            (rows.reshape(-1) == torch.arange(first, first + rows.numel(),
                                              device=seg.device)).all())
        if block:
            out.append(Bucket(segs, rows, valid, -1, first))
        else:
            out.append(Bucket(segs, rows, valid, offset))
            offset += rows.numel()
    empty = torch.zeros(0, dtype=torch.long, device=seg.device)
    gathered = [b for b in out if b.start is None]
    flat = torch.cat([b.rows.reshape(-1) for b in gathered]) if gathered else empty
    valid = torch.cat([b.valid.reshape(-1) for b in gathered]) if gathered else empty.bool()
    return Buckets(out, flat.clamp_min(0), valid, bool((~valid).any()))


def segment_sum(t: Tensor, seg: Tensor, num_segments: int) -> Tensor:
    """``(B, *t.shape[1:])``: the sum of the rows of each subgraph."""
    out = torch.zeros((num_segments, *t.shape[1:]), dtype=t.dtype, device=t.device)
    return out.index_add_(0, seg, t)


#: elements of one Gram or per-subgraph-gradient temporary (about 64 MB in float32)
CHUNK_ELEMENTS = 16 * 2 ** 20


def linear_norms_sq(a: Tensor, d: Tensor, buckets: Buckets, num_segments: int) -> Tensor:
    """``‖Σ_{r∈i} d_r a_rᵀ‖²_F`` for every subgraph ``i`` of a linear map's weight.

    Per bucket of ``S`` subgraphs of at most ``L`` rows it takes the cheaper of two exact
    forms: the Gram form ``Σ_{r,r'} ⟨d_r,d_r'⟩⟨a_r,a_r'⟩`` (``S L² (p+q)`` flops) or the
    materialised per-subgraph gradient ``d_iᵀ a_i`` (``S L p q`` flops), chunked so that no
    temporary exceeds `CHUNK_ELEMENTS`. The rows are gathered once for all buckets;
    only ``d``'s padded rows are zeroed (a zero ``d_r`` removes row ``r`` from both forms).

    Args:
        a: ``(R, q)`` layer inputs; d: ``(R, p)`` gradients of the layer outputs.
    """
    out = torch.zeros(num_segments, dtype=d.dtype, device=d.device)
    p, q = d.shape[1], a.shape[1]
    da, aa = buckets.gather(d), buckets.gather(a, zero_padding=False)
    for b in buckets:
        db, ab = Buckets.view(da, b, d), Buckets.view(aa, b, a)
        if b.width == 1:
            out[b.segments] = (torch.linalg.vector_norm(db[:, 0], dim=1).square()
                               * torch.linalg.vector_norm(ab[:, 0], dim=1).square())
            continue
        gram = b.width * (p + q) <= p * q
        per_seg = b.width * b.width if gram else p * q
        chunk = max(1, CHUNK_ELEMENTS // max(per_seg, 1))
        for s in range(0, b.segments.numel(), chunk):
            dp, ap = db[s:s + chunk], ab[s:s + chunk]
            if gram:
                val = (torch.bmm(dp, dp.transpose(1, 2)) * torch.bmm(ap, ap.transpose(1, 2))
                       ).sum((1, 2)).clamp_min(0)
            else:
                val = torch.bmm(dp.transpose(1, 2), ap).square().sum((1, 2))
            out[b.segments[s:s + chunk]] = val
    return out


#: rows per chunk of `segment_chunks`
CHUNK_ROWS = 16
#: largest ``p q`` (weight elements) for which `chunked_linear_grads` is used: the
#: per-chunk gradients cost ``p q`` per row, the Gram form ``L (p + q)`` per row
CHUNKED_MAX_WEIGHT = 4096


@dataclass(frozen=True)
class Chunks:
    """The rows of every subgraph cut into chunks of at most ``width`` rows (each chunk inside
    one subgraph; only a subgraph's last chunk is padded). With ``single_rows`` (no subgraph
    has two rows) chunk ``r`` is row ``r`` itself and ``owner`` is ``seg``.

    Attributes:
        rows: ``(K W,)`` row ids of the ``K`` chunks, padding -> row 0.
        valid: ``(K W, 1)`` float, zero on padded rows; ``None`` when nothing is padded.
        owner: ``(K,)`` the subgraph of each chunk.
        width: ``W``.
        one_per_segment: whether chunk ``k`` is subgraph ``k``'s only chunk (then no sum);
            with ``single_rows``, whether row ``r`` is subgraph ``r``.
        single_rows: whether no subgraph has more than one row.
    """

    rows: Tensor
    valid: Tensor | None
    owner: Tensor
    width: int
    one_per_segment: bool
    single_rows: bool = False

    @property
    def num_chunks(self) -> int:
        return int(self.owner.numel())


def segment_chunks(seg: Tensor, num_segments: int, width: int = CHUNK_ROWS) -> Chunks:
    """Cut the rows of each subgraph (``seg[r]`` its subgraph, any order) into chunks of
    ``W = min(width, largest subgraph)`` rows, all in a few vectorised operations: one layout
    per batch, shared by every layer on these rows.
    """
    device, total = seg.device, seg.numel()
    counts = torch.bincount(seg, minlength=num_segments)
    largest = int(counts.max()) if total else 0
    if largest <= 1:                          # one row per subgraph (pooled rows): no layout
        # every subgraph one row, in order: row r is subgraph r (then no sum at all)
        identity = total == num_segments and bool((seg[1:] > seg[:-1]).all())
        return Chunks(torch.arange(total, device=device), None, seg, 1, identity, True)
    w = max(1, min(width, largest))
    # a PyG batch's rows are already grouped by subgraph, in order: then no sort
    ordered = bool((seg[1:] >= seg[:-1]).all())
    order = None if ordered else torch.argsort(seg, stable=True)
    per = (counts + (w - 1)) // w                              # chunks of each subgraph
    owner = torch.repeat_interleave(torch.arange(num_segments, device=device), per)
    k = owner.numel()
    first = torch.cumsum(per, 0) - per
    pos = ((torch.arange(k, device=device) - first[owner]) * w).unsqueeze(1) + torch.arange(
        w, device=device).unsqueeze(0)                          # (K, W) place in subgraph
    valid = pos < counts[owner].unsqueeze(1)
    start = torch.cumsum(counts, 0) - counts
    idx = (start[owner].unsqueeze(1) + pos).clamp_max(max(total - 1, 0))
    rows = order[idx].reshape(-1) if order is not None else idx.reshape(-1)
    padded = not bool(valid.all())
    return Chunks(rows, valid.reshape(-1, 1).float() if padded else None, owner, w,
                  k == num_segments and bool((per == 1).all()), largest <= 1)


def chunked_linear_grads(a: Tensor, d: Tensor, chunks: Chunks, num_segments: int, *,
                         bias: bool = False) -> tuple[Tensor, Tensor | None]:
    """``(B, p q)``: every subgraph's gradient ``Σ_{r∈i} d_r a_rᵀ`` of a linear map's weight,
    flattened: ``g_k = d_kᵀ a_k`` for every chunk in one batched product, summed per subgraph
    (``index_add``). Exact; costs ``K W p q`` flops and a ``(B, p q)`` sum, with no
    per-size-class loop: the cheap form for small weights (``p q`` up to
    `CHUNKED_MAX_WEIGHT`) and many subgraphs of varied sizes. Kept by the Linear rule, the
    clipped sum is then ``c @ G`` (``B p q`` flops) instead of a second ``R p q`` product.

    With ``bias`` also ``(B, p)``, the bias's per-subgraph gradients ``Σ_{r∈i} d_r``, from the
    chunks' rows already gathered (a sum over ``K W`` rows and ``K`` chunk sums added per
    subgraph, not a second pass over the ``R`` rows); else ``None`` in its place. When each
    subgraph is one row (``chunks.one_per_segment`` with single rows: pooled rows in
    subgraph order) the rows' outer products are the gradients themselves (no sum).
    """
    p, q = d.shape[1], a.shape[1]
    if chunks.single_rows:                    # row r alone in subgraph owner[r]
        outer = (d.unsqueeze(2) * a.unsqueeze(1)).reshape(-1, p * q)
        if chunks.one_per_segment:            # row r is subgraph r
            return outer, (d if bias else None)
        return (torch.zeros(num_segments, p * q, dtype=d.dtype, device=d.device).index_add_(
            0, chunks.owner, outer), segment_sum(d, chunks.owner, num_segments) if bias else None)
    w, k = chunks.width, chunks.num_chunks
    step = max(1, CHUNK_ELEMENTS // max(p * q, 1))
    single = chunks.one_per_segment and k <= step
    total = None if single else torch.zeros(num_segments, p * q, dtype=d.dtype,
                                            device=d.device)
    bias_total = None if single or not bias else torch.zeros(num_segments, p, dtype=d.dtype,
                                                             device=d.device)
    for s in range(0, k, step):
        rows = chunks.rows[s * w:(s + step) * w]
        db = d.index_select(0, rows)
        if chunks.valid is not None:
            valid = chunks.valid[s * w:(s + step) * w]
            db = db * (valid if valid.dtype == db.dtype else valid.to(db.dtype))
        n = rows.numel() // w
        dv = db.view(n, w, p)
        g = torch.bmm(dv.transpose(1, 2), a.index_select(0, rows).view(n, w, q))
        chunk_bias = dv.sum(1) if bias else None       # padded rows of d are zero
        if single:
            return g.view(n, p * q), chunk_bias
        owner = chunks.owner[s:s + step]
        total.index_add_(0, owner, g.view(n, -1))
        if bias:
            bias_total.index_add_(0, owner, chunk_bias)
    return total, bias_total
