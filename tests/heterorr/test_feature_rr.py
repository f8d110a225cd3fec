"""FeatureRR (spec 001 §3.1-3.2, checks §7.1-7.7): exact values, LDP ratio, sampler, scores."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats

from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.ldp.heterorr.feature_rr import (FeatureRR, discretize, eeb, expected_output,
                                                transition_matrix)
from gnnprivacy.ldp.heterorr.scores import (gradient_importance, importance_scores,
                                            sensitivity_scores, unified_scores)

# spec §7.4: eps -> (t=1: P(stay), E[z~], E|z~ - t/k|), (t=5: same), k = 10
TABLE = {
    0.01: ((0.100501, 0.549083, 0.449083), (0.100278, 0.549861, 0.249750)),
    0.1: ((0.105074, 0.540835, 0.440835), (0.102802, 0.548623, 0.247500)),
    1: ((0.156767, 0.460184, 0.360184), (0.130203, 0.537352, 0.225121)),
    2: ((0.223481, 0.380311, 0.280311), (0.164960, 0.527152, 0.200947)),
    5: ((0.427901, 0.230725, 0.130725), (0.288804, 0.508978, 0.137914)),
    10: ((0.670817, 0.149059, 0.049059), (0.506631, 0.500979, 0.071900)),
}
EEB = {0.1: 0.324366, 0.5: 0.302162, 1: 0.275492, 2: 0.227375, 5: 0.130838, 9: 0.071999}


@pytest.mark.parametrize("eps", sorted(TABLE))
def test_reference_values_k10(eps):
    P = transition_matrix(10, eps)
    for t, (stay, mean, err) in zip((1, 5), TABLE[eps]):
        assert P[t - 1, t - 1] == pytest.approx(stay, abs=1e-6)
        assert expected_output(10, eps, t) == pytest.approx(mean, abs=1e-6)
        assert eeb(10, eps, t) == pytest.approx(err, abs=1e-6)
    # t = 10 mirrors t = 1
    stay, mean, err = TABLE[eps][0]
    assert P[9, 9] == pytest.approx(stay, abs=1e-6)
    assert expected_output(10, eps, 10) == pytest.approx(1.1 - mean, abs=1e-6)
    assert eeb(10, eps, 10) == pytest.approx(err, abs=1e-6)


def test_eeb_average_and_k5_row():
    for eps, value in EEB.items():
        assert eeb(10, eps) == pytest.approx(value, abs=1e-6)
    np.testing.assert_allclose(transition_matrix(5, 1.0)[0],
                               [0.310022, 0.241445, 0.188038, 0.146444, 0.114051], atol=1e-6)


@pytest.mark.parametrize("k", [2, 3, 5, 10, 20, 50])
@pytest.mark.parametrize("eps", [0.01, 0.3, 1.0, 4.0, 10.0])
def test_rows_symmetry_and_worst_ratio_by_enumeration(k, eps):
    P = transition_matrix(k, eps)
    np.testing.assert_allclose(P.sum(axis=1), 1.0, atol=1e-12)
    np.testing.assert_allclose(P, P[::-1, ::-1], atol=1e-15)   # P(u|t) = P(k+1-u|k+1-t)
    logs = np.log(P)
    ratio = logs[:, None, :] - logs[None, :, :]                   # [t, t', u]
    assert ratio.max() == pytest.approx(eps, abs=1e-9)            # tight, within e^eps
    assert ratio[0, k - 1, 0] == pytest.approx(eps, abs=1e-9)     # attained at (u,t,t')=(1,1,k)


def test_binary_case_is_randomized_response():
    for eps, stay in ((1.0, 0.731059), (0.5, 0.622459)):
        assert transition_matrix(2, eps)[0, 0] == pytest.approx(stay, abs=1e-6)
        assert transition_matrix(2, eps)[0, 0] == pytest.approx(math.exp(eps) / (1 + math.exp(eps)))


def test_zero_budget_is_uniform_and_budget_sums():
    np.testing.assert_allclose(transition_matrix(7, 0.0), 1 / 7)
    theta = np.array([0.0, 1.0, 2.0, 5.0])
    mech = FeatureRR(epsilon=3.0, num_features=4, theta=theta)
    assert mech.epsilons.sum() == pytest.approx(3.0, abs=1e-12)
    np.testing.assert_allclose(mech.transition_matrix(0), 0.1)


def test_discretize_boundaries():
    z = torch.tensor([[0.0, 1e-9, 0.1, 0.1000001, 0.95, 1.0]], dtype=torch.float64)
    assert discretize(z, 10).tolist() == [[1, 1, 1, 2, 10, 10]]


def _sample_coordinate(k, eps, t, n, seed, table_eps=None):
    """n outputs of one coordinate at level t (table_eps: a deliberately wrong table)."""
    mech = FeatureRR(epsilon=table_eps or eps, num_features=1, k=k, normalize="public_bounds",
                     lower=0.0, upper=1.0)
    out = mech(torch.full((n, 1), (t - 0.5) / k, dtype=torch.float64),
               generator=torch.Generator().manual_seed(seed))
    return np.rint(out.numpy()[:, 0] * k).astype(int)


@pytest.mark.statistical
@pytest.mark.parametrize("k,eps,t", [(10, 1.0, 1), (10, 2.0, 5), (5, 0.5, 3)])
def test_sampler_goodness_of_fit_and_bias(k, eps, t):
    n = 200_000
    u = _sample_coordinate(k, eps, t, n, seed=11)
    counts = np.bincount(u, minlength=k + 1)[1:]
    expected = transition_matrix(k, eps)[t - 1] * n
    assert stats.chisquare(counts, expected).pvalue > 1e-3
    se = np.sqrt(expected * (1 - expected / n))
    assert (np.abs(counts - expected) < 5 * se).all()
    mean = u.mean() / k
    sd = (u / k).std() / math.sqrt(n)
    assert abs(mean - expected_output(k, eps, t)) < 4 * sd
    # biased on purpose: the mean is NOT the input level t/k (nobody "fixes" it by accident)
    assert abs(mean - t / k) > 10 * sd or t / k == pytest.approx(expected_output(k, eps, t))


@pytest.mark.statistical
def test_sampler_positive_control_wrong_table_fails():
    n = 200_000
    u = _sample_coordinate(10, 1.0, 1, n, seed=12, table_eps=1.3)   # broken: other epsilon
    counts = np.bincount(u, minlength=11)[1:]
    assert stats.chisquare(counts, transition_matrix(10, 1.0)[0] * n).pvalue < 1e-3


def test_row_minmax_call_shapes_and_levels():
    z = torch.tensor([[0.0, 2.0, 4.0], [5.0, 5.0, 5.0]])
    mech = FeatureRR(epsilon=1e6, num_features=3, k=4)     # huge budget: output = level/k
    out = mech(z, generator=torch.Generator().manual_seed(0))
    assert out.tolist() == [[0.25, 0.5, 1.0], [0.25, 0.25, 0.25]]


@pytest.mark.parametrize("bad", [dict(epsilon=0.0), dict(epsilon=-1.0), dict(k=1),
                                 dict(theta=[0.5, 0.5]), dict(theta=[-0.1, 0.6, 0.5]),
                                 dict(theta=[0.0, 0.0, 0.0])])
def test_bad_input(bad):
    kw = {"epsilon": 1.0, "num_features": 3, **bad}
    with pytest.raises(InvalidParameterError):
        FeatureRR(**kw)


# -- scores (spec §7.6) ---------------------------------------------------------------------

def test_unified_scores_properties():
    rng = np.random.default_rng(0)
    alpha = importance_scores(rng.normal(size=(20, 6)))
    beta = sensitivity_scores(rng.normal(size=(20, 6)), rng.normal(size=(20, 6)))
    for gamma in (0.0, 0.3, 1.0):
        th = unified_scores(alpha, beta, gamma)
        assert (th >= 0).all() and th.sum() == pytest.approx(1.0, abs=1e-12)
    np.testing.assert_allclose(unified_scores(alpha, beta, 1.0), alpha)
    refl = beta.min() + beta.max() - beta
    np.testing.assert_allclose(unified_scores(alpha, beta, 0.0), refl / refl.sum())
    uniform = np.full(6, 1 / 6)
    np.testing.assert_allclose(unified_scores(alpha, uniform, 0.4), 0.4 * alpha + 0.6 / 6)


def test_scores_zero_denominators_and_errors():
    z = np.ones((3, 4))
    np.testing.assert_allclose(sensitivity_scores(z, z), 0.25)        # nothing masked
    np.testing.assert_allclose(importance_scores(np.zeros(4)), 0.25)
    with pytest.raises(InvalidParameterError):
        unified_scores(np.ones(4) / 4, np.ones(3) / 3)                # wrong shape
    with pytest.raises(InvalidParameterError):
        unified_scores(np.array([-0.1, 0.5, 0.6]), np.ones(3) / 3)    # negative
    with pytest.raises(InvalidParameterError):
        unified_scores(np.ones(3) / 3, np.ones(3) / 3, gamma=1.5)


def test_gradient_importance_finds_the_informative_feature():
    g = torch.Generator().manual_seed(0)
    x = torch.rand(400, 5, generator=g)
    y = (x[:, 2] > 0.5).long()
    alpha = gradient_importance(x, y, num_classes=2, epochs=200, lr=0.05, generator=g)
    assert alpha.argmax() == 2 and alpha.sum() == pytest.approx(1.0)
