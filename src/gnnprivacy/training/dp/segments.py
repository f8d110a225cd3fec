"""Segment algebra: per-subgraph sums, norms and gradients over rows grouped by subgraph.

A batch of disjoint subgraphs stores the rows of all its subgraphs stacked, ``seg[r]`` the
subgraph of row ``r`` (PyG's ``Data.batch``); the padded layout of the built-in trainers is
the special case of ``width`` consecutive rows per subgraph (`Segments.regular`). A
`Segments` is built once per row mapping and step, and shared by every layer on those rows.

For a linear map ``y = a Wᵀ`` the gradient of subgraph ``i`` is ``g_i = Σ_{r∈i} d_r a_rᵀ``
(``d`` the output gradient). Its squared norm has two exact forms:

* the Gram ("ghost") form ``Σ_{r,r'∈i} ⟨d_r,d_r'⟩⟨a_r,a_r'⟩``: ``L² (p + q)`` flops for a
  subgraph of ``L`` rows, no ``p q`` temporary. Computed from row pairs: every row's own term
  and each pair ``r < r'`` inside one subgraph once (`Segments.pairs`);
* the materialised form ``‖d_iᵀ a_i‖²``: ``L p q`` flops, from chunks of at most `CHUNK_ROWS`
  rows of one subgraph, one batched product for all chunks and one sum per subgraph
  (`Segments.chunks`).

`linear_weight_norms` takes the Gram form for the subgraphs of at most
``pq / (p + q)`` rows (rounded down to a power of two, at most `PAIR_LIMIT`) and the
materialised form for larger ones, in pieces of at most `MATERIALISE_ELEMENTS`, so no
``(subgraphs x p q)`` matrix is formed beyond that budget. The clipped sum is then the
product a plain backward computes, each row scaled by its subgraph's clip factor
(book-keeping, Bu et al. 2023). `keep_materialised` is the cost model that instead keeps the
per-subgraph gradients (when they fit the budget and cost less than the Gram form plus that
product: few large subgraphs, as in graph classification); the clipped sum is then ``c @ G``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

__all__ = ["CHUNK_ROWS", "Chunks", "MATERIALISE_ELEMENTS", "PAIR_LIMIT", "Pairs", "Segments",
           "keep_materialised", "linear_weight_grads", "linear_weight_norms", "segment_sum"]

#: rows per chunk of the materialised form
CHUNK_ROWS = 16
#: the most elements of one materialised per-subgraph-gradient block (8 MiB in float32)
MATERIALISE_ELEMENTS = 2 ** 21
#: subgraphs of more rows than this never take the Gram form (their pairs grow as ``L²``)
PAIR_LIMIT = 64


def segment_sum(t: Tensor, seg: Tensor, num_segments: int) -> Tensor:
    """``(B, *t.shape[1:])``: the sum of the rows of each subgraph."""
    out = torch.zeros((num_segments, *t.shape[1:]), dtype=t.dtype, device=t.device)
    return out.index_add_(0, seg, t)


@dataclass(frozen=True)
class Pairs:
    """Row pairs ``r < r'`` inside one subgraph, for subgraphs of 2 to ``limit`` rows.

    Attributes:
        first, second: ``(P,)`` row ids of each pair.
        owner: ``(P,)`` the subgraph of each pair.
    """

    first: Tensor
    second: Tensor
    owner: Tensor


@dataclass(frozen=True)
class Chunks:
    """The rows of the subgraphs of more than ``above`` rows, cut into chunks of ``width``
    rows inside one subgraph (a subgraph's last chunk padded).

    Attributes:
        rows: ``(K W,)`` row ids, padding -> row 0.
        valid: ``(K W, 1)`` float, 0 on padded rows; ``None`` when nothing is padded.
        owner: ``(K,)`` the position of each chunk's subgraph in ``segments``.
        segments: ``(S,)`` the subgraphs covered, in order; ``None`` for all of them.
        bounds: ``S + 1`` host offsets: the chunks of the ``j``-th subgraph are
            ``bounds[j]:bounds[j + 1]``.
        width: ``W``.
    """

    rows: Tensor
    valid: Tensor | None
    owner: Tensor
    segments: Tensor | None
    bounds: list
    width: int

    @property
    def num_segments(self) -> int:
        return len(self.bounds) - 1


class Segments:
    """Rows grouped by subgraph, with what the rules derive from the grouping (computed
    on first use and kept: one object per row mapping and step).

    Args:
        seg: ``(R,)`` subgraph of every row, in ``[0, num)``, any order; ``None`` with
            ``width``.
        num: ``B``.
        width: every subgraph is ``width`` consecutive rows (row ``i W + k`` is row ``k`` of
            subgraph ``i``): the padded layout, whose operations read no size on the host.
    """

    def __init__(self, seg: Tensor | None, num: int, *, width: int | None = None,
                 device: torch.device | None = None):
        if seg is None and width is None:
            raise ValueError("Segments needs seg or width")
        self.num, self.width = int(num), width
        self._seg = seg
        self.device = seg.device if seg is not None else device
        self._cache: dict = {}

    @classmethod
    def regular(cls, num: int, width: int, device) -> Segments:
        return cls(None, num, width=int(width), device=device)

    # ------------------------------------------------------------------ layout facts
    @property
    def seg(self) -> Tensor:
        if self._seg is None:
            ids = torch.arange(self.num, device=self.device)
            self._seg = ids if self.width == 1 else ids.repeat_interleave(self.width)
        return self._seg

    @property
    def rows(self) -> int:
        return self.num * self.width if self.width is not None else int(self._seg.numel())

    @property
    def identity(self) -> bool:
        """Row ``r`` is subgraph ``r`` (one row per subgraph, in order)."""
        if self.width is not None:
            return self.width == 1
        key = "identity"
        if key not in self._cache:
            seg = self._seg
            self._cache[key] = seg.numel() == self.num and bool(
                (seg == torch.arange(self.num, device=seg.device)).all())
        return self._cache[key]

    @property
    def counts(self) -> Tensor:
        """``(B,)`` rows per subgraph."""
        if "counts" not in self._cache:
            self._cache["counts"] = (
                torch.full((self.num,), self.width, device=self.device, dtype=torch.long)
                if self.width is not None else torch.bincount(self._seg, minlength=self.num))
        return self._cache["counts"]

    @property
    def histogram(self) -> list[int]:
        """``h[L]``: the number of subgraphs of ``L`` rows (one host read per batch)."""
        if "hist" not in self._cache:
            if self.width is not None:
                hist = [0] * (self.width + 1)
                hist[self.width] = self.num
            else:
                hist = torch.bincount(self.counts).tolist() if self.num else [0]
            self._cache["hist"] = hist
        return self._cache["hist"]

    @property
    def largest(self) -> int:
        hist = self.histogram
        return max((n for n, k in enumerate(hist) if k), default=0)

    @property
    def single(self) -> bool:
        """No subgraph has more than one row."""
        return self.width == 1 if self.width is not None else self.largest <= 1

    @property
    def ordered(self) -> bool:
        """The rows are grouped by subgraph in subgraph order (every PyG batch's node rows)."""
        if self.width is not None:
            return True
        if "ordered" not in self._cache:
            seg = self._seg
            self._cache["ordered"] = bool((seg[1:] >= seg[:-1]).all())
        return self._cache["ordered"]

    def _order(self) -> Tensor | None:
        """Row ids in subgraph order, or ``None`` when already in it."""
        if self.ordered:
            return None
        if "order" not in self._cache:
            self._cache["order"] = torch.argsort(self._seg, stable=True)
        return self._cache["order"]

    def repeat(self, k: int) -> Segments:
        """The segments of ``k`` consecutive rows per row (an input ``(R, k, q)`` of a layer
        whose output rows these are), cached."""
        if k == 1:
            return self
        key = ("repeat", k)
        if key not in self._cache:
            self._cache[key] = (Segments.regular(self.num, self.width * k, self.device)
                                if self.width is not None
                                else Segments(self._seg.repeat_interleave(k), self.num))
        return self._cache[key]

    # ------------------------------------------------------------------ per-row maps
    def sum(self, t: Tensor) -> Tensor:
        """``(B, ...)``: the sum of each subgraph's rows of ``t`` (``R`` rows)."""
        if self.width is not None:
            return t if self.width == 1 else t.view(self.num, self.width, *t.shape[1:]).sum(1)
        if self.identity:
            return t
        return segment_sum(t, self._seg, self.num)

    def expand(self, c: Tensor) -> Tensor:
        """``(R,)``: every row's value of the per-subgraph ``c``."""
        if self.width is not None:
            return c if self.width == 1 else c.repeat_interleave(self.width)
        return c if self.identity else c[self._seg]

    # ------------------------------------------------------------------ pairs and chunks
    def limit_for(self, p: int, q: int) -> int:
        """The largest subgraph size whose Linear norms take the Gram form: ``pq / (p + q)``
        rounded down to a power of two, at least 1 and at most `PAIR_LIMIT`."""
        bound = (p * q) / max(p + q, 1)
        limit = 1
        while limit * 2 <= bound and limit * 2 <= PAIR_LIMIT:
            limit *= 2
        return limit

    def pair_count(self, limit: int) -> int:
        return sum(k * n * (n - 1) // 2 for n, k in enumerate(self.histogram[:limit + 1]))

    def padded_rows_above(self, limit: int, width: int) -> tuple[int, int]:
        """``(chunks, padded rows)`` of the chunks of the subgraphs of more than ``limit``
        rows."""
        chunks = sum(k * -(-n // width) for n, k in enumerate(self.histogram) if n > limit)
        return chunks, chunks * width

    def chunk_width(self) -> int:
        return max(1, min(CHUNK_ROWS, self.largest))

    def pairs(self, limit: int) -> Pairs:
        """`Pairs` of the subgraphs of 2 to ``limit`` rows (cached per ``limit``)."""
        key = ("pairs", limit)
        if key in self._cache:
            return self._cache[key]
        seg, device = self.seg, self.device
        counts = self.counts
        order = self._order()
        sorted_seg = seg if order is None else seg[order]
        size = counts[sorted_seg]                                   # (R,) size of row's subgraph
        start = (torch.cumsum(counts, 0) - counts)[sorted_seg]
        pos = torch.arange(sorted_seg.numel(), device=device)
        inside = pos - start
        eligible = (size >= 2) & (size <= limit)
        partners = torch.where(eligible, size - 1 - inside, torch.zeros_like(size))
        total = int(partners.sum())
        first = torch.repeat_interleave(pos, partners)
        offsets = torch.cumsum(partners, 0) - partners
        second = first + 1 + (torch.arange(total, device=device) - offsets[first])
        owner = sorted_seg[first]
        if order is not None:
            first, second = order[first], order[second]
        out = Pairs(first, second, owner)
        self._cache[key] = out
        return out

    def chunks(self, above: int) -> Chunks:
        """`Chunks` of the subgraphs of more than ``above`` rows (cached per ``above``)."""
        key = ("chunks", above)
        if key in self._cache:
            return self._cache[key]
        device, counts, w = self.device, self.counts, self.chunk_width()
        if self.width is not None and above < self.width:
            segments, sel = None, counts
        else:
            big = counts > above
            segments = big.nonzero().flatten()
            sel = counts[segments]
            if segments.numel() == self.num:
                segments = None
        per = (sel + (w - 1)) // w                                  # chunks of each subgraph
        s = int(sel.numel())
        owner = torch.repeat_interleave(torch.arange(s, device=device), per)
        k = int(owner.numel())
        first = torch.cumsum(per, 0) - per
        slot = ((torch.arange(k, device=device) - first[owner]) * w).unsqueeze(1) \
            + torch.arange(w, device=device).unsqueeze(0)           # (K, W) place in subgraph
        valid = slot < sel[owner].unsqueeze(1)
        starts = torch.cumsum(counts, 0) - counts
        seg_start = starts if segments is None else starts[segments]
        idx = (seg_start[owner].unsqueeze(1) + slot).clamp_max(max(self.rows - 1, 0))
        order = self._order()
        rows = (idx if order is None else order[idx]).reshape(-1)
        padded = not bool(valid.all())
        bounds = [0] + torch.cumsum(per, 0).tolist()
        out = Chunks(rows, valid.reshape(-1, 1).float() if padded else None, owner, segments,
                     bounds, w)
        self._cache[key] = out
        return out


# ---------------------------------------------------------------------------- Linear maps
def keep_materialised(segs: Segments, p: int, q: int) -> bool:
    """Whether a ``p x q`` Linear map keeps its per-subgraph gradients ``G`` (clipped sum
    ``c @ G``) rather than ghost norms and the scaled-rows product: when ``B p q`` fits
    `MATERIALISE_ELEMENTS` and the chunked products plus ``c @ G`` cost fewer flops than the
    Gram form of the small subgraphs, the chunked products of the large ones and the
    ``R p q`` product of the clipped sum."""
    if segs.num * p * q > MATERIALISE_ELEMENTS or segs.rows == 0:
        return False
    pq = p * q
    if segs.width is not None:
        w = segs.width
        ghost = (w * w * (p + q) if w * (p + q) <= pq else w * pq) * segs.num
        return w * pq * segs.num + 2 * segs.num * pq < ghost + segs.rows * pq
    width = segs.chunk_width()
    limit = segs.limit_for(p, q)
    chunks_all, padded_all = segs.padded_rows_above(0, width)
    _, padded_big = segs.padded_rows_above(limit, width)
    ghost = 2 * segs.pair_count(limit) * (p + q) + padded_big * pq + segs.rows * pq
    return padded_all * pq + chunks_all * pq + 2 * segs.num * pq < ghost


def linear_weight_grads(a: Tensor, d: Tensor, segs: Segments) -> Tensor:
    """``(B, p q)``: every subgraph's gradient ``Σ_{r∈i} d_r a_rᵀ`` of a linear map's
    weight, flattened (the caller keeps ``B p q`` within budget: `keep_materialised`)."""
    p, q = d.shape[1], a.shape[1]
    if segs.single and segs.identity:
        return (d.unsqueeze(2) * a.unsqueeze(1)).reshape(-1, p * q)
    if segs.width is not None:
        w = segs.width
        return torch.bmm(d.view(segs.num, w, p).transpose(1, 2),
                         a.view(segs.num, w, q)).reshape(segs.num, p * q)
    if segs.single:
        return segment_sum((d.unsqueeze(2) * a.unsqueeze(1)).reshape(-1, p * q), segs.seg,
                           segs.num)
    chunks = segs.chunks(0)
    grads = _chunk_grads(a, d, chunks, chunks.num_segments)
    if chunks.segments is None:
        return grads
    out = torch.zeros(segs.num, p * q, dtype=d.dtype, device=d.device)
    out[chunks.segments] = grads                 # empty subgraphs: zero
    return out


def _chunk_grads(a: Tensor, d: Tensor, chunks: Chunks, num: int) -> Tensor:
    """Per-subgraph gradients of ``chunks``' subgraphs, ``(S, p q)`` (one batched product
    over the chunks, summed per subgraph)."""
    p, q, w = d.shape[1], a.shape[1], chunks.width
    rows = chunks.rows
    db = d.index_select(0, rows)
    if chunks.valid is not None:
        db = db * chunks.valid.to(db.dtype)
    k = rows.numel() // w
    g = torch.bmm(db.view(k, w, p).transpose(1, 2), a.index_select(0, rows).view(k, w, q))
    s = chunks.num_segments
    if k == s:                                # one chunk per subgraph: no sum
        return g.view(s, p * q)
    return torch.zeros(s, p * q, dtype=d.dtype, device=d.device).index_add_(
        0, chunks.owner, g.view(k, p * q))


def linear_weight_norms(a: Tensor, d: Tensor, segs: Segments) -> Tensor:
    """``(B,)`` squared norms ``‖Σ_{r∈i} d_r a_rᵀ‖²`` of a linear map's per-subgraph weight
    gradients, exact, without a ``(B x p q)`` matrix beyond `MATERIALISE_ELEMENTS`: the Gram
    form for small subgraphs, the materialised form in pieces for large ones (see the
    module docstring).

    Args:
        a: ``(R, q)`` layer inputs; d: ``(R, p)`` gradients of the layer outputs.
    """
    p, q = d.shape[1], a.shape[1]
    num = segs.num
    if segs.rows == 0 or num == 0:
        return torch.zeros(num, dtype=d.dtype, device=d.device)
    if segs.single:
        own = _row_sq(d) * _row_sq(a)
        return own if segs.identity else segment_sum(own, segs.seg, num)
    if segs.width is not None:
        return _regular_norms(a, d, segs)
    limit = segs.limit_for(p, q)
    hist = segs.histogram
    out = None
    if any(hist[1:limit + 1]):               # subgraphs of 1 to limit rows: Gram form
        # every row's own term (the large subgraphs' rows too: overwritten below)
        out = segment_sum(_row_sq(d) * _row_sq(a), segs.seg, num)
        if limit >= 2 and any(hist[2:limit + 1]):
            pairs = segs.pairs(limit)
            dd = (d.index_select(0, pairs.first) * d.index_select(0, pairs.second)).sum(1)
            aa = (a.index_select(0, pairs.first) * a.index_select(0, pairs.second)).sum(1)
            out.index_add_(0, pairs.owner, 2 * dd * aa)
        out = out.clamp_min_(0)
    if segs.largest > limit:                 # the materialised form, in pieces
        chunks = segs.chunks(limit)
        big = _chunked_norms(a, d, chunks)
        if chunks.segments is None:
            return big
        if out is None:
            out = torch.zeros(num, dtype=d.dtype, device=d.device)
        out[chunks.segments] = big
    return out if out is not None else torch.zeros(num, dtype=d.dtype, device=d.device)


def _row_sq(t: Tensor) -> Tensor:
    return torch.linalg.vector_norm(t, dim=1).square()


def _regular_norms(a: Tensor, d: Tensor, segs: Segments) -> Tensor:
    """Norms for ``W`` rows per subgraph (the padded layout): Gram or materialised form,
    whichever costs less, in pieces of at most `MATERIALISE_ELEMENTS`."""
    p, q, w, num = d.shape[1], a.shape[1], segs.width, segs.num
    dv, av = d.view(num, w, p), a.view(num, w, q)
    gram = w * (p + q) <= p * q
    per = w * w if gram else p * q
    step = max(1, MATERIALISE_ELEMENTS // max(per, 1))
    parts = []
    for s in range(0, num, step):
        dp, ap = dv[s:s + step], av[s:s + step]
        if gram:
            parts.append((torch.bmm(dp, dp.transpose(1, 2))
                          * torch.bmm(ap, ap.transpose(1, 2))).sum((1, 2)).clamp_min(0))
        else:
            parts.append(torch.bmm(dp.transpose(1, 2), ap).square().sum((1, 2)))
    return parts[0] if len(parts) == 1 else torch.cat(parts)


def _chunked_norms(a: Tensor, d: Tensor, chunks: Chunks) -> Tensor:
    """``(S,)`` squared norms of the per-subgraph gradients of ``chunks``' subgraphs,
    materialised for at most `MATERIALISE_ELEMENTS` elements at a time."""
    p, q, w = d.shape[1], a.shape[1], chunks.width
    s = chunks.num_segments
    step = max(1, MATERIALISE_ELEMENTS // max(p * q, 1))
    if s <= step:
        return _chunk_grads(a, d, chunks, s).square().sum(1)
    parts = []
    for j in range(0, s, step):
        top = min(j + step, s)
        lo, hi = chunks.bounds[j], chunks.bounds[top]
        part = Chunks(chunks.rows[lo * w:hi * w],
                      None if chunks.valid is None else chunks.valid[lo * w:hi * w],
                      chunks.owner[lo:hi] - j, None,
                      [b - lo for b in chunks.bounds[j:top + 1]], w)
        parts.append(_chunk_grads(a, d, part, part.num_segments).square().sum(1))
    return torch.cat(parts)
