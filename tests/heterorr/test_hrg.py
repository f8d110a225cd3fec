"""PHRG and its MCMC (spec 001 §3.3-3.4, checks §7.8-7.10)."""

from __future__ import annotations

import numpy as np
import pytest

from gnnprivacy.ldp.heterorr import _kernels as K
from gnnprivacy.ldp.heterorr.audit import (all_dendrograms, chain_frequencies, em_audit,
                                           target_law)
from gnnprivacy.ldp.heterorr.hrg import (build_dendrogram, default_steps, delta_e,
                                         delta_e_paper, fit_mcmc, temperature)

# spec §7.8: n_bar -> (N_max, Delta_e, paper Eq. 15, T at eps_e1 = 0.5, c_em = 2)
DELTA = {3: (2, 1.386294, 1.386294, 0.180337), 4: (4, 2.249341, 1.673976, 0.111144),
         10: (25, 4.198604, 3.259698, 0.059544), 100: (2500, 8.823846, 7.824446, 0.028332),
         1000: (250000, 13.429214, 12.429220, 0.018616),
         2372: (1406596, 15.156683, 14.156684, 0.016494),
         14445: (52164506, 18.769913, 17.769913, 0.013319)}


@pytest.mark.parametrize("n_bar", sorted(DELTA))
def test_delta_e_vectors(n_bar):
    _, d, paper, T = DELTA[n_bar]
    assert delta_e(n_bar) == pytest.approx(d, abs=1e-6)
    assert delta_e_paper(n_bar) == pytest.approx(paper, abs=1e-6)
    assert temperature(0.5, n_bar) == pytest.approx(T, abs=1e-6)


def test_delta_e_degenerate():
    assert delta_e(2) == 0.0 and delta_e(1) == 0.0 and temperature(1.0, 2) == 0.0
    assert default_steps(2708) == 196608


def _random_graph(n, rng, p_pub=0.15, p_pri=0.1):
    iu = np.triu_indices(n, 1)
    r = rng.random(iu[0].size)
    pairs = np.stack(iu)
    return pairs[:, r < p_pub], pairs[:, (r >= p_pub) & (r < p_pub + p_pri)]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_incremental_likelihood_matches_recompute_after_every_move(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 50))
    pub, pri = _random_graph(n, rng)
    is_pri = rng.random(n) < 0.8
    is_pri[pri.reshape(-1)] = True
    D = build_dendrogram(n, pub, pri, is_pri, rng)
    T = temperature(1.0, int(is_pri.sum()))
    for mode in ("sound", "paper"):
        for _ in range(1500 if mode == "sound" else 500):
            fit_mcmc(D, temperature=T, steps=1, rng=rng, mode=mode, chunk=1)   # checks drift
        ntot, npub, npri, epub, epri, lpub, lpri = K.recompute(
            D.left, D.right, D.parent, D.root, n, D.is_pub, D.is_pri, pub[0], pub[1], pri[0],
            pri[1])
        for a, b in ((ntot, D.ntot), (npub, D.npub), (npri, D.npri), (epub, D.epub),
                     (epri, D.epri)):
            np.testing.assert_array_equal(a, b)
        assert D.epub.sum() == pub.shape[1] and D.epri.sum() == pri.shape[1]
        nb = int(is_pri.sum())
        assert D.n_bar().sum() == nb * (nb - 1) // 2
        leaves = np.concatenate([D.left[n:], D.right[n:]])
        assert sorted(leaves[leaves < n].tolist()) == list(range(n))


def test_drift_detector_positive_control():
    rng = np.random.default_rng(5)
    pub, pri = _random_graph(20, rng, 0.3, 0.2)
    D = build_dendrogram(20, pub, pri, np.ones(20, bool), rng)
    D.lpri += 3.0   # corrupt the stored likelihood
    with pytest.raises(RuntimeError, match="drifted"):
        fit_mcmc(D, temperature=0.1, steps=10, rng=rng)


# -- exact enumeration (spec §7.10) ---------------------------------------------------------
PUB5 = np.array([[0, 1, 2], [4, 4, 3]])
PRI5 = np.array([[0, 0, 1, 2, 3], [2, 3, 2, 4, 4]])


def test_enumeration_counts():
    assert len(all_dendrograms(4, np.zeros((2, 0)), np.array([[0], [1]]), np.ones(4, bool))) == 15
    Ds = all_dendrograms(5, PUB5, PRI5, np.ones(5, bool))
    assert len(Ds) == 105 and len({D.canonical() for D in Ds}) == 105


def test_em_step_is_eps_e1_dp_in_sound_mode_and_not_in_paper_mode():
    sound = em_audit(5, PUB5, PRI5, eps_e1=1.0, c_em=2.0, private_node_set="all")
    assert sound["max_log_ratio"] <= 1.0 + 1e-9
    # positive controls: the paper's c_em = 1 (E11), and c_em = 1 with the observed V-bar
    assert em_audit(5, PUB5, PRI5, eps_e1=1.0, c_em=1.0)["max_log_ratio"] > 1.2
    pub, pri = np.array([[0, 1], [2, 4]]), np.array([[2, 2], [3, 4]])
    assert em_audit(5, pub, pri, eps_e1=1.0, c_em=2.0)["max_log_ratio"] <= 1.0 + 1e-9
    paper = em_audit(5, pub, pri, eps_e1=1.0, c_em=1.0, private_node_set="observed")
    assert paper["max_log_ratio"] > 1.5


@pytest.mark.statistical
@pytest.mark.skipif(not K.HAVE_NUMBA, reason="10^6 moves need the compiled kernel (numba)")
def test_sound_chain_is_stationary_at_the_target_and_paper_chain_is_not():
    is_pri = np.ones(5, bool)
    T = temperature(4.0, 5)
    law = target_law(all_dendrograms(5, PUB5, PRI5, is_pri), T)
    tv = {}
    for mode in ("sound", "paper"):
        rng = np.random.default_rng(7)
        D = build_dendrogram(5, PUB5, PRI5, is_pri, rng)
        freq = chain_frequencies(D, temperature=T, samples=500_000, thin=2, rng=rng, mode=mode)
        tv[mode] = 0.5 * sum(abs(law[k] - freq.get(k, 0.0)) for k in law)
    assert tv["sound"] < 0.01
    assert tv["paper"] > 0.05     # the alternating chain has another stationary law (E16)
