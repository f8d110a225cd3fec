"""EdgeRR release (spec 001 §3.5-3.6, checks §7.11-7.13) and its bad-input errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gnnprivacy.accounting import make_accountant
from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.ldp.heterorr.edge_rr import (edge_rr, noisy_probs, priv_hrg,
                                             sample_private_edges, split_edges,
                                             undirected_pairs)
from gnnprivacy.ldp.heterorr.hrg import build_dendrogram, fit_mcmc


def _graph(n=60, seed=0, p=0.12):
    rng = np.random.default_rng(seed)
    iu = np.stack(np.triu_indices(n, 1))
    edges = iu[:, rng.random(iu.shape[1]) < p]
    pub, pri = split_edges(edges, n, private_frac=0.4, rng=rng)
    return n, pub, pri, rng


def _fitted(seed=0):
    n, pub, pri, rng = _graph(seed=seed)
    D = build_dendrogram(n, pub, pri, np.ones(n, bool), rng)
    fit_mcmc(D, temperature=0.05, steps=20_000, rng=rng)
    return D, rng


@pytest.mark.statistical
def test_laplace_noise_scale_without_merge_or_clipping():
    D, rng = _fitted()
    nbar = D.n_bar()
    use = nbar > 0
    eps2 = 0.7
    noise = np.concatenate([
        (noisy_probs(D, eps_e2=eps2, rng=rng, er_merge=False, clip=False) * nbar
         - D.epri[D.n:])[use] for _ in range(300)])          # ~ 17,000 independent draws
    assert np.std(noise) == pytest.approx(math.sqrt(2) / eps2, rel=0.03)


def test_every_private_edge_is_in_exactly_one_released_count():
    D, rng = _fitted(1)
    # with a huge budget the noise vanishes; the merged blocks and single nodes together
    # release counts that add up to |E_pri| exactly
    p = noisy_probs(D, eps_e2=1e9, rng=rng, er_merge=True, tau_b=1e-12, tau_c=1e-12)
    nbar = D.n_bar()
    assert (p * nbar).sum() == pytest.approx(D.pri_edges.shape[1], abs=1e-6)
    # merge thresholds: with er_merge and a tiny budget every node is in a merged block,
    # so all internal nodes share the root's single noisy value
    p = noisy_probs(D, eps_e2=1e-6, rng=rng)
    assert np.unique(p).size == 1


@pytest.mark.statistical
def test_sampler_mean_and_public_edges_kept():
    D, rng = _fitted(2)
    probs = noisy_probs(D, eps_e2=1.0, rng=rng)
    nbar = D.n_bar()
    counts = [sample_private_edges(D, probs, rng).shape[1] for _ in range(100)]
    mean = (nbar * probs).sum()
    sd = math.sqrt((nbar * probs * (1 - probs)).sum())
    assert abs(np.mean(counts) - mean) < 3 * sd / math.sqrt(100) + 1e-9
    e = sample_private_edges(D, probs, rng)
    assert (e[0] < e[1]).all() and np.unique(e[0] * D.n + e[1]).size == e.shape[1]


def test_edge_rr_release_events_and_public_edges():
    n, pub, pri, rng = _graph(seed=3)
    acc = make_accountant("pld", unit="edge", relation="add_or_remove")
    out = edge_rr(pub, pri, n, epsilon=1.0, generator=rng, accountant=acc)
    released = undirected_pairs(out.edge_index, n)
    keys = set((released[0] * n + released[1]).tolist())
    assert set((pub[0] * n + pub[1]).tolist()) <= keys
    assert acc.get_epsilon(0.0) == pytest.approx(1.0)
    assert out.guarantee == "asymptotic" and out.info["private_node_set"] == "all"
    paper = edge_rr(pub, pri, n, epsilon=1.0, generator=rng, mode="paper", steps=2000)
    assert paper.guarantee == "unsupported" and paper.info["c_em"] == 1.0


def test_observed_mode_samples_only_inside_v_bar():
    n, pub, pri, rng = _graph(seed=4)
    out = edge_rr(pub, pri, n, epsilon=50.0, generator=rng, private_node_set="observed",
                  steps=5000)
    released = undirected_pairs(out.edge_index, n)
    pub_keys = set((pub[0] * n + pub[1]).tolist())
    inside = np.zeros(n, bool)
    inside[pri.reshape(-1)] = True
    for u, v in released.T:
        if u * n + v not in pub_keys:
            assert inside[u] and inside[v]


def test_priv_hrg_equals_edge_rr_without_public_edges():
    n, pub, pri, _ = _graph(seed=5)
    all_edges = np.concatenate([pub, pri], axis=1)
    a = priv_hrg(all_edges, n, epsilon=1.0, generator=np.random.default_rng(9), steps=3000)
    b = edge_rr(np.zeros((2, 0), np.int64), undirected_pairs(all_edges, n), n, epsilon=1.0,
                generator=np.random.default_rng(9), steps=3000)
    assert a.edge_index.equal(b.edge_index)


@pytest.mark.parametrize("kw", [dict(epsilon=0.0), dict(epsilon=-1.0),
                                dict(epsilon=float("inf")), dict(split=1.0),
                                dict(mode="other"), dict(private_node_set="declared"),
                                dict(private_node_set="declared", private_nodes=[True] * 3)])
def test_bad_input(kw):
    n, pub, pri, rng = _graph(seed=6)
    args = {"epsilon": 1.0, **kw}
    with pytest.raises(InvalidParameterError):
        edge_rr(pub, pri, n, generator=rng, steps=10, **args)


def test_no_private_edges_and_bad_rho():
    n, pub, pri, rng = _graph(seed=7)
    with pytest.raises(InvalidParameterError, match="private edge"):
        edge_rr(pub, np.zeros((2, 0), np.int64), n, epsilon=1.0, generator=rng)
    for rho in (-0.1, 1.5):
        with pytest.raises(InvalidParameterError, match="private_edge_frac"):
            split_edges(pub, n, private_frac=rho, rng=rng)
