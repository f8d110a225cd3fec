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

import math
from dataclasses import dataclass

import torch
from torch import Tensor

__all__ = ["CHUNK_ROWS", "Chunks", "ColumnSums", "GramNorms", "LazyColumns", "LazyRow",
           "MATERIALISE_ELEMENTS", "PAIR_LIMIT", "Pairs", "Segments", "keep_materialised",
           "linear_weight_grads", "linear_weight_norms", "segment_sum"]

#: rows per chunk of the materialised form
CHUNK_ROWS = 16
#: the most elements of one materialised per-subgraph-gradient block (8 MiB in float32)
MATERIALISE_ELEMENTS = 2 ** 21
#: subgraphs of more rows than this never take the Gram form (their pairs grow as ``L²``)
PAIR_LIMIT = 64
#: rows x trained parameters up to which every parameter on a row mapping keeps its per-row
#: gradients, summed per subgraph in one scatter (`Segments.per_row`): a few operations for
#: the whole model, where the Gram form's few dozen cost more than the data they touch
ROW_ELEMENTS = 2 ** 19


def segment_sum(t: Tensor, seg: Tensor, num_segments: int) -> Tensor:
    """``(B, *t.shape[1:])``: the sum of the rows of each subgraph."""
    out = torch.zeros((num_segments, *t.shape[1:]), dtype=t.dtype, device=t.device)
    return out.index_add_(0, seg, t)


@dataclass(frozen=True)
class Pairs:
    """Row pairs ``r < r'`` inside one subgraph, of the subgraphs of 2 to ``limit`` rows.

    Attributes:
        first, second: ``(P,)`` row ids of each pair.
        owner: ``(P,)`` the subgraph of each pair.
    """

    first: Tensor
    second: Tensor
    owner: Tensor


@dataclass(frozen=True)
class Chunks:
    """The rows of some subgraphs cut into chunks of ``width`` rows inside one subgraph (a
    subgraph's last chunk padded).

    Attributes:
        rows: ``(K W,)`` row ids, padding -> row 0.
        valid: ``(K W, 1)`` float, 0 on padded rows; ``None`` when nothing is padded.
        owner: ``(K,)`` the position of each chunk's subgraph in ``segments``.
        segments: ``(S,)`` the subgraphs covered, in order.
        per: ``(S,)`` chunks of each subgraph.
        width: ``W``.
    """

    rows: Tensor
    valid: Tensor | None
    owner: Tensor
    segments: Tensor
    per: Tensor
    width: int

    @property
    def num_segments(self) -> int:
        return int(self.segments.numel())

    def pieces(self, most: int) -> list[tuple[int, int, int, int]]:
        """``(first subgraph, end, first chunk, end)`` of consecutive pieces of at most
        ``most`` subgraphs."""
        ends = torch.cumsum(self.per, 0).tolist()
        s = len(ends)
        return [(j, min(j + most, s), ends[j - 1] if j else 0, ends[min(j + most, s) - 1])
                for j in range(0, s, most)]

    def part(self, s0: int, s1: int, k0: int, k1: int) -> Chunks:
        w = self.width
        return Chunks(self.rows[k0 * w:k1 * w],
                      None if self.valid is None else self.valid[k0 * w:k1 * w],
                      self.owner[k0:k1] - s0, self.segments[s0:s1], self.per[s0:s1], w)


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
        #: every parameter on these rows materialises its per-subgraph gradients from its
        #: per-row ones (`ColumnSums`: one sum for all of them, the clipped sum ``c @ G``),
        #: set by the capture for small batches (`ROW_ELEMENTS`); else Gram norms
        self.per_row: bool | None = None

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
    def counts(self) -> Tensor:
        """``(B,)`` rows per subgraph."""
        if "counts" not in self._cache:
            self._cache["counts"] = (
                torch.full((self.num,), self.width, device=self.device, dtype=torch.long)
                if self.width is not None else torch.bincount(self._seg, minlength=self.num))
        return self._cache["counts"]

    @property
    def sizes(self) -> list[tuple[int, int]]:
        """``[(L, n), ...]``: ``n`` subgraphs of ``L`` rows, ascending ``L`` (``n > 0``; one
        host read per batch)."""
        if "sizes" not in self._cache:
            if self.width is not None:
                sizes = [(self.width, self.num)] if self.num else []
            elif self.num:
                values, times = torch.unique(self.counts, return_counts=True)
                sizes = list(zip(values.tolist(), times.tolist()))
            else:
                sizes = []
            self._cache["sizes"] = sizes
        return self._cache["sizes"]

    @property
    def largest(self) -> int:
        return self.sizes[-1][0] if self.sizes else 0

    @property
    def single(self) -> bool:
        """No subgraph has more than one row."""
        return self.width == 1 if self.width is not None else self.largest <= 1

    @property
    def identity(self) -> bool:
        """Row ``r`` is subgraph ``r`` (one row per subgraph, in order)."""
        if self.width is not None:
            return self.width == 1
        if "identity" not in self._cache:
            seg = self._seg
            self._cache["identity"] = (seg.numel() == self.num and self.largest <= 1 and bool(
                (seg == torch.arange(self.num, device=seg.device)).all()))
        return self._cache["identity"]

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
        """``(R,)``: every row's value of the per-subgraph ``c`` (computed once per ``c``:
        every layer on these rows reads the same clip factors)."""
        if self.width is not None:
            return c if self.width == 1 else c.repeat_interleave(self.width)
        if self.identity:
            return c
        found = self._cache.get("expand")
        if found is None or found[0] is not c:     # the entry keeps c: its id stays unique
            found = self._cache["expand"] = (c, c[self._seg])
        return found[1]

    def gram(self, dtype: torch.dtype) -> GramNorms:
        """The batch of Linear ghost norms on these rows (one per dtype and step)."""
        key = ("gram", dtype)
        if key not in self._cache:
            self._cache[key] = GramNorms(self)
        return self._cache[key]

    def columns(self, dtype: torch.dtype) -> ColumnSums:
        """The batch of per-row columns summed per subgraph on these rows."""
        key = ("columns", dtype)
        if key not in self._cache:
            self._cache[key] = ColumnSums(self)
        return self._cache[key]

    # ------------------------------------------------------------------ costs (host)
    def limit_for(self, p: int, q: int) -> int:
        """The largest subgraph size whose Linear norms take the Gram form: ``pq / (p + q)``
        rounded down to a power of two, at least 1 and at most `PAIR_LIMIT`."""
        bound = (p * q) / max(p + q, 1)
        limit = 1
        while limit * 2 <= bound and limit * 2 <= PAIR_LIMIT:
            limit *= 2
        return limit

    def pair_count(self, limit: int) -> int:
        """Pairs of rows inside the subgraphs of at most ``limit`` rows."""
        key = ("pair_count", limit)
        if key not in self._cache:
            self._cache[key] = sum(n * size * (size - 1) // 2 for size, n in self.sizes
                                   if size <= limit)
        return self._cache[key]

    def chunk_width(self) -> int:
        return max(1, min(CHUNK_ROWS, self.largest))

    def chunk_count(self, above: int) -> tuple[int, int]:
        """``(subgraphs, chunks)`` of the subgraphs of more than ``above`` rows."""
        key = ("chunk_count", above)
        if key not in self._cache:
            w = self.chunk_width()
            big = [(size, n) for size, n in self.sizes if size > above]
            self._cache[key] = (sum(n for _, n in big), sum(n * -(-size // w) for size, n in big))
        return self._cache[key]

    # ------------------------------------------------------------------ pairs and chunks
    def _grouped(self) -> tuple[Tensor | None, Tensor, Tensor]:
        """``(order, subgraph of each position, first position of each subgraph)``: the row
        ids grouped by subgraph (``None``: the rows already are, as a PyG batch's node rows)."""
        if "grouped" not in self._cache:
            seg, counts = self.seg, self.counts
            order = None if self.width is not None or bool((seg[1:] >= seg[:-1]).all()) \
                else torch.argsort(seg, stable=True)
            self._cache["grouped"] = (order, seg if order is None else seg[order],
                                      torch.cumsum(counts, 0) - counts)
        return self._cache["grouped"]

    def pairs(self, limit: int) -> Pairs:
        """`Pairs` of the subgraphs of 2 to ``limit`` rows (cached per ``limit``)."""
        key = ("pairs", limit)
        if key not in self._cache:
            order, grouped, start = self._grouped()
            counts = self.counts
            pos = torch.arange(self.rows, device=self.device)
            length = counts[grouped]
            partners = torch.where((length >= 2) & (length <= limit),
                                   length - 1 - (pos - start[grouped]), torch.zeros_like(length))
            total = self.pair_count(limit)
            first = torch.repeat_interleave(pos, partners, output_size=total)
            offsets = torch.cumsum(partners, 0) - partners
            second = first + 1 + (torch.arange(total, device=self.device) - offsets[first])
            owner = grouped[first]
            if order is not None:
                first, second = order[first], order[second]
            self._cache[key] = Pairs(first, second, owner)
        return self._cache[key]

    def chunks(self, above: int) -> Chunks:
        """`Chunks` of the subgraphs of more than ``above`` rows (cached per ``above``)."""
        key = ("chunks", above)
        if key in self._cache:
            return self._cache[key]
        order, _, start = self._grouped()
        counts, w = self.counts, self.chunk_width()
        s, k = self.chunk_count(above)
        segments = torch.arange(self.num, device=self.device) if s == self.num else \
            (counts > above).nonzero().flatten()
        sel = counts[segments]
        per = (sel + (w - 1)) // w                               # chunks of each subgraph
        owner = torch.repeat_interleave(torch.arange(s, device=self.device), per,
                                        output_size=k)
        first = torch.cumsum(per, 0) - per
        slot = ((torch.arange(k, device=self.device) - first[owner]) * w).unsqueeze(1) \
            + torch.arange(w, device=self.device).unsqueeze(0)  # (K, W) place in subgraph
        padded = any(size % w for size, _ in self.sizes if size > above)
        valid = ((slot < sel[owner].unsqueeze(1)).reshape(-1, 1).to(torch.float32)
                 if padded else None)
        idx = (start[segments][owner].unsqueeze(1) + slot).clamp_max(max(self.rows - 1, 0))
        rows = idx.reshape(-1) if order is None else order[idx.reshape(-1)]
        out = Chunks(rows, valid, owner, segments, per, w)
        self._cache[key] = out
        return out


# ---------------------------------------------------------------------------- batches
#: `GramNorms` lays all its tensors side by side (a few operations for every layer, with
#: block sums as one product) while rows x width x blocks is at most this; beyond, it takes
#: one fused kernel per tensor (the block product's extra work would cost more)
WIDE_ELEMENTS = 2 ** 20
#: ... and while the blocks are at most this wide together (a layer of several hundred
#: inputs: one fused kernel per tensor is about twice as fast, measured on a CPU)
WIDE_COLUMNS = 512


class GramNorms:
    """Ghost norms of the parameters on one row mapping, computed together on first read.

    Two kinds of terms: a Linear map's weight (``‖Σ_{r∈i} d_r a_rᵀ‖²``, with its bias
    ``‖Σ_{r∈i} d_r‖²`` from the same ``⟨d_r, d_r'⟩``), and a parameter whose per-row
    gradients are rows ``x_r`` (``‖Σ_{r∈i} x_r‖²``: a normalisation's weight and bias, a
    bias added after message passing, GIN's eps). For the subgraphs of at most ``limit``
    rows (the largest limit of the maps, `Segments.limit_for`) the Gram form: every row's
    own term, then each pair's cross term, summed per subgraph for all the terms at once
    (two scatters for every layer on these rows); larger subgraphs are materialised in
    chunks (`_chunked_norms`). The clipped sums of the row-wise terms, ``Σ_r c_{seg(r)}
    x_r``, come from one product for all of them (`weighted`)."""

    def __init__(self, segs: Segments):
        self.segs = segs
        self.tensors: list[Tensor] = []      # the blocks: each (R, width)
        self.terms: list[tuple[int, int | None]] = []   # blocks multiplied (None: alone)
        self.limit = 1
        self.linear: list[tuple[int, int, int, bool]] = []   # (term, d block, a block, bias)
        self._norms: Tensor | None = None
        self._weighted: tuple | None = None

    def _block(self, t: Tensor) -> int:
        if self._norms is not None:
            raise RuntimeError("GramNorms: a term added after the norms were read")
        self.tensors.append(t)
        return len(self.tensors) - 1

    def add(self, a: Tensor, d: Tensor, limit: int, *, bias: bool = False
            ) -> tuple[LazyRow, LazyRow | None]:
        """A Linear map's weight (and bias): their lazy norms."""
        self.limit = max(self.limit, limit)
        bd, ba = self._block(d), self._block(a)
        self.linear.append((len(self.terms), bd, ba, bias))
        self.terms.append((bd, ba))
        weight = LazyRow(self, len(self.terms) - 1)
        if not bias:
            return weight, None
        self.terms.append((bd, None))
        return weight, LazyRow(self, len(self.terms) - 1)

    def add_rows(self, x: Tensor) -> tuple[LazyRow, int]:
        """A parameter with per-row gradients ``x`` ``(R, n)``: its lazy norms and its
        block (for `weighted`)."""
        self.limit = max(self.limit, min(16, PAIR_LIMIT))
        block = self._block(x)
        self.terms.append((block, None))
        return LazyRow(self, len(self.terms) - 1), block

    def norms(self) -> Tensor:
        """``(terms, B)`` squared norms."""
        if self._norms is None:
            self._norms = self._compute()
        return self._norms

    def weighted(self, block: int, c: Tensor) -> Tensor:
        """``Σ_r c_{seg(r)} x_r`` of a block (``c`` the per-subgraph factors): one product
        for every block when they are laid side by side."""
        c_rows = self.segs.expand(c)
        wide = self._wide()
        if wide is None:
            t = self.tensors[block]
            return c_rows.to(t.dtype) @ t
        if self._weighted is None or self._weighted[0] is not c_rows:
            x, edges = wide[0], wide[1]
            self._weighted = (c_rows, c_rows.to(x.dtype) @ x, edges)
        _, summed, edges = self._weighted
        return summed[edges[block]:edges[block + 1]]

    def _wide(self):
        """``(X, block edges, indicator)`` with every block side by side, when small enough
        (`WIDE_ELEMENTS`), else ``None``."""
        if "wide" not in self.__dict__:
            edges = [0]
            for t in self.tensors:
                edges.append(edges[-1] + t.shape[1])
            if (self.segs.rows * edges[-1] * len(self.tensors) > WIDE_ELEMENTS
                    or edges[-1] > WIDE_COLUMNS):
                self.wide = None
            else:
                x = self.tensors[0] if len(self.tensors) == 1 else torch.cat(self.tensors, 1)
                self.wide = (x, edges, _indicator(tuple(edges), x.dtype, x.device))
        return self.wide

    def _limit(self) -> int:
        """The largest subgraph the Gram form covers: the maps' limit, or every subgraph up
        to `PAIR_LIMIT` rows when their pairs cost little more (a few larger subgraphs of a
        batch of small ones are not worth the chunks' operations)."""
        segs, limit = self.segs, self.limit
        if segs.largest > limit:
            wider = min(segs.largest, PAIR_LIMIT)
            if segs.pair_count(wider) <= 2 * segs.pair_count(limit) + 4096:
                return wider
        return limit

    def _compute(self) -> Tensor:
        segs, terms = self.segs, self.terms
        limit, wide = self._limit(), self._wide()
        if wide is None:
            own = self._own_narrow()
        else:
            own = _term_products(_block_sums(wide[0] * wide[0], wide[2]), terms)
        dtype, device = own.dtype, own.device
        out = own if segs.identity else torch.zeros(
            len(terms), segs.num, dtype=dtype, device=device).index_add_(1, segs.seg, own)
        if segs.pair_count(limit):               # each pair's cross term
            pairs = segs.pairs(limit)
            if wide is None:
                cross = self._cross_narrow(pairs)
            else:
                x = wide[0]
                cross = _term_products(_block_sums(x.index_select(0, pairs.first)
                                                   * x.index_select(0, pairs.second), wide[2]),
                                       terms)
            out.index_add_(1, pairs.owner, cross, alpha=2)
        out.clamp_min_(0)
        if segs.largest > limit:                 # the larger subgraphs: materialised
            chunks = segs.chunks(limit)
            done = set()
            for term, bd, ba, bias in self.linear:
                weight, summed = _chunked_norms(self.tensors[ba], self.tensors[bd], chunks,
                                                bias=bias)
                out[term].index_put_((chunks.segments,), weight)
                if bias:
                    out[term + 1].index_put_((chunks.segments,), summed)
                    done.add(term + 1)
            for k, (block, other) in enumerate(terms):
                if other is None and k not in done:
                    out[k].index_put_((chunks.segments,),
                                      _chunk_sums(self.tensors[block], chunks).square().sum(1))
        return out

    def _own_narrow(self) -> Tensor:
        """``(terms, R)`` own terms, one fused kernel per tensor (large batches)."""
        ref = self.tensors[0]
        sq = [_row_sq(t) for t in self.tensors]
        own = torch.empty(len(self.terms), ref.shape[0], dtype=ref.dtype, device=ref.device)
        for k, (i, j) in enumerate(self.terms):
            if j is None:
                own[k] = sq[i]
            else:
                torch.mul(sq[i], sq[j], out=own[k])
        return own

    def _cross_narrow(self, pairs: Pairs) -> Tensor:
        dots = [_pair_dots(t, pairs) for t in self.tensors]
        cross = torch.empty(len(self.terms), pairs.first.numel(), dtype=dots[0].dtype,
                            device=dots[0].device)
        for k, (i, j) in enumerate(self.terms):
            if j is None:
                cross[k] = dots[i]
            else:
                torch.mul(dots[i], dots[j], out=cross[k])
        return cross


_INDICATORS: dict = {}


def _block_sums(prod: Tensor, indicator: Tensor) -> Tensor:
    """``(blocks, rows)``: the row sums of each block of ``prod``'s columns, one product
    (blocks as the product's rows: a BLAS product with about ten output columns takes
    several times longer on a CPU)."""
    return indicator @ prod.t()


def _indicator(edges: tuple, dtype, device) -> Tensor:
    """``(blocks, W)``: row ``j`` is 1 on block ``j``'s columns (block sums as one product),
    cached per layout."""
    key = (edges, dtype, str(device))
    found = _INDICATORS.get(key)
    if found is None:
        found = torch.zeros(len(edges) - 1, edges[-1], dtype=dtype, device=device)
        for j in range(len(edges) - 1):
            found[j, edges[j]:edges[j + 1]] = 1
        if len(_INDICATORS) > 256:
            _INDICATORS.clear()
        _INDICATORS[key] = found
    return found


def _term_products(blocks: Tensor, terms: list[tuple[int, int | None]]) -> Tensor:
    """``(terms, rows)``: each term's block sum times its partner's (or alone), from the
    ``(blocks, rows)`` sums."""
    with_one = torch.nn.functional.pad(blocks, (0, 0, 0, 1), value=1.0)
    last = blocks.shape[0]
    key = (tuple(terms), last, str(blocks.device))
    found = _INDICATORS.get(key)
    if found is None:
        found = _INDICATORS[key] = (
            torch.tensor([i for i, _ in terms], device=blocks.device),
            torch.tensor([last if j is None else j for _, j in terms], device=blocks.device))
    return with_one.index_select(0, found[0]) * with_one.index_select(0, found[1])


def _pair_dots(t: Tensor, pairs: Pairs) -> Tensor:
    """``⟨t_r, t_r'⟩`` of every pair."""
    return torch.linalg.vecdot(t.index_select(0, pairs.first), t.index_select(0, pairs.second))


class ColumnSums:
    """Per-row columns of several parameters (biases, normalisation weights, GIN's eps)
    on one row mapping, summed per subgraph in one operation on first read; the sums are
    the columns of one ``(B, N)`` matrix, which the clipping path reads whole."""

    def __init__(self, segs: Segments):
        self.segs = segs
        self.parts: list[Tensor] = []
        self.width = 0
        self._total: Tensor | None = None

    def add(self, rows: Tensor) -> LazyColumns:
        if self._total is not None:
            raise RuntimeError("ColumnSums: columns added after the sums were read")
        rows = rows.reshape(rows.shape[0], math.prod(rows.shape[1:]))
        self.parts.append(rows)
        lo = self.width
        self.width += rows.shape[1]
        return LazyColumns(self, lo, self.width)

    def total(self) -> Tensor:
        """``(B, N)``: every part's per-subgraph sums, side by side."""
        if self._total is None:
            rows = self.parts[0] if len(self.parts) == 1 else torch.cat(self.parts, 1)
            self._total = self.segs.sum(rows)
        return self._total


class LazyRow:
    """Row ``k`` of a `GramNorms` batch, read when the clipping path needs it."""

    __slots__ = ("batch", "k")

    def __init__(self, batch: GramNorms, k: int):
        self.batch, self.k = batch, k

    def resolve(self) -> Tensor:
        return self.batch.norms()[self.k]


class LazyColumns:
    """Columns ``lo:hi`` of a `ColumnSums` batch."""

    __slots__ = ("batch", "lo", "hi")

    def __init__(self, batch: ColumnSums, lo: int, hi: int):
        self.batch, self.lo, self.hi = batch, lo, hi

    def resolve(self) -> Tensor:
        return self.batch.total()[:, self.lo:self.hi]


# ---------------------------------------------------------------------------- Linear maps
def keep_materialised(segs: Segments, p: int, q: int) -> bool:
    """Whether a ``p x q`` Linear map keeps its per-subgraph gradients ``G`` (clipped sum
    ``c @ G``) rather than ghost norms and the scaled-rows product: when ``B p q`` fits
    `MATERIALISE_ELEMENTS` and the chunked products plus ``c @ G`` cost fewer flops than the
    Gram form of the small subgraphs, the chunked products of the large ones and the
    ``R p q`` product of the clipped sum."""
    key = ("keep", p, q)
    if key not in segs._cache:
        segs._cache[key] = _keep_materialised(segs, p, q)
    return segs._cache[key]


def _keep_materialised(segs: Segments, p: int, q: int) -> bool:
    if segs.num * p * q > MATERIALISE_ELEMENTS or segs.rows == 0 or segs.single:
        return False
    pq = p * q
    if segs.width is not None:
        w = segs.width
        ghost = (w * w * (p + q) if w * (p + q) <= pq else w * pq) * segs.num
        return w * pq * segs.num + 2 * segs.num * pq < ghost + segs.rows * pq
    w = segs.chunk_width()
    limit = segs.limit_for(p, q)
    _, chunks_all = segs.chunk_count(0)
    _, chunks_big = segs.chunk_count(limit)
    ghost = 2 * segs.pair_count(limit) * (p + q) + chunks_big * w * pq + segs.rows * pq
    return chunks_all * (w + 1) * pq + 2 * segs.num * pq < ghost


def linear_weight_grads(a: Tensor, d: Tensor, segs: Segments) -> Tensor:
    """``(B, p q)``: every subgraph's gradient ``Σ_{r∈i} d_r a_rᵀ`` of a linear map's
    weight, flattened (the caller keeps ``B p q`` within budget: `keep_materialised`)."""
    p, q = d.shape[1], a.shape[1]
    if segs.width is not None:
        w = segs.width
        dv, av = d.view(segs.num, w, p), a.view(segs.num, w, q)
        if q < p:
            return torch.bmm(av.transpose(1, 2), dv).transpose(1, 2).reshape(segs.num, p * q)
        return torch.bmm(dv.transpose(1, 2), av).reshape(segs.num, p * q)
    outer = None
    if segs.single:
        outer = (d.unsqueeze(2) * a.unsqueeze(1)).reshape(-1, p * q)
        return outer if segs.identity else segment_sum(outer, segs.seg, segs.num)
    chunks = segs.chunks(0)
    grads = _chunk_grads(a, d, chunks)
    if chunks.num_segments == segs.num:
        return grads
    out = torch.zeros(segs.num, p * q, dtype=d.dtype, device=d.device)
    out[chunks.segments] = grads                 # empty subgraphs: zero
    return out


def _chunk_grads(a: Tensor, d: Tensor, chunks: Chunks, *, ordered: bool = True) -> Tensor:
    """Per-subgraph gradients of ``chunks``' subgraphs, ``(S, p q)`` (one batched product
    over the chunks, summed per subgraph); without ``ordered`` each row may hold the
    transposed ``(q, p)`` gradient, flattened (enough for norms)."""
    p, q, w = d.shape[1], a.shape[1], chunks.width
    rows = chunks.rows
    db = d.index_select(0, rows)
    if chunks.valid is not None:
        db = db * chunks.valid.to(db.dtype)
    k = rows.numel() // w
    ab = a.index_select(0, rows).view(k, w, q)
    if q < p:                    # the narrow side as the products' rows (see `_scaled_product`)
        g = torch.bmm(ab.transpose(1, 2), db.view(k, w, p))
        if ordered:
            g = g.transpose(1, 2).contiguous()
    else:
        g = torch.bmm(db.view(k, w, p).transpose(1, 2), ab)
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
    out = None
    if segs.sizes[0][0] <= limit:            # subgraphs of at most limit rows: Gram form
        # every row's own term (the large subgraphs' rows too: overwritten below)
        out = segment_sum(_row_sq(d) * _row_sq(a), segs.seg, num)
        if segs.pair_count(limit):
            pairs = segs.pairs(limit)
            dd = (d.index_select(0, pairs.first) * d.index_select(0, pairs.second)).sum(1)
            aa = (a.index_select(0, pairs.first) * a.index_select(0, pairs.second)).sum(1)
            out.index_add_(0, pairs.owner, 2 * dd * aa)
        out = out.clamp_min_(0)
    if segs.largest > limit:                 # the materialised form, in pieces
        chunks = segs.chunks(limit)
        big = _chunked_norms(a, d, chunks)[0]
        if out is None and chunks.num_segments == num:
            return big
        if out is None:
            out = torch.zeros(num, dtype=d.dtype, device=d.device)
        out[chunks.segments] = big
    return out


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


def _chunk_sums(t: Tensor, chunks: Chunks) -> Tensor:
    """``(S, n)``: the sums of the rows of ``t`` of each of ``chunks``' subgraphs."""
    w = chunks.width
    tb = t.index_select(0, chunks.rows)
    if chunks.valid is not None:
        tb = tb * chunks.valid.to(tb.dtype)
    per_chunk = tb.view(-1, w, t.shape[1]).sum(1)
    if per_chunk.shape[0] == chunks.num_segments:
        return per_chunk
    return torch.zeros(chunks.num_segments, t.shape[1], dtype=t.dtype,
                       device=t.device).index_add_(0, chunks.owner, per_chunk)


def _chunked_norms(a: Tensor, d: Tensor, chunks: Chunks, *, bias: bool = False):
    """``(S,)`` squared norms of the per-subgraph weight gradients of ``chunks``'
    subgraphs (in their order), materialised for at most `MATERIALISE_ELEMENTS` elements at
    a time, and with ``bias`` those of the bias (else ``None``)."""
    p, q = d.shape[1], a.shape[1]
    step = max(1, MATERIALISE_ELEMENTS // max(p * q, 1))
    if chunks.num_segments <= step:
        weight = _chunk_grads(a, d, chunks, ordered=False).square().sum(1)
    else:
        weight = torch.cat([_chunk_grads(a, d, chunks.part(*piece), ordered=False)
                            .square().sum(1) for piece in chunks.pieces(step)])
    return weight, (_chunk_sums(d, chunks).square().sum(1) if bias else None)
