"""Exact-enumeration audit of EdgeRR's exponential-mechanism step on tiny graphs (spec 001 §7.10).

On ``n <= 6`` nodes every dendrogram can be listed (``(2n-3)!!``: 15 for n = 4, 105 for n = 5).
`target_law` computes ``pi(D) ~ exp(L_pub(D) + T L_pri(D))`` exactly, `em_audit`
the largest ``|log pi_G(D) / pi_G'(D)|`` over every dendrogram and every pair ``G, G'`` that
differ in one private edge, to be compared with ``eps_e1``; `chain_frequencies` the
empirical state law of the compiled chain (for the stationarity check).

Sound mode (``c_em = 2``, fixed ``V-bar = V``) must give at most ``eps_e1``; the paper's
settings (``c_em = 1`` and/or ``V-bar`` = the nodes with a private edge) exceed it.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from gnnprivacy._validation import check_int
from gnnprivacy.ldp.heterorr import _kernels as K
from gnnprivacy.ldp.heterorr.hrg import Dendrogram, _csr, delta_e, fit_mcmc

__all__ = ["all_dendrograms", "chain_frequencies", "em_audit", "target_law"]


def _trees(leaves):
    if len(leaves) == 1:
        yield leaves[0]
        return
    *rest, new = leaves
    for t in _trees(rest):
        yield from _insert(t, new)


def _insert(t, leaf):
    yield (t, leaf)
    if isinstance(t, tuple):
        a, b = t
        for a2 in _insert(a, leaf):
            yield (a2, b)
        for b2 in _insert(b, leaf):
            yield (a, b2)


def _arrays(tree, n: int):
    left = np.full(2 * n - 1, -1, np.int64)
    right = left.copy()
    parent = left.copy()
    counter = [n]

    def rec(t):
        if not isinstance(t, tuple):
            return t
        a, b = rec(t[0]), rec(t[1])
        x = counter[0]
        counter[0] += 1
        left[x], right[x], parent[a], parent[b] = a, b, x, x
        return x

    root = rec(tree)
    return left, right, parent, root


def all_dendrograms(n: int, pub_edges, pri_edges, is_pri) -> list[Dendrogram]:
    """Every dendrogram over ``n`` leaves (``(2n-3)!!`` of them) with the given edges."""
    n = check_int("n", n, low=2, high=7)
    pub = np.asarray(pub_edges, np.int64).reshape(2, -1)
    pri = np.asarray(pri_edges, np.int64).reshape(2, -1)
    is_pub = np.zeros(n, np.bool_)
    is_pub[pub.reshape(-1)] = True
    out = []
    for tree in _trees(list(range(n))):
        left, right, parent, root = _arrays(tree, n)
        out.append(Dendrogram(n, left, right, parent, root, is_pub,
                              np.asarray(is_pri, np.bool_), pub, pri))
    return out


def target_law(dendrograms: list[Dendrogram], temperature: float) -> dict[str, float]:
    """``pi(D) ~ exp(L_pub + T L_pri)`` over the listed dendrograms, keyed by shape."""
    logw = np.array([D.lpub + temperature * D.lpri for D in dendrograms])
    w = np.exp(logw - logw.max())
    w /= w.sum()
    return {D.canonical(): float(p) for D, p in zip(dendrograms, w)}


def _log_law(n, pub, pri, eps_e1, c_em, private_node_set):
    if private_node_set == "observed":
        is_pri = np.zeros(n, np.bool_)
        is_pri[np.asarray(pri, np.int64).reshape(-1)] = True
    else:
        is_pri = np.ones(n, np.bool_)
    d = delta_e(int(is_pri.sum()))
    T = 0.0 if d == 0 else eps_e1 / (c_em * d)
    law = target_law(all_dendrograms(n, pub, pri, is_pri), T)
    return {k: math.log(v) for k, v in law.items()}


def em_audit(n: int, pub_edges, pri_edges, *, eps_e1: float, c_em: float = 2.0,
             private_node_set: str = "all") -> dict:
    """Largest log-ratio of the exact laws over every neighbour ``G' = G +- one private pair``.

    Returns ``{"max_log_ratio", "eps_e1", "worst_pair"}``; the mechanism is ``eps_e1``-DP on
    this graph iff ``max_log_ratio <= eps_e1`` (up to rounding).
    """
    pub = np.asarray(pub_edges, np.int64).reshape(2, -1)
    pri = np.asarray(pri_edges, np.int64).reshape(2, -1)
    pub_set = {tuple(e) for e in pub.T.tolist()}
    pri_set = {tuple(e) for e in pri.T.tolist()}
    base = _log_law(n, pub, pri, eps_e1, c_em, private_node_set)
    worst, pair = 0.0, None
    for e in itertools.combinations(range(n), 2):
        if e in pub_set:
            continue
        other = sorted(pri_set ^ {e})
        if not other:
            continue
        law = _log_law(n, pub, np.array(other, np.int64).T, eps_e1, c_em, private_node_set)
        gap = max(abs(base[k] - law[k]) for k in base)
        if gap > worst:
            worst, pair = gap, e
    return {"max_log_ratio": worst, "eps_e1": eps_e1, "worst_pair": pair}


def chain_frequencies(D: Dendrogram, *, temperature: float, samples: int, thin: int,
                      rng: np.random.Generator, mode: str = "sound", burn_in: int = 1000
                      ) -> dict[str, float]:
    """Empirical state law of the compiled chain: ``samples`` states ``thin`` moves apart.

    Keyed like `target_law` (by `Dendrogram.canonical`); ``n <= 5`` leaves.
    """
    n = check_int("n", D.n, low=3, high=5)
    fit_mcmc(D, temperature=temperature, steps=burn_in, rng=rng, mode=mode)
    nonroot = np.array([x for x in range(n, 2 * n - 1) if x != D.root], np.int64)
    pub_ptr, pub_idx = _csr(D.pub_edges[0], D.pub_edges[1], n)
    pri_ptr, pri_idx = _csr(D.pri_edges[0], D.pri_edges[1], n)
    moves = samples * thin
    kinds = (np.arange(moves) % 2).astype(np.int8)
    codes = K.mcmc_record(D.left, D.right, D.parent, n, nonroot, D.ntot, D.npub, D.npri,
                          D.epub, D.epri, pub_ptr, pub_idx, pri_ptr, pri_idx,
                          rng.random((moves, 3)), kinds, float(temperature), mode == "sound",
                          D.lpub, D.lpri, np.empty(2 * n + 2, np.int64),
                          thin)
    D.refresh()
    values, counts = np.unique(codes, return_counts=True)
    names = {}
    for E in all_dendrograms(n, D.pub_edges, D.pri_edges, D.is_pri):
        names[int(K.cluster_code(E.left, E.right, E.root, n))] = E.canonical()
    return {names[int(v)]: c / samples for v, c in zip(values, counts)}
