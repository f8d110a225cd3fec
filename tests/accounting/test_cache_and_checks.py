"""Accounting off the critical path (issue 15) and plan checks (issue 10 items 2-3).

* the on-disk cache returns a calibration / an epsilon without recomputing it;
* the coarse-grid degree screen agrees with the full degree cover;
* too little noise for the PLD grid is refused clearly, and the accountant coarsens its
  grid (soundly) instead of hanging;
* delta >= 1/n and absurd step plans are refused with one-line errors.
"""

from __future__ import annotations

import math
import warnings

import pytest

import gnnprivacy.accounting.calibration as calibration
from gnnprivacy.accounting import (calibrate_noise_multiplier, gaussian_event, heterpoisson_event,
                                   make_accountant)
from gnnprivacy.accounting import disk_cache
from gnnprivacy.accounting.pld_mixtures import mixture_of_gaussians_pld
from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.training import _privacy


def _hp(z, degree=64, q=0.3):
    return heterpoisson_event(q_b=q, M=1.0, max_out_degree=degree, noise_multiplier=z)


def test_calibration_is_cached_on_disk(monkeypatch):
    kw = dict(steps=20, target_epsilon=3.0, target_delta=1e-5, rtol=1e-2)
    z = calibrate_noise_multiplier(_hp, **kw)

    def boom(*args, **kwargs):
        raise AssertionError("recomputed despite the cache")
    monkeypatch.setattr(calibration, "make_accountant", boom)
    assert calibrate_noise_multiplier(_hp, **kw) == z
    with pytest.raises(AssertionError):                     # positive control: cache off
        calibrate_noise_multiplier(_hp, use_disk_cache=False, **kw)


def test_epsilon_is_cached_on_disk(monkeypatch):
    eps = make_accountant("pld").compose(_hp(4.0), 20).get_epsilon(1e-5)
    import gnnprivacy.accounting.pld_accountant as pa
    monkeypatch.setattr(pa, "event_pld", lambda *a, **k: (_ for _ in ()).throw(AssertionError))
    assert make_accountant("pld").compose(_hp(4.0), 20).get_epsilon(1e-5) == eps


def test_cache_can_be_disabled(monkeypatch, tmp_path):
    monkeypatch.setenv("GNNPRIVACY_ACCOUNTING_CACHE", "off")
    assert disk_cache.cache_dir() is None
    monkeypatch.delenv("GNNPRIVACY_ACCOUNTING_CACHE")
    monkeypatch.setenv("GNNPRIVACY_CACHE", str(tmp_path))
    disk_cache.save_json("k", {"a": 1})
    assert disk_cache.load_json("k") == {"a": 1}
    (tmp_path / "accounting" / "k.json").write_text("{trunc")      # a torn entry is ignored
    assert disk_cache.load_json("k") is None


@pytest.mark.parametrize("q, degree, z, steps", [(0.3, 32, 3.0, 20)])
def test_degree_screen_agrees_with_full_cover(q, degree, z, steps):
    delta = 1e-5
    fast = make_accountant("pld", disk_cache=False).compose(_hp(z, degree, q), steps)
    full = make_accountant("pld", degree_shortcut=False, disk_cache=False).compose(
        _hp(z, degree, q), steps)
    assert fast.get_epsilon(delta) == pytest.approx(full.get_epsilon(delta), rel=1e-9)


def test_tiny_noise_is_refused_by_the_builder_and_coarsened_by_the_accountant():
    with pytest.raises(InvalidParameterError) as info:
        mixture_of_gaussians_pld(0.01, [0.0, 40.0], [0.5, 0.5], value_discretization_interval=1e-3)
    assert info.value.name == "noise_multiplier"
    acc = make_accountant("pld", disk_cache=False).compose(gaussian_event(noise_multiplier=0.02), 1)
    eps = acc.get_epsilon(1e-5)
    assert math.isfinite(eps) and eps > 100
    assert acc.options()["effective_value_discretization_interval"] > 1e-3


def test_large_epsilon_grid_is_coarsened():
    assert _privacy.accountant_options("pld", 8.0, 9) == {}
    assert _privacy.accountant_options("pld", 1000.0, 9)["value_discretization_interval"] > 0.1
    assert _privacy.accountant_options("rdp", 1000.0, 9) == {}


def test_delta_must_be_below_one_over_n():
    with pytest.raises(InvalidParameterError) as info:
        _privacy.check_delta(0.5, 140)
    message = str(info.value)
    assert info.value.name == "delta" and "\n" not in message
    assert "allow-large-delta" in message and "1/n" in message
    assert _privacy.check_delta(0.5, 140, allow_large_delta=True) == 0.5
    assert _privacy.check_delta(1e-3, 140) == 1e-3
    with pytest.raises(InvalidParameterError):
        _privacy.check_delta(0.1, 10)                      # exactly 1/n is refused too


def test_absurd_step_plans_are_refused_with_the_figure():
    with pytest.raises(InvalidParameterError) as info:
        _privacy.check_planned_steps(9_000_000, how="T = ceil(epochs / q_b) with q_b = 1e-06")
    assert "9000000" in str(info.value) and "q_b = 1e-06" in str(info.value)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert _privacy.check_planned_steps(2_000_000, explicit=True) == 2_000_000
    assert any("2,000,000" in str(w.message) for w in caught)
    assert _privacy.check_planned_steps(1000) == 1000


@pytest.mark.parametrize("name", ["heterpoisson", "dpgnn", "dpmlp"])
def test_trainers_refuse_large_delta(name):
    import torch
    from gnnprivacy.training.node_dp import DPGNNTrainer, DPMLPTrainer, HeterPoissonTrainer
    from torch_geometric.data import Data

    n = 40
    gen = torch.Generator().manual_seed(0)
    edge_index = torch.randint(0, n, (2, 120), generator=gen)
    y = torch.arange(n) % 2
    train = torch.zeros(n, dtype=torch.bool)
    train[:20] = True
    data = Data(x=torch.randn(n, 4, generator=gen), edge_index=edge_index, y=y,
                train_mask=train, val_mask=~train, test_mask=~train)
    cls = {"heterpoisson": HeterPoissonTrainer, "dpgnn": DPGNNTrainer, "dpmlp": DPMLPTrainer}[name]
    kw = {"batch_size": 10} if name != "heterpoisson" else {}
    with pytest.raises(InvalidParameterError) as info:
        cls(delta=0.5, steps=1, generator=0, **kw).fit(data)
    assert info.value.name == "delta"
