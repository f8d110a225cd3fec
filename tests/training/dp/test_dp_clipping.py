"""Batched per-subgraph clipping equals a per-subgraph loop (float64), G1-G3 of spec 000 §8."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn
from torch.nn import functional as F

from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.nn.dpgnn import OneLayerGCN
from gnnprivacy.nn.star import SelfScale, StarGNN
from gnnprivacy.training.dp import (ClipGroup, UnsupportedModuleError, check_model, clip_factors,
                                    clipped_gradient_sum, register_rule)
from gnnprivacy.training.dp import flat_rules

DT = torch.float64


# ----------------------------------------------------------------- reference
def loop_reference(model: nn.Module, loss_of, num: int, groups: list[ClipGroup]):
    """One backward per subgraph, per-group clipping, explicit sum (the oracle)."""
    names = [n for n, p in model.named_parameters() if p.requires_grad]
    params = [p for n, p in model.named_parameters() if p.requires_grad]
    total = {n: torch.zeros_like(p) for n, p in zip(names, params)}
    norms, clipped_norms = [], []
    for i in range(num):
        grads = torch.autograd.grad(loss_of(torch.tensor([i])).sum(), params, allow_unused=True)
        g = {n: (torch.zeros_like(p) if gr is None else gr)
             for n, p, gr in zip(names, params, grads)}
        norms.append(torch.sqrt(sum(v.square().sum() for v in g.values())))
        clipped_sq = 0.0
        for group in groups:
            gnorm = torch.sqrt(sum(g[n].square().sum() for n in group.names))
            c = min(1.0, group.clip_norm / float(gnorm)) if float(gnorm) > 0 else 1.0
            for n in group.names:
                total[n] += c * g[n]
                clipped_sq += (c * g[n]).square().sum()
        clipped_norms.append(torch.sqrt(torch.as_tensor(clipped_sq)))
    return total, torch.stack(norms) if norms else torch.zeros(0, dtype=DT), clipped_norms


def assert_matches_loop(model, loss_of, num, clip_norm, row_mask=None):
    """The equality test: engine sums and norms equal the loop reference."""
    res = clipped_gradient_sum(model, lambda: loss_of(torch.arange(num)), clip_norm=clip_norm,
                               row_mask=row_mask)
    groups = ([ClipGroup(tuple(n for n, _ in model.named_parameters()), clip_norm)]
              if isinstance(clip_norm, float) else list(clip_norm))
    ref, norms, _ = loop_reference(model, loss_of, num, groups)
    torch.testing.assert_close(res.norms, norms, rtol=1e-9, atol=1e-12)
    for n, v in ref.items():
        torch.testing.assert_close(res.sums[n], v, rtol=1e-9, atol=1e-12)
    return res


# ----------------------------------------------------------------- fixtures
def star_problem(aggregator: str, seed: int = 0, num_nodes: int = 30, num_centers: int = 9):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(num_nodes, 6, generator=g, dtype=DT)
    y = torch.randint(0, 3, (num_nodes,), generator=g)
    centers = torch.randperm(num_nodes, generator=g)[:num_centers]
    deg = torch.randint(0, 4, (num_centers,), generator=g)
    sub = torch.repeat_interleave(torch.arange(num_centers), deg)
    periph = torch.randint(0, num_nodes, (int(deg.sum()),), generator=g)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = StarGNN(6, 3, aggregator=aggregator, hidden_channels=5, update_layers=2,
                        gin_init=0.3).to(DT)

    class Batch:
        def __init__(self, idx):
            keep = torch.isin(sub, idx)
            remap = torch.full((num_centers,), -1, dtype=torch.long)
            remap[idx] = torch.arange(idx.numel())
            self.centers, self.periph_nodes = centers[idx], periph[keep]
            self.periph_subgraph = remap[sub[keep]]

    def loss_of(idx):
        b = Batch(idx)
        return F.cross_entropy(model(x, b), y[b.centers], reduction="none")

    return model, loss_of, num_centers


def padded_problem(seed=0, num=8, width=4, d=5, hidden=4, classes=3, encoder_layers=2):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(20, d, generator=g, dtype=DT)
    y = torch.randint(0, classes, (20,), generator=g)
    nodes = torch.randint(0, 20, (num, width), generator=g)
    lengths = torch.randint(1, width + 1, (num,), generator=g)
    mask = torch.arange(width).unsqueeze(0) < lengths.unsqueeze(1)
    nodes = torch.where(mask, nodes, torch.full_like(nodes, -1))
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = OneLayerGCN(d, classes, hidden_channels=hidden, encoder_layers=encoder_layers,
                            decoder_layers=2).to(DT)

    def loss_of(idx):
        return F.cross_entropy(model(x, nodes[idx], mask[idx]), y[nodes[idx, 0]], reduction="none")

    return model, loss_of, num, mask


# ----------------------------------------------------------------- tests
@pytest.mark.parametrize("aggregator", ["gcn", "gin", "sage"])
def test_star_models_match_loop(aggregator):
    model, loss_of, num = star_problem(aggregator)
    res = assert_matches_loop(model, loss_of, num, 0.05)
    assert (res.factors[0] < 1).any()  # clipping was active


def test_padded_multirow_model_matches_loop():
    model, loss_of, num, mask = padded_problem()
    assert_matches_loop(model, loss_of, num, 0.1, row_mask=mask)
    assert_matches_loop(model, loss_of, num, 1e3)  # nothing clipped: plain gradient sum


def test_weight_sharing_and_vector_scale_match_loop():
    class Shared(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)
            self.scale = SelfScale(0.2, size=4)
            self.out = nn.Linear(4, 2)

        def forward(self, x):  # (B, 3, 4): lin used twice, once on rows, once on the mean
            h = torch.tanh(self.lin(x)).mean(1) + self.lin(self.scale(x[:, 0]))
            return self.out(h)

    g = torch.Generator().manual_seed(3)
    x = torch.randn(6, 3, 4, generator=g, dtype=DT)
    y = torch.randint(0, 2, (6,), generator=g)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = Shared().to(DT)
    loss_of = lambda idx: F.cross_entropy(model(x[idx]), y[idx], reduction="none")  # noqa: E731
    assert_matches_loop(model, loss_of, 6, 0.2)


@pytest.mark.filterwarnings("ignore:Full backward hook:UserWarning")
def test_matches_opacus_per_sample_gradients():
    from opacus.grad_sample import GradSampleModule

    model, loss_of, num, mask = padded_problem(seed=5)
    res = clipped_gradient_sum(model, lambda: loss_of(torch.arange(num)), clip_norm=0.3)
    gsm = GradSampleModule(model, loss_reduction="sum")
    loss_of(torch.arange(num)).sum().backward()
    per = {n: p.grad_sample for n, p in model.named_parameters()}
    norms = torch.sqrt(sum(v.flatten(1).square().sum(1) for v in per.values()))
    torch.testing.assert_close(res.norms, norms)
    c = torch.clamp(0.3 / norms, max=1.0)
    for n, v in per.items():
        torch.testing.assert_close(res.sums[n], torch.einsum("b,b...->...", c, v))
    gsm._close()


@settings(max_examples=25, deadline=None)
@given(num=st.integers(0, 6), width=st.integers(1, 4), d=st.integers(1, 5),
       hidden=st.integers(1, 5), classes=st.integers(2, 4),
       clip=st.floats(1e-3, 10.0), seed=st.integers(0, 10_000))
def test_clipped_norms_never_exceed_bound(num, width, d, hidden, classes, clip, seed):
    model, loss_of, num, mask = padded_problem(seed, num, width, d, hidden, classes, 1)
    res = assert_matches_loop(model, loss_of, num, clip, row_mask=mask)
    names = tuple(n for n, _ in model.named_parameters())
    _, _, clipped = loop_reference(model, loss_of, num, [ClipGroup(names, clip)])
    for i, cn in enumerate(clipped):
        assert float(res.factors[0][i] * res.norms[i]) <= clip * (1 + 1e-6)
        assert float(cn) <= clip * (1 + 1e-6)
    small = res.norms <= clip
    assert torch.all(res.factors[0][small] == 1.0)  # unclipped gradients unchanged


def test_clip_groups_bound_each_group():
    model, loss_of, num, mask = padded_problem(seed=2)
    names = [n for n, _ in model.named_parameters()]
    groups = [ClipGroup((n,), 0.01 * (k + 1)) for k, n in enumerate(names)]
    res = assert_matches_loop(model, loss_of, num, groups)
    for k, group in enumerate(groups):
        assert torch.all(res.factors[k] * res.group_norms[k] <= group.clip_norm * (1 + 1e-9))
    with pytest.raises(InvalidParameterError):
        clipped_gradient_sum(model, lambda: loss_of(torch.arange(num)), clip_norm=groups[:-1])


def test_positive_control_per_row_norms_fail_equality():
    """A broken rule treating the rows of a subgraph as separate examples must be caught."""
    original = flat_rules._RULES[nn.Linear]

    def per_row_norms(layer, calls):
        out = original(layer, calls)
        a, d, segs = flat_rules._rows(calls, lambda c: c.args[0])
        rows = d.square().sum(-1) * a.square().sum(-1)
        out[layer.weight] = flat_rules.Contribution(segs.sum(rows), out[layer.weight].weighted)
        return out

    model, loss_of, num, mask = padded_problem(seed=1)
    register_rule(nn.Linear, per_row_norms)
    try:
        with pytest.raises(AssertionError):
            assert_matches_loop(model, loss_of, num, 0.05, row_mask=mask)
    finally:
        register_rule(nn.Linear, original)
    assert_matches_loop(model, loss_of, num, 0.05, row_mask=mask)


def test_sensitivity_of_the_clipped_sum():
    """G3: changing one subgraph moves the sum by <= 2C, adding one by <= C; control without."""
    model, loss_of, num, mask = padded_problem(seed=4, num=6)
    clip = 0.05
    full = clipped_gradient_sum(model, lambda: loss_of(torch.arange(num)), clip_norm=clip)
    fewer = clipped_gradient_sum(model, lambda: loss_of(torch.arange(num - 1)), clip_norm=clip)
    diff = torch.sqrt(sum((full.sums[n] - fewer.sums[n]).square().sum() for n in full.sums))
    assert float(diff) <= clip * (1 + 1e-9)
    unclipped = clipped_gradient_sum(model, lambda: loss_of(torch.arange(num)), clip_norm=1e9)
    unclipped_fewer = clipped_gradient_sum(model, lambda: loss_of(torch.arange(num - 1)),
                                           clip_norm=1e9)
    diff_raw = torch.sqrt(sum((unclipped.sums[n] - unclipped_fewer.sums[n]).square().sum()
                              for n in full.sums))
    assert float(diff_raw) > clip  # control: without clipping the bound fails


def test_clip_factors_edge_cases():
    norms = torch.tensor([0.0, 0.5, 1.0, 2.0], dtype=DT)
    expected = torch.tensor([1.0, 1.0, 1.0, 0.5], dtype=DT)
    torch.testing.assert_close(clip_factors(norms, 1.0), expected)


def test_empty_batch_gives_zero_sum():
    model, loss_of, _, _ = padded_problem()
    res = clipped_gradient_sum(model, lambda: loss_of(torch.zeros(0, dtype=torch.long)),
                               clip_norm=1.0)
    assert res.num_subgraphs == 0
    assert all(torch.count_nonzero(v) == 0 for v in res.sums.values())


def test_unsupported_modules_raise():
    for bad in [nn.Sequential(nn.Linear(3, 3), nn.PReLU()),
                nn.Sequential(nn.Conv1d(1, 1, 2)),
                nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1d(3, affine=False))]:
        with pytest.raises(UnsupportedModuleError) as err:
            check_model(bad)
        assert "supported" in str(err.value) and isinstance(err.value, ValueError)

    class RawParam(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.ones(3))

    with pytest.raises(UnsupportedModuleError, match="RawParam"):
        check_model(RawParam())
    tied = nn.Sequential(nn.Linear(3, 3), nn.Linear(3, 3))
    tied[1].weight = tied[0].weight
    with pytest.raises(UnsupportedModuleError, match="ties"):
        check_model(tied)
    shared = nn.Linear(3, 3)
    assert len(check_model(nn.Sequential(shared, nn.Tanh(), shared))) == 1  # reuse is fine
    frozen = nn.Sequential(nn.Linear(3, 3), nn.PReLU())
    frozen[1].requires_grad_(False)
    check_model(frozen)  # frozen parameters need no rule
    # one rule set for both paths: the built-in engine trains what make_private does
    assert len(check_model(nn.Sequential(nn.Linear(3, 3), nn.LayerNorm(3)))) == 2


def test_layer_not_indexed_by_subgraph_raises():
    lin = nn.Linear(3, 2).to(DT)
    x = torch.randn(5, 3, dtype=DT)

    def closure():  # the layer sees all 5 rows but only 2 per-subgraph losses
        return lin(x).sum(1)[:2]

    with pytest.raises(ValueError, match="leading dimension"):
        clipped_gradient_sum(lin, closure, clip_norm=1.0)


def test_parameters_restored_after_capture():
    model, loss_of, num = star_problem("gin")
    clipped_gradient_sum(model, lambda: loss_of(torch.arange(num)), clip_norm=1.0)
    assert all(p.requires_grad for p in model.parameters())
    assert all(p.grad is None for p in model.parameters())


def test_subclasses_need_their_own_rule():
    class ScaledLinear(nn.Linear):
        def forward(self, x):
            return 2.0 * super().forward(x)

    with pytest.raises(UnsupportedModuleError, match="ScaledLinear"):
        check_model(nn.Sequential(ScaledLinear(3, 2)))
