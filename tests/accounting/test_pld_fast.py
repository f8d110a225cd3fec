"""The vectorised PLD operations equal dp_accounting's, and the background epsilon is the one
the accountant reports."""

import math
import threading

import numpy as np
import pytest

from gnnprivacy.accounting import PldAccountant, heterpoisson_event, pld_fast, prefetch
from gnnprivacy.accounting.heterpoisson import shift_distribution, truncate_upper_tail
from gnnprivacy.accounting.pld_mixtures import mixture_of_gaussians_pld


def _mixtures(vdi=1e-2, count=8):
    rng = np.random.default_rng(1)
    out = []
    while len(out) < count:
        q, degree, z = rng.uniform(0.02, 1), int(rng.integers(1, 2000)), rng.uniform(1.5, 6)
        shifts, log_w = shift_distribution(q, 1.0, degree)
        shifts, weights, _ = truncate_upper_tail(shifts, log_w, 1e-30)
        if len(shifts) > 1:
            out.append(mixture_of_gaussians_pld(z, shifts, weights,
                                                value_discretization_interval=vdi))
    return out


@pytest.mark.parametrize("steps", [1, 7, 150])
@pytest.mark.parametrize("vdi", [1e-2, 0.5])          # 0.5: small, sparse PMFs
def test_self_compose_is_the_library_one(steps, vdi):
    for pld in _mixtures(vdi, 4):
        ref, ours = pld.self_compose(steps), pld_fast.self_compose(pld, steps)
        for a, b in ((ref._pmf_remove, ours._pmf_remove), (ref._pmf_add, ours._pmf_add)):
            a, b = a.to_dense_pmf(), b.to_dense_pmf()
            assert a._lower_loss == b._lower_loss
            np.testing.assert_allclose(b._probs, a._probs, rtol=1e-12, atol=1e-300)
            assert b._infinity_mass == a._infinity_mass


def test_epsilon_for_delta_is_the_library_one():
    for pld in _mixtures():
        composed = pld.self_compose(40)
        for delta in (1e-2, 1e-5, 1e-9, 1e-14):
            ref = composed.get_epsilon_for_delta(delta)
            ours = pld_fast.epsilon_for_delta(composed, delta)
            if math.isinf(ref):
                assert math.isinf(ours)
            else:
                assert ours == pytest.approx(ref, rel=1e-9, abs=1e-12)


def test_positive_control_a_wrong_truncation_bound_is_seen():
    """The comparison above can fail: a bound one Chernoff order too loose changes the PMF."""
    pld = _mixtures()[0]
    probs = pld._pmf_remove._probs
    lower, upper = pld_fast.convolve_bounds(probs, 30, pld_fast.SELF_COMPOSE_TAIL)
    lower_loose, upper_loose = pld_fast.convolve_bounds(probs, 30, 1e-3)
    assert (lower, upper) != (lower_loose, upper_loose)


def test_prefetched_epsilon_is_what_the_accountant_reports():
    prefetch.clear()
    event = heterpoisson_event(q_b=0.3, M=1.0, max_out_degree=64,
                               noise_multiplier=3.0)
    plain = PldAccountant(disk_cache=False).compose(event, 20).get_epsilon(1e-5)
    background = PldAccountant(disk_cache=False).compose(event, 20)
    future = background.prefetch_epsilon(1e-5)
    assert future.result(timeout=120) == plain
    later = PldAccountant(disk_cache=False)
    for _ in range(20):                                 # composed step by step, like a trainer
        later.compose(event)
    assert later.get_epsilon(1e-5) == plain
    prefetch.clear()


def test_the_accountant_waits_for_the_registered_result():
    """Control: the accountant really takes the registered value (a marker here)."""
    prefetch.clear()
    event = heterpoisson_event(q_b=0.3, M=1.0, max_out_degree=8,
                               noise_multiplier=3.0)
    acc = PldAccountant(disk_cache=False).compose(event, 5)
    release = threading.Event()

    def slow():
        release.wait(30)
        return 123.0

    prefetch.submit(acc._ledger_key(1e-5), slow)
    out = {}
    waiter = threading.Thread(target=lambda: out.setdefault("eps", acc.get_epsilon(1e-5)))
    waiter.start()
    waiter.join(0.2)
    assert waiter.is_alive()                            # blocked on the pending result
    release.set()
    waiter.join(30)
    assert out["eps"] == 123.0
    prefetch.clear()
    assert PldAccountant(disk_cache=False).compose(event, 5).get_epsilon(1e-5) != 123.0


def test_a_forked_child_does_not_wait_for_its_parents_threads():
    """After fork the registry is empty: the child computes instead of waiting."""
    import multiprocessing as mp

    event = heterpoisson_event(q_b=0.3, M=1.0, max_out_degree=8, noise_multiplier=3.0)
    acc = PldAccountant(disk_cache=False).compose(event, 5)
    never = threading.Event()
    prefetch.submit(acc._ledger_key(1e-5), lambda: never.wait(60) and 0.0)
    ctx = mp.get_context("fork")
    with ctx.Pool(1) as pool:
        eps = pool.apply_async(_child_epsilon, (event,)).get(timeout=120)
    assert 0 < eps < 100
    never.set()
    prefetch.clear()


def _child_epsilon(event):
    # the same composition as the parent's pending one: without the fork guard this
    # would wait forever on a thread that does not exist in the child
    return PldAccountant(disk_cache=False).compose(event, 5).get_epsilon(1e-5)


def test_connect_dots_pmf_is_the_library_one():
    import math as _m

    from dp_accounting.pld import pld_pmf
    from dp_accounting.pld import privacy_loss_mechanism as plm

    from gnnprivacy.accounting.pld_mixtures import (VectorizedMixtureGaussianPrivacyLoss,
                                                    connect_dots_pmf)

    shifts, log_w = shift_distribution(0.3, 1.0, 500)
    shifts, weights, _ = truncate_upper_tail(shifts, log_w, 1e-30)
    for adjacency in (plm.AdjacencyType.REMOVE, plm.AdjacencyType.ADD):
        for vdi in (1e-3, 0.2):                                   # dense, then sparse
            loss = VectorizedMixtureGaussianPrivacyLoss(3.0, shifts, weights,
                                                        adjacency_type=adjacency)
            b = loss.connect_dots_bounds()
            lo, up = _m.floor(b.epsilon_lower / vdi), _m.ceil(b.epsilon_upper / vdi)
            deltas = loss.get_delta_for_epsilon(np.arange(lo, up + 1) * vdi)
            ref = pld_pmf.create_pmf_pessimistic_connect_dots_fixed_gap(vdi, lo, up, deltas)
            ours = connect_dots_pmf(vdi, lo, up, deltas)
            assert type(ours) is type(ref)
            a, c = ref.to_dense_pmf(), ours.to_dense_pmf()
            assert a._lower_loss == c._lower_loss and a._infinity_mass == c._infinity_mass
            np.testing.assert_array_equal(c._probs, a._probs)


def test_epsilon_with_huge_negative_losses_is_the_library_one_and_quiet():
    """Tiny noise puts losses near -1e4 in the PMF: exp(-loss) overflows there. Those entries
    lie past the stopping index, so the result still equals the library's, without warnings."""
    import warnings

    from dp_accounting.pld import privacy_loss_distribution as pld_lib

    for sigma, vdi in ((0.02, 1.0), (0.02, 0.1)):
        pld = pld_lib.from_gaussian_mechanism(sigma, value_discretization_interval=vdi)
        assert pld._pmf_remove.to_dense_pmf()._lower_loss * vdi < -800   # exp(800) overflows
        for delta in (1e-3, 1e-5, 1e-9):
            ref = pld.get_epsilon_for_delta(delta)
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                ours = pld_fast.epsilon_for_delta(pld, delta)
            assert ours == pytest.approx(ref, rel=1e-9)
