"""Gaussian and Laplace mechanisms, including the secure modes (sum-of-draws, snapping)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from _mechanism_stats import ALPHA, chi_square_pvalue, gen, ks_pvalue, seed_os_bytes
from dp_accounting import dp_event
from scipy import stats

from gnnprivacy.accounting.units import NeighboringRelation, PrivacyUnit
from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.mechanisms import GaussianMechanism, LaplaceMechanism, snapping_mechanism
from gnnprivacy.mechanisms import _random
from gnnprivacy.mechanisms._random import RandomSource
from gnnprivacy.mechanisms.laplace import snapping_parameters

NODE = PrivacyUnit.NODE


@pytest.fixture
def seeded_os_bytes(monkeypatch):
    """Replace the OS CSPRNG by a seeded byte stream so secure-mode statistics are reproducible."""
    return seed_os_bytes(monkeypatch, 2024)


def gaussian_pvalue(mech, *, claimed_std: float, n: int, seed: int | None) -> float:
    x = torch.full((n,), 3.0, dtype=torch.float64)
    out = mech(x, generator=None if seed is None else gen(seed))
    return ks_pvalue(out - 3.0, stats.norm(scale=claimed_std).cdf)


@pytest.mark.statistical
def test_gaussian_noise_law_with_positive_control():
    n, std = 20_000, 2.0
    good = GaussianMechanism(noise_multiplier=2.0, sensitivity=1.0, unit=NODE)
    assert good.std == std
    assert gaussian_pvalue(good, claimed_std=std, n=n, seed=1) > ALPHA
    broken = GaussianMechanism(noise_multiplier=2.2, sensitivity=1.0, unit=NODE)  # std 10 % off
    assert gaussian_pvalue(broken, claimed_std=std, n=n, seed=1) < ALPHA


@pytest.mark.statistical
def test_secure_gaussian_law_with_positive_control(seeded_os_bytes):
    n, std = 20_000, 1.5
    good = GaussianMechanism(noise_multiplier=1.5, sensitivity=1.0, unit=NODE, secure_mode=True)
    assert gaussian_pvalue(good, claimed_std=std, n=n, seed=None) > ALPHA
    # it drew 4 normals (8 uniforms, 64 bits each) per coordinate from the OS stream
    assert seeded_os_bytes == [8 * 2 * 4 * n]
    broken = GaussianMechanism(noise_multiplier=1.65, sensitivity=1.0, unit=NODE, secure_mode=True)
    assert gaussian_pvalue(broken, claimed_std=std, n=n, seed=None) < ALPHA


def laplace_pvalue(mech, *, claimed_scale: float, n: int, seed: int) -> float:
    out = mech(torch.full((n,), -1.0, dtype=torch.float64), generator=gen(seed))
    return ks_pvalue(out + 1.0, stats.laplace(scale=claimed_scale).cdf)


@pytest.mark.statistical
def test_laplace_noise_law_with_positive_control():
    n = 50_000
    good = LaplaceMechanism(epsilon=0.5, sensitivity=2.0, unit=NODE)
    assert good.scale == 4.0
    assert laplace_pvalue(good, claimed_scale=4.0, n=n, seed=2) > ALPHA
    broken = LaplaceMechanism(epsilon=0.5 / 1.1, sensitivity=2.0, unit=NODE)  # scale 10 % off
    assert laplace_pvalue(broken, claimed_scale=4.0, n=n, seed=2) < ALPHA


def snapped_law(value: float, *, lam: float, grid: float, bound: float) -> tuple[np.ndarray, np.ndarray]:
    """Exact law of clamp(round_grid(value + Lap(lam))) on the grid points in [-bound, bound]."""
    points = np.arange(-bound, bound + grid / 2, grid)
    cdf = stats.laplace(loc=value, scale=lam).cdf
    upper = np.append(cdf(points[:-1] + grid / 2), 1.0)
    lower = np.insert(cdf(points[1:] - grid / 2), 0, 0.0)
    return points, upper - lower


@pytest.mark.statistical
def test_snapping_output_on_grid_within_bound_and_law_matches(seeded_os_bytes):
    eps, sens, bound, n = 0.5, 1.0, 16.0, 100_000
    mech = LaplaceMechanism(epsilon=eps, sensitivity=sens, unit=NODE, secure_mode=True, bound=bound)
    lam, grid = snapping_parameters(epsilon=eps, sensitivity=sens, bound=bound)
    assert grid == 4.0 and 2.0 < lam < 2.0 + 1e-12 and mech.grid == 4.0
    x = torch.full((n,), 0.3, dtype=torch.float64)
    out = mech(x)
    assert torch.equal(out / grid, torch.round(out / grid))  # on the grid Lambda Z
    assert float(out.abs().max()) <= bound
    points, law = snapped_law(0.3, lam=lam, grid=grid, bound=bound)
    counts = [(out == p).sum().item() for p in points]
    assert sum(counts) == n
    assert chi_square_pvalue(counts, law) > ALPHA
    # positive control: a snapping mechanism whose lambda is 10 % too large is caught
    broken = snapping_mechanism(x, epsilon=eps / 1.1, sensitivity=sens, bound=bound,
                                source=RandomSource(secure=True))
    counts = [(broken == p).sum().item() for p in points]
    assert chi_square_pvalue(counts, law) < ALPHA


def test_snapping_clamps_inputs_and_scales_with_sensitivity(seeded_os_bytes):
    mech = LaplaceMechanism(epsilon=1.0, sensitivity=0.5, unit=NODE, secure_mode=True, bound=8.0)
    out = mech(torch.tensor([1e6, -1e6, 0.0], dtype=torch.float64).repeat(1000))
    grid = mech.grid
    assert grid == 0.5 * 2.0  # Lambda = 2 in sensitivity units
    assert torch.equal(out / grid, torch.round(out / grid))
    assert float(out.abs().max()) <= 8.0
    assert float(out[0::3].mean()) > 6.0 and float(out[1::3].mean()) < -6.0  # clamped to +-B first


def test_full_precision_uniform_binades_and_all_zero_words(monkeypatch):
    rng = np.random.default_rng(5)
    stream = [bytes(8)]  # the first 64-bit word is all zero: the exponent must go past 64

    def fake(n: int) -> bytes:
        head = stream.pop() if stream else b""
        return head + rng.bytes(n - len(head))

    monkeypatch.setattr(_random, "_os_random_bytes", fake)
    source = RandomSource(secure=True)
    u = source.full_precision_uniform(200_000).numpy()
    assert u[0] < 2.0**-64
    assert ((u > 0) & (u < 1)).all()
    assert ks_pvalue(u, stats.uniform.cdf) > ALPHA
    # binade [2^-k, 2^-k+1) has probability 2^-k
    k = -np.floor(np.log2(u[1:])).astype(int)
    observed = np.bincount(np.minimum(k, 12), minlength=13)[1:]
    law = np.append(2.0 ** -np.arange(1, 12), 2.0**-11)
    assert chi_square_pvalue(observed, law) > ALPHA


def test_bit_length_is_exact():
    words = np.array([0, 1, 2**32 - 1, 2**32, 2**53 + 1, 2**64 - 1, 2**63], dtype=np.uint64)
    assert _random._bit_length(words).tolist() == [int(w).bit_length() for w in words]


def test_secure_mode_refuses_a_generator_and_uses_fresh_randomness():
    mech = GaussianMechanism(noise_multiplier=1.0, sensitivity=1.0, unit=NODE, secure_mode=True)
    with pytest.raises(InvalidParameterError, match="generator"):
        mech(torch.zeros(3), generator=gen(0))
    assert not torch.equal(mech(torch.zeros(16)), mech(torch.zeros(16)))
    lap = LaplaceMechanism(epsilon=1.0, sensitivity=1.0, unit=NODE, secure_mode=True, bound=10.0)
    with pytest.raises(InvalidParameterError, match="generator"):
        lap(torch.zeros(3), generator=gen(0))


def test_reproducible_with_generator_and_input_untouched():
    x = torch.linspace(-1, 1, 10)
    before = x.clone()
    for mech in (GaussianMechanism(noise_multiplier=1.0, sensitivity=1.0, unit=NODE),
                 LaplaceMechanism(epsilon=1.0, sensitivity=1.0, unit=NODE)):
        a, b = mech(x, generator=gen(3)), mech(x, generator=gen(3))
        assert torch.equal(a, b) and a.dtype == torch.float32 and not torch.equal(a, x)
    assert torch.equal(x, before)


def test_events_units_and_repr():
    g = GaussianMechanism(noise_multiplier=1.3, sensitivity=2.0, unit="edge",
                          relation=NeighboringRelation.REPLACE)
    assert g.event == dp_event.GaussianDpEvent(1.3) and g.std == pytest.approx(2.6)
    assert g.unit is PrivacyUnit.EDGE and g.relation is NeighboringRelation.REPLACE
    assert not hasattr(g, "epsilon")
    lap = LaplaceMechanism(epsilon=0.25, sensitivity=3.0, unit=NODE)
    assert lap.event == dp_event.LaplaceDpEvent(4.0) and lap.epsilon == 0.25
    assert lap.relation is NeighboringRelation.ADD_OR_REMOVE
    assert repr(g) == ("GaussianMechanism(noise_multiplier=1.3, sensitivity=2, std=2.6, unit='edge', "
                       "relation='replace', secure_mode=False)")
    assert "scale=12" in repr(lap)


def test_bad_parameters_raise_clear_errors():
    with pytest.raises(InvalidParameterError, match="noise_multiplier"):
        GaussianMechanism(noise_multiplier=0.0, sensitivity=1.0, unit=NODE)
    with pytest.raises(InvalidParameterError, match="sensitivity"):
        GaussianMechanism(noise_multiplier=1.0, sensitivity=-1.0, unit=NODE)
    for eps in (0.0, -0.5, math.inf):
        with pytest.raises(InvalidParameterError, match="epsilon"):
            LaplaceMechanism(epsilon=eps, sensitivity=1.0, unit=NODE)
    with pytest.raises(InvalidParameterError, match="bound"):
        LaplaceMechanism(epsilon=1.0, sensitivity=1.0, unit=NODE, secure_mode=True)
    with pytest.raises(InvalidParameterError, match="bound"):
        LaplaceMechanism(epsilon=1.0, sensitivity=1.0, unit=NODE, secure_mode=True, bound=0.5)  # < lambda
    with pytest.raises(InvalidParameterError, match="bound"):
        LaplaceMechanism(epsilon=1.0, sensitivity=1.0, unit=NODE, bound=5.0)  # only in secure mode
    with pytest.raises(InvalidParameterError, match="secure_mode"):
        GaussianMechanism(noise_multiplier=1.0, sensitivity=1.0, unit=NODE, secure_mode=1)
    with pytest.raises(InvalidParameterError, match="relation"):
        GaussianMechanism(noise_multiplier=1.0, sensitivity=1.0, unit=NODE, relation="swap")
    mech = GaussianMechanism(noise_multiplier=1.0, sensitivity=1.0, unit=NODE)
    with pytest.raises(InvalidParameterError, match="floating-point"):
        mech(torch.tensor([1, 2]))
    with pytest.raises(InvalidParameterError, match="finite"):
        mech(torch.tensor([1.0, float("nan")]))
    with pytest.raises(TypeError):
        GaussianMechanism(1.0, 1.0, NODE)  # privacy parameters are keyword-only
