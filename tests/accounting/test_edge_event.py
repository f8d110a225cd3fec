"""`EdgeSubgraphDpEvent` (issue 46): one edge-level DP-SGD step over Poisson-sampled
subgraphs, one edge changing up to ``m`` of them by substitution."""

from __future__ import annotations

import math

import numpy as np
import pytest
from dp_accounting import dp_event
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from scipy import integrate, stats

from gnnprivacy.accounting import (EdgeSubgraphDpEvent, calibrate_noise_multiplier,
                                   edge_subgraph_event, gaussian_event, make_accountant)
from gnnprivacy.accounting.base import PrivacyUnitMismatchError
from gnnprivacy.accounting.pld_builders import edge_subgraph_pld
from gnnprivacy.errors import InvalidParameterError


@pytest.mark.parametrize("occurrence,factor", [(1, 1), (2, 1), (2, 2)])
def test_without_sampling_it_is_the_gaussian_of_sensitivity_2m(occurrence, factor):
    """q = 1: m = occurrence x bounding factor substitutions of norm-C gradients move the
    sum by at most 2 m C; the m-fold composition at noise z / sqrt(m) is that Gaussian."""
    m = occurrence * factor
    edge = make_accountant("pld", unit="edge").compose(edge_subgraph_event(
        sample_rate=1.0, noise_multiplier=8.0, occurrence=occurrence, bounding_factor=factor))
    gauss = make_accountant("pld", unit="edge").compose(
        gaussian_event(noise_multiplier=8.0 / (2 * m)))
    assert edge.get_epsilon(1e-5) == pytest.approx(gauss.get_epsilon(1e-5), rel=1e-4)


def _aligned_delta(eps, q, m, z):
    """Exact hockey-stick divergence of the aligned worst case of one step: P = sum_i
    Bin(i; m, q) N(i, z^2) against its mirror Q (every affected subgraph's clipped gradient
    moves from +C to -C along one axis, C = 1)."""
    w = stats.binom.pmf(np.arange(m + 1), m, q)

    def p(x):
        return float(sum(w[i] * stats.norm.pdf(x, i, z) for i in range(m + 1)))

    def qd(x):
        return float(sum(w[i] * stats.norm.pdf(x, -i, z) for i in range(m + 1)))

    lo, hi = -12 * z - m, 12 * z + m
    val, _ = integrate.quad(lambda x: max(0.0, p(x) - math.exp(eps) * qd(x)), lo, hi,
                            limit=400, points=[0.0])
    return val


@pytest.mark.parametrize("q,m,z", [(0.1, 2, 1.0),
                                   pytest.param(0.3, 2, 2.0, marks=pytest.mark.slow),
                                   pytest.param(0.05, 4, 1.5, marks=pytest.mark.slow)])
def test_the_pld_dominates_the_exact_aligned_pair_and_add_remove_does_not(q, m, z):
    """Soundness against a known truth (numerical integration of the aligned pair), and
    the broken control: accounting the same step as one subgraph added or removed (the
    DP-SGD event of node level, ``PoissonSampledDpEvent(q, GaussianDpEvent(z))``) gives a
    smaller delta than the true one."""
    pld = edge_subgraph_pld(EdgeSubgraphDpEvent(q, z, m), 1e-4)
    naive = pld_lib.from_gaussian_mechanism(z, sampling_prob=q,
                                            value_discretization_interval=1e-4)
    for eps in (0.5, 1.0, 2.0):
        exact = _aligned_delta(eps, q, m, z)
        assert pld.get_delta_for_epsilon(eps) >= exact - 1e-9
        assert naive.get_delta_for_epsilon(eps) < exact


def test_calibration_meets_the_target_and_the_scope_is_the_edge():
    make = lambda z: edge_subgraph_event(sample_rate=0.05, noise_multiplier=z,  # noqa: E731
                                         occurrence=2)
    z = calibrate_noise_multiplier(make, steps=200, target_epsilon=1.0, target_delta=1e-5,
                                   use_disk_cache=False)
    acc = make_accountant("pld", unit="edge").compose(make(z), 200)
    assert acc.get_epsilon(1e-5) <= 1.0
    assert make_accountant("pld", unit="edge").compose(make(z * 0.97), 200).get_epsilon(
        1e-5) > 1.0
    with pytest.raises(PrivacyUnitMismatchError):
        make_accountant("pld", unit="node").compose(make(z))


def test_rdp_refuses_it_and_bad_arguments_are_named():
    event = edge_subgraph_event(sample_rate=0.1, noise_multiplier=2.0, occurrence=2)
    with pytest.raises(Exception, match="not supported by the RDP accountant"):
        make_accountant("rdp", unit="edge").compose(event)
    for kw in ({"occurrence": 0}, {"bounding_factor": 4}, {"sample_rate": 0.0},
               {"undirected": 1}):
        args = {"sample_rate": 0.1, "noise_multiplier": 2.0, "occurrence": 2, **kw}
        with pytest.raises(InvalidParameterError):
            edge_subgraph_event(**args)
    assert event.group == 2 and isinstance(event, dp_event.DpEvent)
