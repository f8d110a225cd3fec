"""One-sided calibration never overshoots; epsilon is monotone in steps, rate and 1/sigma."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gnnprivacy.accounting import (PldAccountant, calibrate_noise_multiplier, dpgnn_event,
                                   dpsgd_event, heterpoisson_event, heterpoisson_paper_orders,
                                   make_accountant)
from gnnprivacy.errors import InvalidParameterError

FEW_ORDERS = [1.25, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0, 32.0, 64.0, 128.0]


def _epsilon(kind, event, steps, delta, **options):
    return make_accountant(kind, **options).compose(event, steps).get_epsilon(delta)


def _check_calibration(z, make_event, kind, steps, target, delta, rtol, **options):
    """The property: reached epsilon <= target, and a slightly smaller noise overshoots."""
    assert _epsilon(kind, make_event(z), steps, delta, **options) <= target
    assert _epsilon(kind, make_event(z / (1 + 2 * rtol)), steps, delta, **options) > target


@settings(max_examples=10, deadline=None)
@given(q=st.floats(0.001, 0.2), steps=st.integers(1, 2000), target=st.floats(0.2, 8.0),
       delta=st.sampled_from([1e-3, 1e-5, 1e-7]))
def test_calibration_never_overshoots_rdp(q, steps, target, delta):
    def make(z):
        return dpsgd_event(sample_rate=q, noise_multiplier=z)
    z = calibrate_noise_multiplier(make, steps=steps, target_epsilon=target, target_delta=delta,
                                   accountant="rdp", accountant_options={"orders": FEW_ORDERS})
    _check_calibration(z, make, "rdp", steps, target, delta, 1e-3, orders=FEW_ORDERS)


@settings(max_examples=3, deadline=None)
@given(q=st.floats(0.005, 0.1), steps=st.integers(1, 500), target=st.floats(0.5, 4.0))
def test_calibration_never_overshoots_pld(q, steps, target):
    def make(z):
        return dpsgd_event(sample_rate=q, noise_multiplier=z)
    z = calibrate_noise_multiplier(make, steps=steps, target_epsilon=target, target_delta=1e-5,
                                   rtol=1e-2)
    _check_calibration(z, make, "pld", steps, target, 1e-5, 1e-2)


def test_two_sided_calibration_is_caught():
    """Positive control: returning the lower end of the final bracket overshoots."""
    def make(z):
        return dpsgd_event(sample_rate=0.02, noise_multiplier=z)
    z = calibrate_noise_multiplier(make, steps=300, target_epsilon=1.0, target_delta=1e-5,
                                   accountant="rdp", rtol=1e-2)
    broken = z / (1 + 1e-2)                                 # the infeasible end of the bracket
    with pytest.raises(AssertionError):
        _check_calibration(broken, make, "rdp", 300, 1.0, 1e-5, 1e-2)


@settings(max_examples=6, deadline=None)
@given(q=st.floats(0.001, 0.3), z=st.floats(0.6, 5.0), steps=st.integers(1, 500),
       kind=st.sampled_from(["pld", "rdp"]))
def test_epsilon_monotone_in_steps_rate_and_inverse_noise(q, z, steps, kind):
    delta = 1e-5
    opts = {"orders": FEW_ORDERS} if kind == "rdp" else {}

    def eps(rate, noise, n):
        return _epsilon(kind, dpsgd_event(sample_rate=rate, noise_multiplier=noise), n, delta,
                        **opts)
    base = eps(q, z, steps)
    tol = 1e-9 * (1 + base)
    assert eps(q, z, steps + 7) >= base - tol
    assert eps(min(1.0, 1.5 * q), z, steps) >= base - tol
    assert eps(q, 1.3 * z, steps) <= base + tol


def test_heterpoisson_epsilon_monotone():
    def eps(**kw):
        params = {"q_b": 0.1, "M": 2, "max_out_degree": 8, "noise_multiplier": 8.0}
        params.update(kw)
        return make_accountant("pld").compose(heterpoisson_event(**params), 50).get_epsilon(1e-5)
    base = eps()
    assert eps(q_b=0.2) > base and eps(noise_multiplier=10.0) < base and eps(M=3) > base
    acc = make_accountant("pld").compose(heterpoisson_event(
        q_b=0.1, M=2, max_out_degree=8, noise_multiplier=8.0), 60)
    assert acc.get_epsilon(1e-5) > base


def _hp_maker(z, max_degree=22469):
    return heterpoisson_event(q_b=4096 / 22470, M=2, max_out_degree=max_degree,
                              noise_multiplier=z)


def test_heterpoisson_calibration():
    delta = 22470 ** -1.1
    z = calibrate_noise_multiplier(_hp_maker, steps=50, target_epsilon=4.0, target_delta=delta,
                                   rtol=1e-2)
    _check_calibration(z, _hp_maker, "pld", 50, 4.0, delta, 1e-2)


def test_calibration_falls_back_when_the_largest_degree_is_not_the_worst(monkeypatch):
    """If the cheap first-branch bound is too optimistic, full evaluations take over."""
    original = PldAccountant._first_branch_epsilon

    def optimistic(self, delta):
        eps, exact = original(self, delta)
        return 0.5 * eps, False

    monkeypatch.setattr(PldAccountant, "_first_branch_epsilon", optimistic)
    delta = 22470 ** -1.1

    def make(z):
        return _hp_maker(z, max_degree=4)
    z = calibrate_noise_multiplier(make, steps=50, target_epsilon=4.0, target_delta=delta,
                                   rtol=2e-2)
    monkeypatch.undo()
    _check_calibration(z, make, "pld", 50, 4.0, delta, 2e-2)


def test_dpgnn_calibration_uses_replace_relation():
    def make(lam):
        return dpgnn_event(num_train=90941, batch_size=10000, max_degree=7, noise_multiplier=lam)
    delta = 1 / (10 * 90941)
    lam = calibrate_noise_multiplier(make, steps=665, target_epsilon=30.0, target_delta=delta,
                                     accountant="rdp", rtol=1e-3,
                                     accountant_options={"orders": FEW_ORDERS})
    acc = make_accountant("rdp", relation="replace", orders=FEW_ORDERS).compose(make(lam), 665)
    assert acc.get_epsilon(delta) <= 30.0
    assert 0.8 < lam < 1.05                    # the paper's lambda = 1 reaches eps 30 at T = 665


def test_calibration_errors():
    def make(z):
        return dpsgd_event(sample_rate=0.5, noise_multiplier=z)
    with pytest.raises(InvalidParameterError) as info:
        calibrate_noise_multiplier(make, steps=10, target_epsilon=1e-3, target_delta=1e-5,
                                   accountant="rdp", max_noise_multiplier=10.0,
                                   accountant_options={"orders": FEW_ORDERS})
    assert info.value.name == "target_epsilon"
    with pytest.raises(InvalidParameterError):
        calibrate_noise_multiplier(make, steps=0, target_epsilon=1.0, target_delta=1e-5)
    with pytest.raises(InvalidParameterError):
        calibrate_noise_multiplier(make, steps=10, target_epsilon=1.0, target_delta=1.0)
    loose = calibrate_noise_multiplier(make, steps=1, target_epsilon=50.0, target_delta=0.5,
                                       accountant="rdp", accountant_options={"orders": FEW_ORDERS})
    assert loose > 0 and math.isfinite(loose)
    assert _epsilon("rdp", make(loose), 1, 0.5, orders=FEW_ORDERS) <= 50.0


def test_paper_mode_calibration_with_rdp():
    """000 §4.7 (D_max = 10 cell): the calibrated sigma is 3.80 within 3 %."""
    def make(z):
        return heterpoisson_event(q_b=0.18229, M=1, max_out_degree=10, noise_multiplier=z,
                                  mode="paper")
    options = {"orders": heterpoisson_paper_orders()}
    z = calibrate_noise_multiplier(make, steps=50, target_epsilon=2.0, target_delta=1.634e-5,
                                   accountant="rdp", accountant_options=options, rtol=1e-2)
    assert 0.97 * 3.80 <= 0.5 * z <= 1.03 * 3.80
    _check_calibration(z, make, "rdp", 50, 2.0, 1.634e-5, 1e-2, **options)


def test_calibration_without_the_full_check_rests_on_the_largest_degree():
    """full_check=False: feasible for the largest degree, near-minimal, and (here, as for
    every HeterPoisson plan measured) within budget over every covering degree."""
    delta = 22470 ** -1.1
    kwargs = dict(steps=50, target_epsilon=4.0, target_delta=delta, rtol=1e-2,
                  use_disk_cache=False)
    z = calibrate_noise_multiplier(_hp_maker, full_check=False, **kwargs)
    acc = make_accountant("pld").compose(_hp_maker(z), 50)
    assert acc._first_branch_epsilon(delta)[0] <= 4.0
    _check_calibration(z, _hp_maker, "pld", 50, 4.0, delta, 1e-2)
