"""Algorithms 1-2 (spec 004 §4-6; §12 checks 7, 9, 10)."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.ldp.propagation import mean_adjacency, propagate
from gnnprivacy.ldp.reconstruction import (label_estimates_for_steps, reconstruct_features,
                                           reconstruct_features_for_steps, reconstruct_labels,
                                           reconstruct_labels_for_steps)
from gnnprivacy.mechanisms import GRRFS


def _random_graph(n: int, e: int, seed: int) -> torch.Tensor:
    ei = torch.randint(0, n, (2, e), generator=torch.Generator().manual_seed(seed))
    return torch.cat([ei, ei.flip(0)], dim=1)


@settings(max_examples=25, deadline=None)
@given(n=st.integers(3, 40), e=st.integers(0, 80), c=st.integers(2, 6), k=st.integers(1, 6),
       eps=st.floats(0.05, 5.0), seed=st.integers(0, 10_000))
def test_label_reconstruction_is_the_k_hop_majority_vote(n, e, c, k, eps, seed):
    """§4.3: argmax of the frequency estimate = argmax of the propagated noisy reports."""
    g = torch.Generator().manual_seed(seed)
    ei = _random_graph(n, e, seed)
    labeled = torch.rand(n, generator=g) < 0.7
    labeled[0] = True
    y = torch.where(labeled, torch.randint(0, c, (n,), generator=g), torch.full((n,), -1))
    got = reconstruct_labels(mean_adjacency(ei, n), y, labeled, epsilon=eps, num_classes=c, steps=k)
    onehot = torch.zeros(n, c)
    onehot[labeled] = torch.nn.functional.one_hot(y[labeled], c).float()
    votes = propagate(mean_adjacency(ei, n), onehot, k)
    assert torch.equal(got[labeled], votes[labeled].argmax(1))   # plain majority vote
    assert (got[~labeled] == -1).all()


@settings(max_examples=25, deadline=None)
@given(n=st.integers(2, 30), d=st.integers(2, 12), data=st.data(), k=st.integers(1, 5),
       eps=st.floats(0.05, 4.0), seed=st.integers(0, 10_000))
def test_hard_feature_reconstruction_is_the_k_hop_majority(n, d, data, k, eps, seed):
    m = data.draw(st.integers(1, d))
    g = torch.Generator().manual_seed(seed)
    ei = _random_graph(n, 2 * n, seed)
    rep = torch.randint(0, 2, (n, d), generator=g)
    adj = mean_adjacency(ei, n)
    hard = reconstruct_features(adj, rep, feature_epsilon=eps, m=m, steps=k, binary_output="hard")
    share = propagate(adj, rep.float(), k)
    decided = (share - 0.5).abs() > 1e-5     # exact ties may round either way
    assert torch.equal(hard[decided], (share[decided] > 0.5).float())
    soft = reconstruct_features(adj, rep, feature_epsilon=eps, m=m, steps=k)
    assert torch.equal((soft[decided] > 0.5).float(), hard[decided])  # soft is affine in share


def test_soft_features_reproduce_spec_estimator_constants():
    """§4.1 table, Citeseer (d = 53) at eps_x = 1, m = 10: slope 11.4690, intercept -5.2345."""
    adj = mean_adjacency(torch.zeros(2, 0, dtype=torch.long), 2)  # isolated nodes: lambda = report
    rep = torch.zeros(2, 53, dtype=torch.long)
    rep[1] = 1
    out = reconstruct_features(adj, rep, feature_epsilon=1.0, m=10, steps=1)
    assert out[0, 0].item() == pytest.approx(-5.2345, abs=1e-4)
    assert out[1, 0].item() == pytest.approx(11.4690 - 5.2345, abs=1e-4)


def test_degenerate_large_epsilon_full_sampling_returns_the_features():
    adj = mean_adjacency(torch.zeros(2, 0, dtype=torch.long), 5)
    x = torch.randint(0, 2, (5, 7), generator=torch.Generator().manual_seed(0))
    out = reconstruct_features(adj, x, feature_epsilon=60.0, m=7, steps=3)
    assert torch.allclose(out, x.float(), atol=1e-6)
    assert torch.equal(reconstruct_features(adj, x, feature_epsilon=1.0, m=7, steps=0), x.float())


def test_label_reconstruction_large_epsilon_zero_hops_returns_true_labels():
    y = torch.tensor([2, 0, 1, 1])
    lab = torch.tensor([True, True, False, True])
    adj = mean_adjacency(torch.tensor([[0, 1], [1, 0]]), 4)
    got = reconstruct_labels(adj, y, lab, epsilon=50.0, num_classes=3, steps=0)
    assert got.tolist() == [2, 0, -1, 1]


def _cliques(num: int, size: int) -> torch.Tensor:
    idx = torch.arange(num * size).view(num, size)
    pairs = [torch.cartesian_prod(row, row) for row in idx]
    ei = torch.cat(pairs).t()
    return ei[:, ei[0] != ei[1]]


@pytest.mark.statistical
def test_disjoint_cliques_reconstruction_recovers_the_clique_value():
    """§12 check 9: constant label/feature per clique, GRR reports, large K -> clique value."""
    num, size, c = 6, 100, 3
    ei = _cliques(num, size)
    n = num * size
    truth = torch.arange(num).repeat_interleave(size) % c
    g = torch.Generator().manual_seed(7)
    mech = GRRFS.from_feature_epsilon(2.0, num_features=4, m=2)
    x_true = (truth % 2).view(-1, 1).repeat(1, 4)
    x_rep = mech(x_true, generator=g)
    from gnnprivacy.mechanisms import GRR
    y_rep = GRR(epsilon=1.0, num_categories=c, unit="label")(truth, generator=g)
    adj = mean_adjacency(ei, n)
    labels = reconstruct_labels(adj, y_rep, torch.ones(n, dtype=torch.bool), epsilon=1.0,
                                num_classes=c, steps=4)
    feats = reconstruct_features(adj, x_rep, feature_epsilon=2.0, m=2, steps=4, binary_output="hard")
    assert torch.equal(labels, truth)
    assert torch.equal(feats, x_true.float())
    # positive control: the raw reports (no reconstruction) are often wrong
    assert (y_rep != truth).float().mean() > 0.3
    assert (x_rep != x_true).float().mean() > 0.2


@pytest.mark.statistical
def test_neighbourhood_feature_estimate_is_unbiased_with_positive_control():
    """On one clique, pi~_v estimates the clique's share of ones (§13.5); MC over reports."""
    n, d, m, eps, reps = 120, 6, 2, 1.0, 300
    ei = _cliques(1, n)
    adj = mean_adjacency(ei, n)
    g = torch.Generator().manual_seed(3)
    x = (torch.rand(n, d, generator=g) < torch.linspace(0.1, 0.9, d)).long()
    truth = x.float().mean(0)
    mech = GRRFS.from_feature_epsilon(eps, num_features=d, m=m)
    est, est_bad = [], []
    for _ in range(reps):
        rep = mech(x, generator=g)
        est.append(reconstruct_features(adj, rep, feature_epsilon=eps, m=m, steps=1)[0])
        est_bad.append(reconstruct_features(adj, rep, feature_epsilon=eps, m=m + 1, steps=1)[0])
    est, est_bad = torch.stack(est), torch.stack(est_bad)
    se = est.std(0) / math.sqrt(reps)
    assert ((est.mean(0) - truth).abs() < 4 * se).all()
    assert ((est_bad.mean(0) - truth).abs() > 4 * se).any()   # wrong m is caught


def test_several_steps_match_single_calls_and_categorical_outputs():
    n = 15
    ei = _random_graph(n, 30, 4)
    adj = mean_adjacency(ei, n)
    g = torch.Generator().manual_seed(4)
    sizes = torch.tensor([2, 3, 4])
    rep = torch.stack([torch.randint(0, int(s), (n,), generator=g) for s in sizes], 1)
    many = reconstruct_features_for_steps(adj, rep, feature_epsilon=0.5, m=2, steps=[1, 3],
                                          domain_sizes=sizes)
    assert torch.allclose(many[3], reconstruct_features(adj, rep, feature_epsilon=0.5, m=2,
                                                        steps=3, domain_sizes=sizes))
    assert many[3].shape == (n, 3)          # index output: one column per feature
    onehot = reconstruct_features(adj, rep, feature_epsilon=0.5, m=2, steps=3, domain_sizes=sizes,
                                  categorical_output="onehot")
    soft = reconstruct_features(adj, rep, feature_epsilon=0.5, m=2, steps=3, domain_sizes=sizes,
                                categorical_output="soft_vector")
    assert onehot.shape == soft.shape == (n, 1 + 3 + 4)
    assert torch.allclose(soft[:, 1:4].sum(1), torch.ones(n), atol=1e-5)  # estimates sum to 1
    assert torch.equal(onehot[:, 1:4].argmax(1).float(), many[3][:, 1])


def test_label_estimates_are_distributions_and_val_can_be_hidden():
    n, c = 30, 4
    ei = _random_graph(n, 60, 5)
    adj = mean_adjacency(ei, n)
    g = torch.Generator().manual_seed(5)
    y = torch.randint(0, c, (n,), generator=g)
    lab = torch.rand(n, generator=g) < 0.6
    est = label_estimates_for_steps(adj, y, lab, epsilon=0.5, num_classes=c, steps=[2])[2]
    assert (est >= 0).all() and torch.allclose(est.sum(1), torch.ones(n), atol=1e-5)
    train = lab & (torch.arange(n) % 2 == 0)
    out = reconstruct_labels_for_steps(adj, y, train, epsilon=0.5, num_classes=c, steps=[2],
                                       output_mask=lab)[2]
    y2 = y.clone()
    y2[lab & ~train] = (y2[lab & ~train] + 1) % c   # changing hidden reports changes nothing
    out2 = reconstruct_labels_for_steps(adj, y2, train, epsilon=0.5, num_classes=c, steps=[2],
                                        output_mask=lab)[2]
    assert torch.equal(out, out2) and (out[lab] >= 0).all() and (out[~lab] == -1).all()


def test_bad_reports_raise_clear_errors():
    adj = mean_adjacency(torch.tensor([[0, 1], [1, 0]]), 3)
    lab = torch.tensor([True, True, False])
    with pytest.raises(InvalidParameterError, match=r"labels in \[0, 3\)"):
        reconstruct_labels(adj, torch.tensor([0, 3, -1]), lab, epsilon=1.0, num_classes=3, steps=1)
    with pytest.raises(InvalidParameterError, match=r"labels in \[0, 3\)"):
        reconstruct_labels(adj, torch.tensor([-1, 1, 0]), lab, epsilon=1.0, num_classes=3, steps=1)
    with pytest.raises(InvalidParameterError, match="x_reports"):
        reconstruct_features(adj, torch.tensor([[0, 2], [1, 0], [0, 0]]), feature_epsilon=1.0,
                             m=1, steps=1)
    with pytest.raises(InvalidParameterError, match="m"):
        reconstruct_features(adj, torch.zeros(3, 2, dtype=torch.long), feature_epsilon=1.0, m=3,
                             steps=1)
    with pytest.raises(InvalidParameterError, match="feature_epsilon"):
        reconstruct_features(adj, torch.zeros(3, 2, dtype=torch.long), feature_epsilon=0.0, m=1,
                             steps=1)
