"""DP-GNN multi-term accounting (002 §4): pinned to the spec's reference tables."""

import math
from fractions import Fraction
from math import comb

import numpy as np
import pytest
from scipy import stats

from gnnprivacy.accounting import dpgnn_event, dpgnn_rdp, make_accountant, rdp_to_epsilon
from gnnprivacy.accounting.multiterm import affected_count_log_pmf

CONFIGS = {  # name: (N, K, m, lambda)
    "arxiv": (90941, 7, 10000, 1.0),
    "products": (196615, 10, 10000, 0.8),
    "mag-Adam": (629571, 5, 4096, 1.0),
    "mag-SGD": (629571, 5, 10000, 1.0),
}
GAMMA_TABLE = {  # 002 §4.5, per-step gamma(alpha) at alpha = 1.5, 2, 4, 8, 16, 32
    "arxiv": [0.0184566024, 0.0251030254, 0.0606376949, 1.4904954676, 6.8224333592,
              15.4302096899],
    "products": [0.0082373495, 0.0111280181, 0.0250411626, 1.5840634583, 10.3152994211,
                 23.9428866817],
    "mag-Adam": [0.0008447747, 0.0011378158, 0.0024766372, 0.0259191600, 5.9857462395,
                 15.0253610836],
    "mag-SGD": [0.0021585286, 0.0029129903, 0.0064691624, 0.4673525469, 6.3429201532,
                15.1981871709],
}
# eps with delta = 1/(10N), orders 1.1..9.9, Mironov conversion (improved in parentheses)
EPS_TABLE = {
    "arxiv": ([2.8361, 10.4369, 25.2034, 38.8236], [None, 9.6062, 24.0133, 37.4373], 665, 711),
    "products": ([2.6276, 7.0938, 15.9673, 23.8361], [None, 6.4269, 15.0136, 22.7145], 1457, 1556),
    "mag-Adam": ([2.2431, 3.1817, 5.3496, 7.2467], [None, 2.7188, 4.8000, 6.6169], 13629, 14531),
    "mag-SGD": ([2.5126, 4.3733, 8.2750, 11.6440], [None, 3.8435, 7.5939, 10.8501], 5311, 5666),
}
ORDERS_002 = np.round(np.arange(1.1, 9.95, 0.1), 10)


def _kw(name):
    n, k, m, lam = CONFIGS[name]
    return {"num_train": n, "max_degree": k, "batch_size": m, "noise_multiplier": lam}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_gamma_table(name):
    gamma = dpgnn_rdp([1.5, 2, 4, 8, 16, 32], **_kw(name))
    # The spec's table (10 decimals) was computed from a pmf that sums to 1 only up to
    # rounding; since the pmf is normalised (issue 22 item 6) we match the exact value
    # (mpmath, 40 digits) to 1e-9 and the spec to its own error, at most 1.1e-6 relative
    # (mag-SGD at alpha 1.5: spec 0.0021585286, exact 0.0021585309185, ours 0.0021585309169).
    assert gamma == pytest.approx(GAMMA_TABLE[name], rel=2e-6, abs=5e-11)
    assert gamma[:3] == pytest.approx(_exact_gamma(name, [1.5, 2, 4]), rel=1e-9)


def _exact_gamma(name, orders):
    import mpmath

    n, k, m, lam = CONFIGS[name]
    mpmath.mp.dps = 40
    t = k + 1
    probs = [mpmath.binomial(t, i) * mpmath.binomial(n - t, m - i) / mpmath.binomial(n, m)
             for i in range(t + 1)]
    out = []
    for a in orders:
        a = mpmath.mpf(a)
        out.append(float(mpmath.log(sum(p * mpmath.exp(a * (a - 1) * i ** 2 / (2 * t ** 2 * lam ** 2))
                                        for i, p in enumerate(probs))) / (a - 1)))
    return out


@pytest.mark.parametrize("kwargs, alpha, expected", [
    ({"num_train": 10, "max_degree": 1, "batch_size": 5, "noise_multiplier": 1.0}, 2,
     0.4315436246),
    ({"num_train": 100, "max_degree": 2, "batch_size": 10, "noise_multiplier": 1.0}, 2,
     0.043441537516),
    ({"num_train": 1000, "max_degree": 4, "batch_size": 50, "noise_multiplier": 1.5}, 4,
     0.011824293751),
    ({"num_train": 1000, "max_degree": 3, "batch_size": 1000, "noise_multiplier": 2.0}, 5, 0.625),
    ({"num_train": 1000, "max_degree": 0, "batch_size": 100, "noise_multiplier": 1.0}, 3,
     0.53382797234),
])
def test_small_closed_form_cases(kwargs, alpha, expected):
    assert dpgnn_rdp([alpha], **kwargs)[0] == pytest.approx(expected, rel=1e-9)


def _eps(gamma, steps, delta, conversion):
    return rdp_to_epsilon(ORDERS_002, steps * gamma, delta, conversion)[0]


def _max_steps(gamma, delta, conversion, budget=30.0):
    lo, hi = 1, 100_000
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if _eps(gamma, mid, delta, conversion) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return lo


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_epsilon_table_and_max_steps(name):
    gamma = dpgnn_rdp(ORDERS_002, **_kw(name))
    delta = 1 / (10 * CONFIGS[name][0])
    mironov, improved, t_max, t_max_improved = EPS_TABLE[name]
    for steps, ref in zip([1, 100, 500, 1000], mironov):
        assert _eps(gamma, steps, delta, "mironov") == pytest.approx(ref, abs=1e-4)
    for steps, ref in zip([1, 100, 500, 1000], improved):
        if ref is not None:
            assert _eps(gamma, steps, delta, "balle") == pytest.approx(ref, abs=1e-4)
    assert _max_steps(gamma, delta, "mironov") == t_max
    assert _max_steps(gamma, delta, "balle") == t_max_improved


def test_rdp_accountant_reproduces_table_with_paper_settings():
    acc = make_accountant("rdp", relation="replace", orders=ORDERS_002, conversion="mironov")
    acc.compose(dpgnn_event(**{k: v for k, v in _kw("arxiv").items()}), 665)
    delta = 1 / (10 * 90941)
    assert acc.get_epsilon(delta) <= 30.0
    assert acc.compose(dpgnn_event(**_kw("arxiv"))).get_epsilon(delta) > 30.0   # step 666


def test_count_distribution_cross_checks():
    i, log_p = affected_count_log_pmf(num_train=1000, max_degree=4, batch_size=50)
    ref = stats.hypergeom(1000, 5, 50).pmf(i)                # scipy: (population, successes, draws)
    assert np.exp(log_p) == pytest.approx(ref, rel=1e-10)
    exact = [Fraction(comb(5, k) * comb(15, 6 - k), comb(20, 6)) for k in range(6)]
    i, log_p = affected_count_log_pmf(num_train=20, max_degree=4, batch_size=6)
    assert np.exp(log_p) == pytest.approx([float(f) for f in exact], rel=1e-12)
    i, log_p = affected_count_log_pmf(num_train=1000, max_degree=4, batch_size=50,
                                      sampling="poisson")
    assert np.exp(log_p) == pytest.approx(stats.binom(5, 0.05).pmf(i), rel=1e-10)


def test_properties_p1_to_p3():
    orders = np.array([1.5, 2.0, 4.0, 8.0])
    kw = {"num_train": 1000, "max_degree": 4, "batch_size": 100, "noise_multiplier": 1.2}
    gamma = dpgnn_rdp(orders, **kw)
    assert np.all(gamma <= orders / (2 * 1.2 ** 2) + 1e-12)                   # P1 bound
    full = dpgnn_rdp(orders, **{**kw, "batch_size": 1000})
    assert full == pytest.approx(orders / (2 * 1.2 ** 2), rel=1e-12)        # P1 equality
    # P2 in K holds at fixed noise sigma / C = 2 (K+1) lambda (at fixed lambda gamma
    # *decreases* in K: i / (K+1) concentrates); the spec's P2 reads lambda as fixed.
    sigma_over_c = 2 * (4 + 1) * 1.2
    wider = dpgnn_rdp(orders, **{**kw, "max_degree": 6, "noise_multiplier": sigma_over_c / 14})
    assert np.all(wider >= gamma)
    assert np.all(dpgnn_rdp(orders, **{**kw, "batch_size": 200}) >= gamma)   # P2 in m
    assert np.all(dpgnn_rdp(orders, **{**kw, "noise_multiplier": 1.5}) <= gamma)
    q = 0.1
    k0 = dpgnn_rdp(orders, **{**kw, "max_degree": 0})                         # P3, K = 0
    closed = np.log(1 - q + q * np.exp(orders * (orders - 1) / (2 * 1.2 ** 2))) / (orders - 1)
    assert k0 == pytest.approx(closed, rel=1e-9)


def test_poisson_variant_and_pld_agree_with_rdp():
    fixed = dpgnn_event(**_kw("arxiv"))
    poisson = dpgnn_event(**_kw("arxiv"), sampling="poisson")
    delta = 1 / (10 * 90941)
    for event in (fixed, poisson):
        rdp = make_accountant("rdp", relation="replace").compose(event, 300).get_epsilon(delta)
        pld = make_accountant("pld", relation="replace").compose(event, 300).get_epsilon(delta)
        assert pld <= rdp                    # same dominating pair; PLD converts tightly
        assert pld > 0.5 * rdp
    # Poisson sampling is accepted under add/remove too (no relation declared)
    make_accountant("pld").compose(poisson, 10)


def test_per_group_noise_equals_global_accountant_with_scaled_lambda():
    """002 §8 A6: per-group noise with L groups is accounted with lambda / sqrt(L)."""
    lam, groups = 1.0, 3
    kw = {k: v for k, v in _kw("arxiv").items() if k != "noise_multiplier"}
    paper_literal = dpgnn_rdp(ORDERS_002, noise_multiplier=lam / math.sqrt(groups), **kw)
    # conditional RDP alpha * L * i^2 / (2 (K+1)^2 lambda^2) mixed over i
    i, log_p = affected_count_log_pmf(**{k: v for k, v in kw.items()})
    log_p = log_p - np.logaddexp.reduce(log_p)              # the pmf, normalised
    direct = [np.log(np.sum(np.exp(log_p + a * (a - 1) * groups * i ** 2 / (2 * 64 * lam ** 2))))
              / (a - 1) for a in ORDERS_002]
    assert paper_literal == pytest.approx(direct, rel=1e-10)
