"""HeterPoisson accounting (000 §4): the Theorem-2 mixture under RDP and PLD."""

import math

import mpmath
import numpy as np
import pytest
from scipy import integrate
from dp_accounting import dp_event
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from dp_accounting.rdp import rdp_privacy_accountant
from scipy.special import comb

from gnnprivacy.accounting import heterpoisson_event, make_accountant
from gnnprivacy.accounting.heterpoisson import shift_distribution, truncate_upper_tail
from gnnprivacy.accounting.mixture_rdp import _rdp_p_over_q, _rdp_q_over_p, mixture_rdp
from gnnprivacy.accounting.pld_mixtures import mixture_of_gaussians_pld
from gnnprivacy.accounting.rdp_builders import heterpoisson_paper_orders

FB_Q, FB_T, FB_N = 4096 / 22470, 50, 22470
FB_DELTA = FB_N ** -1.1
FEW_ORDERS = np.array([1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 20.0, 32.0])


def _hp(sigma_abs, max_degree, M=1, q_b=0.18229, **kw):
    """Event with the paper's absolute sigma and clip norm R = 0.5."""
    return heterpoisson_event(q_b=q_b, M=M, max_out_degree=max_degree,
                              noise_multiplier=sigma_abs / 0.5, **kw)


# ---------------------------------------------------------------- A1: D = 0 reduction
@pytest.mark.parametrize("alpha, expected", [(2, 0.0157558), (4, 0.0372571), (8, 0.1310952)])
def test_a1_zero_degree_is_sampled_gaussian(alpha, expected):
    q, sigma = 0.18229, 0.8
    shifts, log_w = shift_distribution(q, 1.0, 0)
    ours = mixture_rdp([alpha], shifts, log_w, sigma / 0.5)[0]
    closed = math.log(sum(comb(alpha, i) * (1 - q) ** (alpha - i) * q ** i
                          * math.exp((i * i - i) / (2 * (sigma / 0.5) ** 2))
                          for i in range(alpha + 1))) / (alpha - 1)
    ref = rdp_privacy_accountant.RdpAccountant(orders=[alpha]).compose(
        dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(sigma / 0.5))).rdp[0]
    assert ours == pytest.approx(expected, abs=1e-6)
    assert ours == pytest.approx(closed, rel=1e-9)
    assert ours == pytest.approx(ref, rel=1e-9)


# ------------------------------------------ independent quadrature of the Renyi divergence
def _mpmath_divergences(shifts, weights, sigma, alpha):
    mpmath.mp.dps = 30
    mu = [mpmath.mpf(c) / sigma for c in shifts]
    w = [mpmath.mpf(x) for x in weights]

    def ratio(u):
        return mpmath.fsum(wj * mpmath.exp(mj * u - mj ** 2 / 2) for wj, mj in zip(w, mu))

    def phi(u):
        return mpmath.exp(-u ** 2 / 2) / mpmath.sqrt(2 * mpmath.pi)

    peaks = sorted({float(alpha * m) for m in mu} | {0.0})
    points = [-mpmath.inf] + peaks + [mpmath.inf]
    qp = mpmath.log(mpmath.quad(lambda u: phi(u) * ratio(u) ** alpha, points)) / (alpha - 1)
    pq = mpmath.log(mpmath.quad(lambda u: phi(u) * ratio(u) ** (1 - alpha),
                                [-mpmath.inf, 0, mpmath.inf])) / (alpha - 1)
    return float(qp), float(pq)


def _scipy_divergences(shifts, weights, sigma, alpha):
    mu = np.asarray(shifts) / sigma

    def log_integrand(u, power):
        log_ratio = np.logaddexp.reduce(np.log(weights) + mu * u - mu ** 2 / 2)
        return -u * u / 2 + power * log_ratio - 0.5 * math.log(2 * math.pi)

    out = []
    for power, peaks in ((alpha, alpha * mu), (1 - alpha, np.array([0.0]))):
        lo, hi = min(peaks.min(), 0.0) - 40.0, max(peaks.max(), 0.0) + 40.0
        scale = max(log_integrand(u, power) for u in np.linspace(lo, hi, 20001))
        value, _ = integrate.quad(lambda u: math.exp(log_integrand(u, power) - scale), lo, hi,
                                  points=sorted(set(peaks)), epsabs=0.0, epsrel=1e-12,
                                  limit=500)
        out.append((math.log(value) + scale) / (alpha - 1))
    return tuple(out)


@pytest.mark.parametrize("q_b, M, D, z, alpha, overlap, reference", [
    (0.3, 2.0, 3, 2.0, 2.5, True, "mpmath"),
    (0.18, 1.0, 6, 4.0, 6.0, True, "mpmath"),
    (0.3, 1.0, 4, 2.0, 4.0, False, "mpmath"),
    (0.4, 3.0, 10, 1.5, 3.3, True, "scipy"),        # beyond the cliff: closed form
    (0.4, 3.0, 10, 3.0, 3.0, True, "scipy"),        # 12 head components, kinks in ln L
    (0.5, 4.0, 12, 2.0, 2.0, True, "scipy"),        # head = the largest shifts only
    (0.25, 2.0, 24, 8.0, 2.0, True, "scipy"),      # components j >~ 20 go to the Minkowski tail
    (0.25, 2.0, 30, 3.0, 8.0, True, "scipy"),
])
def test_mixture_rdp_matches_independent_quadrature(q_b, M, D, z, alpha, overlap, reference):
    shifts, log_w = shift_distribution(q_b, M, D, overlap)
    integrate_ref = _mpmath_divergences if reference == "mpmath" else _scipy_divergences
    qp_ref, pq_ref = integrate_ref(shifts, np.exp(log_w), z, alpha)
    mu, lw = shifts / z, log_w
    qp = _rdp_q_over_p(np.array([alpha]), mu, lw)[0]
    pq = _rdp_p_over_q(np.array([alpha]), mu, lw)[0]
    assert qp == pytest.approx(qp_ref, rel=1e-6)
    assert pq == pytest.approx(pq_ref, rel=1e-6)
    assert mixture_rdp([alpha], shifts, log_w, z)[0] == pytest.approx(max(qp_ref, pq_ref),
                                                                      rel=1e-6)


def test_mpmath_check_has_power():
    """Positive control: a mixture with one weight perturbed by 1% is detected."""
    shifts, log_w = shift_distribution(0.3, 2.0, 3)
    weights = np.exp(log_w)
    weights[-2] *= 1.01
    weights /= weights.sum()
    qp_ref, _ = _mpmath_divergences(shifts, weights, 2.0, 2.5)
    qp = _rdp_q_over_p(np.array([2.5]), shifts / 2.0, log_w)[0]
    assert abs(qp / qp_ref - 1) > 1e-4


# ----------------------------------------------------------- A2, A3, A7: RDP properties
def test_a2_jensen_bound_dominates_and_is_tight_for_one_component():
    orders = np.array([1.5, 2.0, 4.0, 8.0, 16.0])
    for q_b, M, D, z in [(0.3, 2.0, 8, 2.0), (0.1, 1.0, 100, 6.0), (0.5, 4.0, 3, 1.0)]:
        shifts, log_w = shift_distribution(q_b, M, D)
        exact = mixture_rdp(orders, shifts, log_w, z)
        jensen = mixture_rdp(orders, shifts, log_w, z, method="jensen")
        assert np.all(exact <= jensen * (1 + 1e-9))
    single = mixture_rdp(orders, np.array([1.5]), np.array([0.0]), 2.0)
    assert single == pytest.approx(orders * 1.5 ** 2 / (2 * 4.0), rel=1e-9)


def test_a3_monotonicity_of_the_step_rdp():
    orders = np.array([1.5, 2.0, 3.0, 5.0, 8.0])

    def step_rdp(**kw):
        params = {"q_b": 0.2, "M": 2.0, "max_out_degree": 64, "noise_multiplier": 6.0}
        params.update(kw)
        acc = make_accountant("rdp", orders=orders).compose(
            heterpoisson_event(mode="paper", **params))
        return acc.rdp()

    base = step_rdp()
    assert np.all(np.diff(base) >= -1e-12)                                    # in alpha
    assert np.all(step_rdp(max_out_degree=256) >= base - 1e-12)               # in D_max
    assert np.all(step_rdp(M=3.0) >= base - 1e-12)                            # in M
    assert np.all(step_rdp(q_b=0.3) >= base - 1e-12)                          # in q_b
    assert np.all(step_rdp(noise_multiplier=8.0) <= base + 1e-12)             # in sigma


def test_a7_linear_composition():
    event = _hp(8.0, 100, mode="paper")
    one = make_accountant("rdp", orders=FEW_ORDERS).compose(event, 7).rdp()
    two = make_accountant("rdp", orders=FEW_ORDERS).compose(event, 14).rdp()
    assert two == pytest.approx(2 * one, rel=1e-12)


# --------------------------------------------- PLD (sound default): 000 §4.7 references
@pytest.mark.parametrize("sigma, expected", [
    (4.0, 2.97), (8.0, 1.31), pytest.param(2.0, 7.48, marks=pytest.mark.slow)])
def test_pld_reference_values(sigma, expected):
    event = heterpoisson_event(q_b=FB_Q, M=2, max_out_degree=64, noise_multiplier=sigma / 0.5)
    eps = make_accountant("pld").compose(event, FB_T).get_epsilon(FB_DELTA)
    assert eps == pytest.approx(expected, abs=0.01)


def test_epsilon_non_decreasing_in_degree_and_converged():
    """000 §4.7: the per-degree epsilon increases with D and converges (Bin -> Poisson)."""
    def per_degree(d):
        event = heterpoisson_event(q_b=FB_Q, M=2, out_degrees=[d], noise_multiplier=8.0)
        return make_accountant("pld").compose(event, FB_T).get_epsilon(FB_DELTA)

    degrees = [0, 1, 2, 4, 16, 64, 256, 1024, 22469]
    eps = [per_degree(d) for d in degrees]
    assert all(b >= a - 1e-9 for a, b in zip(eps, eps[1:]))
    assert eps[-1] - eps[-3] < 2e-3 and eps[-1] - eps[-2] < 1e-3
    worst = make_accountant("pld").compose(
        heterpoisson_event(q_b=FB_Q, M=2, max_out_degree=22469, noise_multiplier=8.0), FB_T)
    assert worst.get_epsilon(FB_DELTA) == pytest.approx(max(eps), abs=1e-12)


def test_fast_mixture_pld_equals_dp_accounting():
    for q_b, M, D, z, vdi in [(0.18, 2.0, 64, 8.0, 1e-2), (0.5, 3.0, 5, 6.0, 5e-3)]:
        shifts, log_w = shift_distribution(q_b, M, D)
        shifts, weights, _ = truncate_upper_tail(shifts, log_w, 1e-30)
        ref = pld_lib.from_mixture_gaussian_mechanism(z, list(shifts), list(weights),
                                                      value_discretization_interval=vdi)
        ours = mixture_of_gaussians_pld(z, shifts, weights, value_discretization_interval=vdi)
        for steps in (1, 20):
            a, b = ref.self_compose(steps), ours.self_compose(steps)
            assert b.get_epsilon_for_delta(1e-6) == pytest.approx(a.get_epsilon_for_delta(1e-6),
                                                                  rel=1e-9, abs=1e-12)
            assert b.get_delta_for_epsilon(0.5) == pytest.approx(a.get_delta_for_epsilon(0.5),
                                                                 rel=1e-8, abs=1e-15)


def test_pld_is_tighter_than_rdp_and_overlap_removal_helps():
    event = _hp(8.0, 64, M=2)
    pld = make_accountant("pld").compose(event, FB_T).get_epsilon(FB_DELTA)
    rdp = make_accountant("rdp", orders=FEW_ORDERS).compose(event, FB_T).get_epsilon(FB_DELTA)
    assert pld < rdp
    no_overlap = _hp(8.0, 64, M=2, overlap_removal=False)
    assert make_accountant("pld").compose(no_overlap, FB_T).get_epsilon(FB_DELTA) > pld


def test_tail_truncation_is_charged_and_harmless():
    event = heterpoisson_event(q_b=FB_Q, M=2, max_out_degree=64, noise_multiplier=8.0)
    default = make_accountant("pld").compose(event, FB_T).get_epsilon(FB_DELTA)
    untruncated = make_accountant("pld", heterpoisson_tail_mass=0.0).compose(event, FB_T)
    assert untruncated.get_epsilon(FB_DELTA) == pytest.approx(default, abs=1e-9)
    coarse = make_accountant("pld", heterpoisson_tail_mass=1e-3).compose(event, FB_T)
    assert coarse.get_epsilon(FB_DELTA) == math.inf           # 50 x 1e-3 of mass > delta
    assert coarse.get_delta(default) >= FB_T * 1e-4            # the dropped mass is charged


def test_pld_refuses_paper_mode_but_rdp_accepts_it():
    paper = _hp(30.0, 100, mode="paper")
    sound = _hp(30.0, 100)
    rdp_paper = make_accountant("rdp", orders=FEW_ORDERS).compose(paper, FB_T)
    rdp_sound = make_accountant("rdp", orders=FEW_ORDERS).compose(sound, FB_T)
    assert rdp_paper.get_epsilon(FB_DELTA) == rdp_sound.get_epsilon(FB_DELTA)


# ----------------------------------------- A5: paper-mode sigma table, within +-3 % (§4.7)
def _paper_epsilon(sigma_abs, q_b, steps, delta, max_degree, M=1, overlap=True):
    event = heterpoisson_event(q_b=q_b, M=M, max_out_degree=max_degree,
                               noise_multiplier=sigma_abs / 0.5, mode="paper",
                               overlap_removal=overlap)
    acc = make_accountant("rdp", orders=heterpoisson_paper_orders()).compose(event, steps)
    return acc.get_epsilon(delta)


def _assert_sigma_within_3_percent(sigma, target, **config):
    """The calibrated sigma lies in [0.97, 1.03] sigma_ref iff these two hold."""
    assert _paper_epsilon(1.03 * sigma, **config) <= target
    assert _paper_epsilon(0.97 * sigma, **config) > target


def test_a5_paper_mode_small_degree_cells():
    """000 §4.7 'How sigma depends on D_max' (Facebook q_b, T, delta; M = 1; eps = 2)."""
    config = {"q_b": 0.18229, "steps": 50, "delta": 1.634e-5}
    _assert_sigma_within_3_percent(3.80, 2.0, max_degree=10, **config)
    assert _paper_epsilon(1.60, max_degree=10, **config) <= 8.0     # 'upper bounds' (coarser)


@pytest.mark.slow
@pytest.mark.parametrize("sigma, target, config", [
    (63.8, 2.0, dict(q_b=0.18229, steps=50, delta=1.634e-5, max_degree=22469)),
    (47.0, 4.0, dict(q_b=0.18229, steps=50, delta=1.634e-5, max_degree=22469)),
    (33.9, 8.0, dict(q_b=0.18229, steps=50, delta=1.634e-5, max_degree=22469)),
    (24.8, 16.0, dict(q_b=0.18229, steps=50, delta=1.634e-5, max_degree=22469)),
    (68.4, 2.0, dict(q_b=0.18229, steps=50, delta=1.634e-5, max_degree=22469, M=4)),
    (42.8, 2.0, dict(q_b=0.43125, steps=21, delta=4.213e-5, max_degree=9497)),
    (50.7, 2.0, dict(q_b=0.29785, steps=31, delta=2.804e-5, max_degree=13751)),
    (60.2, 2.0, dict(q_b=0.20774, steps=44, delta=1.887e-5, max_degree=19716)),
    (197.2, 2.0, dict(q_b=0.017582, steps=228, delta=1.247e-6, max_degree=232964)),
    (64.0, 2.0, dict(q_b=0.18229, steps=50, delta=1.634e-5, max_degree=22469, overlap=False)),
    (57.6, 2.0, dict(q_b=4096 / 17976, steps=39, delta=17976 ** -1.1, max_degree=17976)),
    (15.91, 2.0, dict(q_b=0.18229, steps=50, delta=1.634e-5, max_degree=1000)),
])
def test_a5_paper_mode_table(sigma, target, config):
    _assert_sigma_within_3_percent(sigma, target, **config)
