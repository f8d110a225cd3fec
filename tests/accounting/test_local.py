"""Local (pure-epsilon) budgets: GRR-FS sound vs paper epsilon_X (004 §9)."""

import itertools
import math

import numpy as np
import pytest

from gnnprivacy.accounting import (compose_pure_epsilon, grr_fs_epsilon, grr_fs_event,
                                   grr_fs_feature_epsilon, make_accountant)
from gnnprivacy.errors import InvalidParameterError, PrivacyUnitMismatchError

PAPER_TABLE = {  # 004 §9.1, m = 10: d -> eps_X at eps_x = 1, 0.1, 0.01
    53: (8.3325, 0.2808, 0.0196), 58: (8.2424, 0.2595, 0.0180), 33: (8.8062, 0.4192, 0.0314),
    48: (8.4316, 0.3060, 0.0217), 46: (8.4741, 0.3174, 0.0226), 60: (8.2085, 0.2518, 0.0174),
}


@pytest.mark.parametrize("d", sorted(PAPER_TABLE))
def test_paper_mode_reproduces_table(d):
    for eps_x, ref in zip((1.0, 0.1, 0.01), PAPER_TABLE[d]):
        assert grr_fs_epsilon(epsilon=eps_x, d=d, m=10, mode="paper") == pytest.approx(
            ref, abs=1e-4)
        assert grr_fs_epsilon(epsilon=eps_x, d=d, m=10) == pytest.approx(10 * eps_x)  # sound


def _exact_ldp_epsilons(d, m, eps_x):
    """Worst log-ratio of GRR-FS on binary features by enumeration (004 §3.2 joint law)."""
    p = math.exp(eps_x) / (math.exp(eps_x) + 1)
    inputs = list(itertools.product((0, 1), repeat=d))
    subsets = list(itertools.combinations(range(d), m))
    prob = np.zeros((len(inputs), len(inputs)))           # prob[x, o] = P[o | x]
    for xi, x in enumerate(inputs):
        for oi, o in enumerate(inputs):
            total = 0.0
            for subset in subsets:
                term = 1.0
                for j in range(d):
                    term *= (p if o[j] == x[j] else 1 - p) if j in subset else 0.5
                total += term
            prob[xi, oi] = total / len(subsets)
    log_prob = np.log(prob)
    worst_any = float(np.max(log_prob[:, None, :] - log_prob[None, :, :]))
    single = [(a, b) for a in range(len(inputs)) for b in range(len(inputs))
              if sum(u != v for u, v in zip(inputs[a], inputs[b])) == 1]
    worst_single = max(float(np.max(log_prob[a] - log_prob[b])) for a, b in single)
    return worst_any, worst_single


@pytest.mark.parametrize("d, m, eps_x, exact, paper, single", [  # 004 §9.3 table
    (3, 1, 1.0, 1.0, 0.4528, 0.4528),
    (4, 2, 1.0, 2.0, 1.4338, 0.6201),
    (5, 2, 0.5, 1.0, 0.5231, 0.2307),
    (6, 3, 0.3, 0.9, 0.5480, 0.1612),
    (6, 2, 2.0, 4.0, 2.9374, 1.1409),
])
def test_sound_mode_is_exact_and_paper_mode_is_unsound(d, m, eps_x, exact, paper, single):
    worst_any, worst_single = _exact_ldp_epsilons(d, m, eps_x)
    assert worst_any == pytest.approx(exact, abs=1e-9)
    assert worst_single == pytest.approx(single, abs=1e-4)
    sound = grr_fs_epsilon(epsilon=eps_x, d=d, m=m)
    claimed = grr_fs_epsilon(epsilon=eps_x, d=d, m=m, mode="paper")
    assert sound == pytest.approx(worst_any, abs=1e-9)          # default = exact LDP epsilon
    assert claimed == pytest.approx(paper, abs=1e-4)
    assert claimed < worst_any - 0.3                              # the gap: paper under-reports
    assert grr_fs_epsilon(epsilon=eps_x, d=d, m=m, mode="attribute") == pytest.approx(
        math.log1p(m / d * math.expm1(eps_x)))


@pytest.mark.parametrize("mode", ["sound", "paper", "attribute"])
def test_inverse_round_trip(mode):
    for total in (0.05, 1.0, 8.3):
        eps_x = grr_fs_feature_epsilon(total_epsilon=total, d=53, m=10, mode=mode)
        assert grr_fs_epsilon(epsilon=eps_x, d=53, m=10, mode=mode) == pytest.approx(total)


def test_edge_cases_and_validation():
    assert grr_fs_epsilon(epsilon=1.0, d=5, m=0) == 0.0
    assert grr_fs_epsilon(epsilon=1.0, d=5, m=5, mode="paper") == pytest.approx(5.0)
    with pytest.raises(InvalidParameterError):
        grr_fs_epsilon(epsilon=1.0, d=5, m=6)
    with pytest.raises(InvalidParameterError):
        grr_fs_epsilon(epsilon=-1.0, d=5, m=2)
    with pytest.raises(InvalidParameterError):
        grr_fs_epsilon(epsilon=1.0, d=5, m=2, mode="ldp-ish")
    with pytest.raises(InvalidParameterError):
        grr_fs_feature_epsilon(total_epsilon=1.0, d=5, m=0)
    assert compose_pure_epsilon([0.5, 0.25, 1.0]) == 1.75
    with pytest.raises(InvalidParameterError):
        compose_pure_epsilon([0.5, -1.0])


def test_feature_ledger_composes_grr_fs_reports():
    acc = make_accountant("pld", unit="feature", relation="replace")
    acc.compose(grr_fs_event(epsilon=0.1, d=53, m=10), 3)
    assert acc.get_epsilon(0.0) == pytest.approx(3.0)
    paper = make_accountant("rdp", unit="feature", relation="replace")
    paper.compose(grr_fs_event(epsilon=0.1, d=53, m=10, mode="paper"), 3)
    assert paper.get_epsilon(0.0) == pytest.approx(3 * 0.2808, abs=1e-3)
    with pytest.raises(PrivacyUnitMismatchError):
        make_accountant("pld", unit="node", relation="replace").compose(
            grr_fs_event(epsilon=0.1, d=53, m=10))
