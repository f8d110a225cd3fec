"""Degenerate HeterPoisson / mixture events (issue 10 item 1).

``q_b = 1`` (every candidate is a centre: graphs with at most 4096 candidates) makes the
Theorem-2 mixture a single component, the plain Gaussian mechanism; dp_accounting's MoG
builder crashed on it (``TypeError: unsupported operand type(s) for +: 'NoneType' and
'float'``) at some noise multipliers, e.g. the one met while calibrating Cora at epsilon 8.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from dp_accounting import dp_event

from gnnprivacy.accounting import (dpsgd_event, gaussian_event, heterpoisson_event,
                                   make_accountant)
from gnnprivacy.accounting.mixture_rdp import mixture_rdp
from gnnprivacy.accounting.pld_mixtures import (connect_dots_mixture_pld,
                                                mixture_of_gaussians_pld)
from gnnprivacy.sampling import HeterPoissonSampler

#: a noise multiplier at which dp_accounting's tail search returned None (Cora, epsilon 8)
CRASH_Z = 1.542210825407941


@pytest.mark.parametrize("kind", ["pld", "rdp"])
@pytest.mark.parametrize("z", [CRASH_Z, 3.0])
def test_one_component_mixture_is_the_gaussian_mechanism(kind, z):
    hp = make_accountant(kind).compose(
        heterpoisson_event(q_b=1.0, M=1.0, max_out_degree=2707, noise_multiplier=z), 9)
    gauss = make_accountant(kind).compose(gaussian_event(noise_multiplier=z), 9)
    assert hp.get_epsilon(1.7e-4) == pytest.approx(gauss.get_epsilon(1.7e-4), rel=1e-9)


def test_one_component_mog_event():
    event = dp_event.MixtureOfGaussiansDpEvent(CRASH_Z, (1.0,), (1.0,))
    eps = make_accountant("pld").compose(event, 3).get_epsilon(1e-5)
    ref = make_accountant("pld").compose(gaussian_event(noise_multiplier=CRASH_Z), 3)
    assert eps == pytest.approx(ref.get_epsilon(1e-5), rel=1e-9)


@pytest.mark.parametrize("shifts, probs", [([1.0], [1.0]), ([0.0, 2.0], [0.7, 0.3]),
                                           ([0.0, 1.0, 4.0], [0.5, 0.4, 0.1])])
def test_routed_and_general_builders_agree(shifts, probs):
    """The special cases equal dp_accounting's general connect-the-dots construction
    (which the robust tail search now lets run at the crashing noise too)."""
    for z in (CRASH_Z, 4.0):
        a = mixture_of_gaussians_pld(z, shifts, probs, value_discretization_interval=1e-3)
        b = connect_dots_mixture_pld(z, shifts, probs, value_discretization_interval=1e-3)
        for n in (1, 9):
            ea = a.self_compose(n).get_epsilon_for_delta(1e-5)
            eb = b.self_compose(n).get_epsilon_for_delta(1e-5)
            assert ea == pytest.approx(eb, rel=1e-6, abs=1e-6)


@pytest.mark.parametrize("q_b", [1.0, 0.3])
def test_all_nodes_isolated(q_b):
    """max_out_degree 0: only the centre's own shift; a (Poisson-sampled) Gaussian."""
    event = heterpoisson_event(q_b=q_b, M=1.0, max_out_degree=0, noise_multiplier=2.0)
    ref = (gaussian_event(noise_multiplier=2.0) if q_b == 1.0
           else dpsgd_event(sample_rate=q_b, noise_multiplier=2.0))
    for kind in ("pld", "rdp"):
        eps = make_accountant(kind).compose(event, 20).get_epsilon(1e-5)
        eps_ref = make_accountant(kind).compose(ref, 20).get_epsilon(1e-5)
        assert math.isfinite(eps) and eps == pytest.approx(eps_ref, rel=1e-3)


@pytest.mark.parametrize("M", [1e9, 1.0])
def test_large_multiplier_and_full_rate(M):
    event = heterpoisson_event(q_b=1.0, M=M, max_out_degree=64, noise_multiplier=CRASH_Z)
    assert math.isfinite(make_accountant("pld").compose(event, 5).get_epsilon(1e-5))
    event = heterpoisson_event(q_b=0.5, M=M, max_out_degree=8, noise_multiplier=8.0)
    assert math.isfinite(make_accountant("pld").compose(event, 5).get_epsilon(1e-5))


def test_one_component_rdp_closed_form():
    orders = np.array([1.5, 2.0, 8.0, 32.0])
    np.testing.assert_allclose(mixture_rdp(orders, [1.0], [0.0], CRASH_Z),
                               orders / (2 * CRASH_Z ** 2), rtol=1e-12)


def test_sampler_without_eligible_neighbours_or_edges():
    n = 6
    cand = torch.tensor([True, True, True, False, False, False])
    gen = torch.Generator().manual_seed(0)
    for edge_index, elig in [(torch.tensor([[3, 4], [0, 1]]), torch.zeros(n, dtype=torch.bool)),
                             (torch.zeros((2, 0), dtype=torch.long), torch.ones(n, dtype=torch.bool))]:
        sampler = HeterPoissonSampler(edge_index, n, candidates=cand, eligible=elig, q_b=1.0, M=1.0)
        batch = sampler.sample(gen)
        assert batch.centers.tolist() == [0, 1, 2]
        assert batch.num_peripherals == 0
