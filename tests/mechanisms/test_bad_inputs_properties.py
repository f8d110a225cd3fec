"""Property tests: mechanisms and samplers on empty, huge, NaN/inf inputs and bad
parameters (issue 10 item 4). Every call either returns a valid result or raises
:class:`~gnnprivacy.errors.InvalidParameterError` naming a parameter, never a traceback
from numpy/torch internals and never a silent wrong result (NaN in, NaN out)."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.mechanisms import (GRR, GaussianMechanism, LaplaceMechanism, MultiBit,
                                   RandomizedResponse)
from gnnprivacy.sampling import HeterPoissonSampler
from gnnprivacy.sampling.minibatch import NodeBatchSampler, poisson_node_batch

BAD_REALS = st.sampled_from([math.nan, math.inf, -math.inf, -1.0, 0.0, 1e308, -1e-300])
ANY_REAL = st.one_of(BAD_REALS, st.floats(allow_nan=True, allow_infinity=True))
SPECIAL = st.sampled_from([math.nan, math.inf, -math.inf])


def _outcome(fn):
    """``("ok", value)`` or ``("error", parameter name)``; any other exception fails."""
    try:
        return "ok", fn()
    except InvalidParameterError as err:
        assert err.name and str(err)
        return "error", err.name


@settings(max_examples=60, deadline=None)
@given(z=ANY_REAL, sens=ANY_REAL)
def test_gaussian_parameters(z, sens):
    status, value = _outcome(lambda: GaussianMechanism(noise_multiplier=z, sensitivity=sens,
                                                       unit="node"))
    if status == "ok":
        assert math.isfinite(z) and z > 0 and math.isfinite(sens) and sens > 0


@settings(max_examples=60, deadline=None)
@given(eps=ANY_REAL, sens=ANY_REAL)
def test_laplace_parameters(eps, sens):
    status, _ = _outcome(lambda: LaplaceMechanism(epsilon=eps, sensitivity=sens, unit="node"))
    if status == "ok":
        assert math.isfinite(eps) and eps > 0 and math.isfinite(sens) and sens > 0


@settings(max_examples=40, deadline=None)
@given(eps=ANY_REAL, k=st.one_of(st.integers(-3, 10**6), st.sampled_from([2.5, math.nan])))
def test_grr_parameters(eps, k):
    status, _ = _outcome(lambda: GRR(epsilon=eps, num_categories=k, unit="node"))
    if status == "ok":
        assert math.isfinite(eps) and eps > 0 and isinstance(k, int) and k >= 2


@settings(max_examples=40, deadline=None)
@given(n=st.integers(0, 50), bad=SPECIAL, mech=st.sampled_from(["gauss", "laplace"]))
def test_central_mechanisms_refuse_nan_and_inf_inputs(n, bad, mech):
    m = (GaussianMechanism(noise_multiplier=1.0, sensitivity=1.0, unit="node") if mech == "gauss"
         else LaplaceMechanism(epsilon=1.0, sensitivity=1.0, unit="node"))
    x = torch.zeros(n + 1)
    x[n // 2] = bad
    status, name = _outcome(lambda: m(x, generator=torch.Generator().manual_seed(0)))
    assert status == "error" and name == "x"


@pytest.mark.parametrize("shape", [(0,), (0, 3), (3, 0)])
def test_central_mechanisms_on_empty_inputs(shape):
    for m in (GaussianMechanism(noise_multiplier=1.0, sensitivity=1.0, unit="node"),
              LaplaceMechanism(epsilon=1.0, sensitivity=1.0, unit="node")):
        status, value = _outcome(lambda: m(torch.zeros(shape), generator=torch.Generator()))
        assert status == "error" or tuple(value.shape) == shape


@settings(max_examples=30, deadline=None)
@given(values=st.lists(st.integers(-5, 12), min_size=0, max_size=30), k=st.integers(2, 8))
def test_grr_on_out_of_range_categories(values, k):
    m = GRR(epsilon=1.0, num_categories=k, unit="node")
    x = torch.tensor(values, dtype=torch.long)
    status, value = _outcome(lambda: m(x, generator=torch.Generator().manual_seed(0)))
    if status == "ok":
        assert all(0 <= v < k for v in values)
        assert value.shape == x.shape and bool(((value >= 0) & (value < k)).all())


@settings(max_examples=30, deadline=None)
@given(values=st.lists(st.sampled_from([0.0, 1.0, 0.5, math.nan, 2.0]), min_size=1,
                       max_size=20))
def test_randomized_response_on_non_binary_inputs(values):
    m = RandomizedResponse(epsilon=1.0, unit="node")
    x = torch.tensor(values)
    status, value = _outcome(lambda: m(x, generator=torch.Generator().manual_seed(0)))
    if status == "ok":
        assert all(v in (0.0, 1.0) for v in values)


@settings(max_examples=30, deadline=None)
@given(bad=SPECIAL, d=st.integers(1, 6))
def test_multibit_refuses_nan(bad, d):
    m = MultiBit(epsilon=1.0, num_features=d, lower=0.0, upper=1.0)
    x = torch.full((3, d), 0.5)
    x[1, 0] = bad
    status, _ = _outcome(lambda: m(x, generator=torch.Generator().manual_seed(0)))
    assert status == "error"


@settings(max_examples=60, deadline=None)
@given(q=ANY_REAL, M=ANY_REAL)
def test_heterpoisson_sampler_parameters(q, M):
    edge_index = torch.tensor([[0, 1, 2], [1, 2, 0]])
    mask = torch.ones(3, dtype=torch.bool)
    status, sampler = _outcome(lambda: HeterPoissonSampler(edge_index, 3, candidates=mask,
                                                           eligible=mask, q_b=q, M=M))
    if status == "ok":
        assert 0 < q <= 1 and 1 <= M < math.inf
        batch = sampler.sample(torch.Generator().manual_seed(0))
        assert batch.centers.numel() <= 3


@settings(max_examples=40, deadline=None)
@given(n=st.integers(-2, 10**7), m=st.integers(-2, 10**7),
       sampling=st.sampled_from(["fixed", "poisson", "bogus"]))
def test_node_batch_sampler_parameters(n, m, sampling):
    status, sampler = _outcome(lambda: NodeBatchSampler(n, batch_size=m, sampling=sampling))
    if status == "ok":
        assert 1 <= m <= n and sampling in ("fixed", "poisson")
        if m <= 1000:                                    # O(batch): fast even for huge n
            batch = sampler.sample(torch.Generator().manual_seed(0))
            assert batch.numel() <= n and bool((batch >= 0).all() and (batch < n).all())


@settings(max_examples=40, deadline=None)
@given(rate=ANY_REAL, n=st.integers(0, 20))
def test_poisson_node_batch_parameters(rate, n):
    status, batch = _outcome(lambda: poisson_node_batch(torch.arange(n), rate=rate,
                                                        generator=torch.Generator()))
    if status == "ok":
        assert 0 < rate <= 1 and batch.numel() <= n


def test_heterpoisson_sampler_bad_graphs():
    mask = torch.ones(3, dtype=torch.bool)
    for edge_index in (torch.tensor([[0, 5], [1, 2]]), torch.tensor([[0.0], [1.0]]),
                       torch.zeros(3, 2, dtype=torch.long), [[0, 1], [1, 2]]):
        status, name = _outcome(lambda: HeterPoissonSampler(edge_index, 3, candidates=mask,
                                                            eligible=mask, q_b=0.5, M=1.0))
        assert status == "error" and name == "edge_index"
    status, name = _outcome(lambda: HeterPoissonSampler(
        torch.zeros(2, 0, dtype=torch.long), 3, candidates=torch.zeros(3, dtype=torch.bool),
        eligible=mask, q_b=0.5, M=1.0))
    assert status == "error" and name == "candidates"
