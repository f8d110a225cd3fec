"""Per-subgraph Linear norms: the chunked form (`segment_chunks`) and the size buckets
against a naive per-subgraph loop, with subgraphs of every size, empty ones, and rows in
any order (PyG batches are contiguous, the engine accepts any ``seg``)."""

import pytest
import torch

from gnnprivacy.training.dp.segments import (chunked_linear_grads, linear_norms_sq,
                                             segment_buckets, segment_chunks)


def chunked_linear_norms_sq(a, d, chunks, num):
    """The squared norms of the chunked per-subgraph gradients (what the Linear rule clips)."""
    return chunked_linear_grads(a, d, chunks, num)[0].square().sum(1)


def _naive(a, d, seg, num):
    return torch.stack([(d[seg == i].t() @ a[seg == i]).square().sum() for i in range(num)])


def _case(trial: int, *, num_high: int, size_high: int, dim_high: int):
    """Random subgraph ids (some subgraphs empty, rows in order or shuffled), inputs ``a``,
    output gradients ``d`` and a chunk width."""
    gen = torch.Generator().manual_seed(trial)
    num = int(torch.randint(1, num_high, (), generator=gen))
    sizes = torch.randint(0, size_high, (num,), generator=gen)
    seg = torch.repeat_interleave(torch.arange(num), sizes)
    if trial % 2:
        seg = seg[torch.randperm(seg.numel(), generator=gen)]
    p, q = (int(v) for v in torch.randint(1, dim_high, (2,), generator=gen))
    a = torch.randn(seg.numel(), q, dtype=torch.float64, generator=gen)
    d = torch.randn(seg.numel(), p, dtype=torch.float64, generator=gen)
    return seg, num, a, d, int(torch.randint(1, 6, (), generator=gen))


@pytest.mark.parametrize("trial", range(24))
def test_chunked_norms_equal_a_per_subgraph_loop(trial):
    # one row per subgraph, or many
    seg, num, a, d, width = _case(trial, num_high=20, size_high=2 if trial % 3 == 0 else 40,
                                  dim_high=9)
    ref = _naive(a, d, seg, num)
    got = chunked_linear_norms_sq(a, d, segment_chunks(seg, num, width=width), num)
    torch.testing.assert_close(got, ref, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(linear_norms_sq(a, d, segment_buckets(seg, num), num), ref,
                               rtol=1e-10, atol=1e-12)


def test_chunks_stay_inside_one_subgraph():
    seg = torch.tensor([1, 0, 1, 0, 0, 2, 1])
    chunks = segment_chunks(seg, 3, width=2)
    rows = chunks.rows.view(-1, 2)
    valid = chunks.valid.view(-1, 2).bool()
    for k in range(chunks.num_chunks):
        assert (seg[rows[k][valid[k]]] == chunks.owner[k]).all()
    # every row exactly once among the valid places
    assert sorted(chunks.rows[chunks.valid.view(-1).bool()].tolist()) == list(range(7))


def test_one_row_per_subgraph_needs_its_own_rows_summed():
    """Width 1 with several rows per subgraph must sum the rows' outer products before the
    norm (the sum of the rows' norms is wrong): the broken shortcut is caught."""
    seg = torch.tensor([0, 0, 1])
    a, d = torch.tensor([[1.0], [1.0], [2.0]]), torch.tensor([[1.0], [1.0], [1.0]])
    got = chunked_linear_norms_sq(a, d, segment_chunks(seg, 2, width=1), 2)
    torch.testing.assert_close(got, torch.tensor([4.0, 4.0]))


@pytest.mark.parametrize("trial", range(12))
def test_chunked_grads_equal_each_subgraphs_own_gradient(trial):
    """The per-subgraph weight gradients the Linear rule keeps (its clipped sum is then
    ``c @ G``): each row is that subgraph's ``d_iᵀ a_i``, for one row per subgraph too."""
    seg, num, a, d, width = _case(100 + trial, num_high=12,
                                  size_high=2 if trial % 4 == 0 else 30, dim_high=7)
    ref = torch.stack([(d[seg == i].t() @ a[seg == i]).flatten() for i in range(num)])
    ref_bias = torch.stack([d[seg == i].sum(0) for i in range(num)])
    chunks = segment_chunks(seg, num, width=width)
    got, none = chunked_linear_grads(a, d, chunks, num)
    torch.testing.assert_close(got, ref, rtol=1e-10, atol=1e-12)
    assert none is None
    got, bias = chunked_linear_grads(a, d, chunks, num, bias=True)
    torch.testing.assert_close(got, ref, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(bias, ref_bias, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("seg, identity", [
    ([0, 1, 2, 3], True),           # pooled rows: row r is subgraph r, used as they are
    ([1, 0, 2, 3], False),          # one row each, out of order: summed into place
    ([0, 2, 3], False),             # an empty subgraph (1)
    ([0, 0, 2, 3], False)])         # not one row each (two rows of 0)
def test_one_row_per_subgraph_in_order_is_its_own_gradient(seg, identity):
    """Rows of a pooled (one row per subgraph) layer in subgraph order are the gradients
    themselves; any other single-row layout is summed per subgraph. The identity shortcut
    taken for the out-of-order rows would give subgraph 0 the gradient of subgraph 1."""
    seg = torch.tensor(seg)
    gen = torch.Generator().manual_seed(1)
    a = torch.randn(seg.numel(), 3, dtype=torch.float64, generator=gen)
    d = torch.randn(seg.numel(), 2, dtype=torch.float64, generator=gen)
    chunks = segment_chunks(seg, 4, width=4)
    assert chunks.one_per_segment is identity
    got, bias = chunked_linear_grads(a, d, chunks, 4, bias=True)
    ref = torch.stack([(d[seg == i].t() @ a[seg == i]).flatten() for i in range(4)])
    torch.testing.assert_close(got, ref, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(bias, torch.stack([d[seg == i].sum(0) for i in range(4)]),
                               rtol=1e-12, atol=1e-12)


def test_rows_in_subgraph_order_are_not_sorted_again():
    """A PyG batch's rows come grouped by subgraph: the layout is the rows themselves, in
    order (the same chunks a sort would give)."""
    seg = torch.tensor([0, 0, 0, 1, 2, 2, 2, 2, 2])
    chunks = segment_chunks(seg, 3, width=2)
    kept = chunks.rows[chunks.valid.view(-1).bool()]
    assert kept.tolist() == list(range(9))
    assert chunks.owner.tolist() == [0, 0, 1, 2, 2, 2]


@pytest.mark.parametrize("dtype, tol", [(torch.float32, 2e-6), (torch.float64, 1e-12)])
def test_the_layer_norm_rules_normalised_input_equals_torchs(dtype, tol):
    """The LayerNorm rule writes ``x̂`` out (cheaper than ``F.layer_norm`` on a CPU): the
    same values, over one or several trailing dimensions."""
    from torch.nn import functional as F

    from gnnprivacy.training.dp.flat_rules import _normalised

    gen = torch.Generator().manual_seed(0)
    x = (torch.randn(50, 4, 8, generator=gen, dtype=torch.float64) * 3 + 1).to(dtype)
    for shape in ((8,), (4, 8)):
        torch.testing.assert_close(_normalised(x, shape, 1e-5),
                                   F.layer_norm(x, shape, eps=1e-5), rtol=tol, atol=tol)
