"""The segment algebra of the Linear rule against a naive per-subgraph loop: ghost norms
(Gram form from row pairs for small subgraphs, materialised chunks for large ones, in pieces
under the memory budget) and materialised gradients, with subgraphs of every size, empty
ones, hubs, rows in any order (PyG batches are contiguous, the engine accepts any ``seg``)
and the padded layout of the built-in trainers. Broken controls: a Gram form without its
pairs and chunks that cross subgraphs both fail the same comparison."""

import pytest
import torch

from gnnprivacy.training.dp import segments
from gnnprivacy.training.dp.segments import (Chunks, Segments, keep_materialised,
                                             linear_weight_grads, linear_weight_norms)


def _naive(a, d, seg, num):
    """(norms², per-subgraph gradients) of ``Σ_{r∈i} d_r a_rᵀ``, one subgraph at a time."""
    grads = torch.stack([(d[seg == i].t() @ a[seg == i]).flatten() for i in range(num)])
    return grads.square().sum(1), grads


def _case(trial: int, *, num_high: int = 30, size_high: int = 6, dim_high: int = 40):
    """Random subgraph ids (some subgraphs empty, every third batch with a hub of 20-200
    rows, rows in order or shuffled), inputs ``a`` and output gradients ``d``."""
    gen = torch.Generator().manual_seed(trial)
    num = int(torch.randint(1, num_high, (), generator=gen))
    sizes = torch.randint(0, size_high, (num,), generator=gen)
    if trial % 3 == 0:
        sizes[0] = int(torch.randint(20, 200, (), generator=gen))
    seg = torch.repeat_interleave(torch.arange(num), sizes)
    if trial % 2:
        seg = seg[torch.randperm(seg.numel(), generator=gen)]
    p, q = (int(v) for v in torch.randint(1, dim_high, (2,), generator=gen))
    a = torch.randn(seg.numel(), q, dtype=torch.float64, generator=gen)
    d = torch.randn(seg.numel(), p, dtype=torch.float64, generator=gen)
    return seg, num, a, d


@pytest.mark.parametrize("trial", range(30))
def test_norms_and_gradients_equal_a_per_subgraph_loop(trial):
    seg, num, a, d = _case(trial)
    norms, grads = _naive(a, d, seg, num)
    torch.testing.assert_close(linear_weight_norms(a, d, Segments(seg, num)), norms,
                               rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(linear_weight_grads(a, d, Segments(seg, num)), grads,
                               rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("trial", range(0, 30, 3))
def test_the_materialised_form_in_pieces_equals_the_loop(trial, monkeypatch):
    """Under a budget of 50 elements every large subgraph is its own piece."""
    seg, num, a, d = _case(trial)
    monkeypatch.setattr(segments, "MATERIALISE_ELEMENTS", 50)
    torch.testing.assert_close(linear_weight_norms(a, d, Segments(seg, num)),
                               _naive(a, d, seg, num)[0], rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("width", [1, 2, 5])
def test_the_padded_layout_equals_the_loop(width):
    gen = torch.Generator().manual_seed(width)
    num, p, q = 7, 6, 9
    seg = torch.arange(num).repeat_interleave(width)
    a = torch.randn(num * width, q, dtype=torch.float64, generator=gen)
    d = torch.randn(num * width, p, dtype=torch.float64, generator=gen)
    d[1::3] = 0.0                                     # padded rows carry no gradient
    norms, grads = _naive(a, d, seg, num)
    regular = Segments.regular(num, width, a.device)
    torch.testing.assert_close(linear_weight_norms(a, d, regular), norms, rtol=1e-10, atol=0)
    torch.testing.assert_close(linear_weight_grads(a, d, regular), grads, rtol=1e-10, atol=0)
    torch.testing.assert_close(regular.sum(d), torch.stack(
        [d[seg == i].sum(0) for i in range(num)]))


def test_an_empty_batch_has_no_norms():
    a, d = torch.zeros(0, 3), torch.zeros(0, 2)
    assert linear_weight_norms(a, d, Segments(torch.zeros(0, dtype=torch.long), 0)).shape == (0,)
    assert linear_weight_norms(a, d, Segments(torch.zeros(0, dtype=torch.long), 3)).tolist() \
        == [0.0, 0.0, 0.0]


def test_pairs_are_each_pair_of_one_small_subgraph_once():
    seg = torch.tensor([1, 0, 1, 0, 0, 2, 1, 3, 3, 3, 3, 3])
    segs = Segments(seg, 5)
    pairs = segs.pairs(4)                             # subgraph 3 (5 rows) is above 4
    got = sorted(zip(pairs.first.tolist(), pairs.second.tolist()))
    want = sorted((min(r, s), max(r, s)) for r in range(12) for s in range(12)
                  if r < s and seg[r] == seg[s] and int(seg[r]) != 3)
    assert sorted((min(r, s), max(r, s)) for r, s in got) == want
    assert (seg[pairs.first] == pairs.owner).all() and (seg[pairs.second] == pairs.owner).all()


def test_chunks_stay_inside_one_subgraph():
    seg = torch.tensor([1, 0, 1, 0, 0, 2, 1, 2, 2])
    chunks = Segments(seg, 4).chunks(1)               # subgraphs of 2 rows or more
    w = chunks.width
    rows = chunks.rows.view(-1, w)
    valid = (chunks.valid.view(-1, w).bool() if chunks.valid is not None
             else torch.ones_like(rows, dtype=torch.bool))
    covered = chunks.segments
    for k in range(rows.shape[0]):
        assert (seg[rows[k][valid[k]]] == covered[chunks.owner[k]]).all()
    assert sorted(chunks.rows[valid.view(-1)].tolist()) == list(range(9))


def test_a_gram_form_without_its_pairs_fails_the_comparison(monkeypatch):
    """Broken control: rows of one subgraph taken as separate examples (no cross terms)."""
    seg, num, a, d = _case(1)
    norms = _naive(a, d, seg, num)[0]
    empty = torch.zeros(0, dtype=torch.long)
    monkeypatch.setattr(Segments, "pairs",
                        lambda self, limit: segments.Pairs(empty, empty, empty))
    got = linear_weight_norms(a, d, Segments(seg, num))
    assert not torch.allclose(got, norms, rtol=1e-6)


def test_chunks_that_cross_subgraphs_fail_the_comparison(monkeypatch):
    """Broken control: every chunk's owner shifted to the next subgraph."""
    seg, num, a, d = _case(3)
    norms = _naive(a, d, seg, num)[0]
    original = Segments.chunks

    def shifted(self, above):
        c = original(self, above)
        owner = (c.owner + 1) % c.num_segments
        return Chunks(c.rows, c.valid, owner, c.segments, c.per, c.width)

    monkeypatch.setattr(Segments, "chunks", shifted)
    assert not torch.allclose(linear_weight_norms(a, d, Segments(seg, num)), norms, rtol=1e-6)


def test_the_cost_model_keeps_gradients_for_few_large_subgraphs_only():
    """Graph classification (64 graphs of about 40 rows, 32x32 weights) keeps the
    per-graph gradients; 10,000 stars of 1-3 rows never do (B p q past the budget, and the
    Gram form is cheaper); one row per subgraph takes the scaled-rows product."""
    gen = torch.Generator().manual_seed(0)
    graphs = torch.arange(64).repeat_interleave(torch.randint(20, 60, (64,), generator=gen))
    assert keep_materialised(Segments(graphs, 64), 32, 32)
    stars = torch.arange(10_000).repeat_interleave(torch.randint(1, 4, (10_000,),
                                                                 generator=gen))
    assert not keep_materialised(Segments(stars, 10_000), 32, 32)
    small_stars = torch.arange(100).repeat_interleave(torch.randint(1, 4, (100,),
                                                                    generator=gen))
    assert not keep_materialised(Segments(small_stars, 100), 32, 32)
    assert not keep_materialised(Segments.regular(64, 1, "cpu"), 32, 32)


@pytest.mark.parametrize("dtype, tol", [(torch.float32, 2e-6), (torch.float64, 1e-12)])
def test_the_layer_norm_rules_normalised_input_equals_torchs(dtype, tol):
    """The LayerNorm rule writes ``x̂`` out (cheaper than ``F.layer_norm`` on a CPU): the
    same values, over one or several trailing dimensions."""
    from torch.nn import functional as F

    from gnnprivacy.training.dp.flat_rules import _normalised

    gen = torch.Generator().manual_seed(0)
    for rows in (50, 1000):             # torch's own below NATIVE_NORM_ELEMENTS, written out
        x = (torch.randn(rows, 4, 8, generator=gen, dtype=torch.float64) * 3 + 1).to(dtype)
        for shape in ((8,), (4, 8)):
            torch.testing.assert_close(_normalised(x, shape, 1e-5),
                                       F.layer_norm(x, shape, eps=1e-5), rtol=tol, atol=tol)


@pytest.mark.parametrize("wide", [True, False])
@pytest.mark.parametrize("trial", range(12))
def test_the_batched_gram_norms_equal_the_loop(trial, wide, monkeypatch):
    """Two Linear maps (one with its bias) and a parameter with per-row gradients on the same
    rows, in one `GramNorms` batch: every term equals the per-subgraph loop, for small
    subgraphs (pairs), hubs (materialised chunks) and empty subgraphs; with the tensors laid
    side by side (small batches) and one kernel per tensor (large ones). The clipped sums of
    the row-wise terms equal the weighted row sums."""
    monkeypatch.setattr(segments, "WIDE_ELEMENTS", 2 ** 40 if wide else 0)
    monkeypatch.setattr(segments, "WIDE_COLUMNS", 2 ** 40 if wide else 0)
    seg, num, a, d = _case(trial)
    gen = torch.Generator().manual_seed(100 + trial)
    a2 = torch.randn(seg.numel(), 5, dtype=torch.float64, generator=gen)
    d2 = torch.randn(seg.numel(), 3, dtype=torch.float64, generator=gen)
    x = torch.randn(seg.numel(), 7, dtype=torch.float64, generator=gen)
    segs = Segments(seg, num)
    batch = segs.gram(torch.float64)
    w1, b1 = batch.add(a, d, segs.limit_for(d.shape[1], a.shape[1]), bias=True)
    w2, none = batch.add(a2, d2, segs.limit_for(3, 5))
    rows, block = batch.add_rows(x)
    assert none is None
    sums = [torch.stack([t[seg == i].sum(0) for i in range(num)]) for t in (d, x)]
    want = [_naive(a, d, seg, num)[0], sums[0].square().sum(1), _naive(a2, d2, seg, num)[0],
            sums[1].square().sum(1)]
    for got, ref in zip((w1, b1, w2, rows), want):
        torch.testing.assert_close(got.resolve(), ref, rtol=1e-10, atol=1e-10)
    c = torch.rand(num, dtype=torch.float64, generator=gen)
    torch.testing.assert_close(batch.weighted(block, c), (c[seg].unsqueeze(1) * x).sum(0))
