"""The public-private hierarchical random graph (PHRG) and its MCMC (spec 001 §3.3-3.4).

A dendrogram ``D`` is a full binary tree over the nodes. At internal node ``r`` with subtrees
``A_r``, ``B_r``: ``N_r = |A_r n V_pub| |B_r n V_pub|``, ``N-bar_r = |A_r n V-bar| |B_r n V-bar|``,
``e_r`` / ``e-bar_r`` the public / private edges whose LCA is ``r``, and

    L_pub(D) = sum_r N_r chi(e_r / N_r),   L_pri(D) = sum_r N-bar_r chi(e-bar_r / N-bar_r)

(chi(t) = t log t + (1-t) log(1-t); the paper's Eq. 11 sign error is dropped, spec E13).
The chain proposes Clauset's symmetric move and accepts

* ``mode="sound"`` (default): every move with ``min(1, exp(dL_pub + T dL_pri))``, so it targets
  ``pi(D) ~ exp(L_pub(D)) exp(T L_pri(D))``, an exponential mechanism with score ``L_pri``,
  sensitivity ``Delta_e`` (corrected Lemma 4) and ``T = eps_e1 / (c_em Delta_e)``, ``c_em = 2``;
* ``mode="paper"``: the alternating chain of [S] Alg. 2 (``n_pub_moves`` public moves accepted
  on ``dL_pub``, then ``n_priv_moves`` private moves on ``T dL_pri``), no proved stationary law
  (spec E16).

Likelihood updates are O(1) count updates plus one cross-edge count over the smaller subtree
(stamping), compiled by numba when available (`_kernels`).

*Privacy*: exact sampling from ``pi`` is ``eps_e1``-edge-DP for a fixed private-node set and
fixed public edges (sound mode); a finite chain is only approximately ``pi``, so the event is
tagged ``asymptotic`` (spec E31). Paper mode is tagged ``unsupported``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from gnnprivacy._validation import check_choice, check_int, check_real
from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.ldp.heterorr import _kernels as K

MODES = ("sound", "paper")

__all__ = ["Dendrogram", "MODES", "default_steps", "delta_e", "fit_mcmc", "random_dendrogram",
           "temperature"]


def delta_e(n_bar: int) -> float:
    """Corrected Lemma 4: ``log N + (N-1) log(N/(N-1))`` at ``N = ceil(n/2) floor(n/2)``; 0 if N <= 1."""
    n_bar = check_int("n_bar", n_bar, low=0)
    N = math.ceil(n_bar / 2) * (n_bar // 2)
    if N <= 1:
        return 0.0
    return math.log(N) + (N - 1) * math.log(N / (N - 1))


def delta_e_paper(n_bar: int) -> float:
    """The main text's Eq. 15 (omits the factor ``N-1``; under-estimates, spec E14)."""
    N = math.ceil(n_bar / 2) * (n_bar // 2)
    return 0.0 if N <= 1 else math.log(N) + math.log(1 + 1 / (N - 1))


def temperature(eps_e1: float, n_bar: int, c_em: float = 2.0) -> float:
    """``T = eps_e1 / (c_em Delta_e)`` (0 when ``Delta_e = 0``)."""
    eps = check_real("eps_e1", eps_e1, low=0.0, low_open=True)
    d = delta_e(n_bar)
    return 0.0 if d == 0 else eps / (check_real("c_em", c_em, low=0.0, low_open=True) * d)


def default_steps(num_leaves: int) -> int:
    """``ceil(50 n / 65536) * 65536`` (what [R] effectively runs; spec §3.4)."""
    return max(1, math.ceil(50 * num_leaves / 65536)) * 65536


def _csr(u: np.ndarray, v: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    src = np.concatenate([u, v])
    dst = np.concatenate([v, u])
    order = np.argsort(src, kind="stable")
    ptr = np.zeros(n + 1, np.int64)
    np.add.at(ptr, src + 1, 1)
    return np.cumsum(ptr), dst[order].astype(np.int64)


def random_dendrogram(n: int, rng: np.random.Generator):
    """A seeded random full binary tree over ``n >= 2`` leaves (random coalescent)."""
    n = check_int("n", n, low=2)
    left = np.full(2 * n - 1, -1, np.int64)
    right = np.full(2 * n - 1, -1, np.int64)
    parent = np.full(2 * n - 1, -1, np.int64)
    pool = list(rng.permutation(n))
    picks = rng.random((n - 1, 2))
    for j, x in enumerate(range(n, 2 * n - 1)):
        for side, arr in ((0, left), (1, right)):
            i = min(int(picks[j, side] * len(pool)), len(pool) - 1)
            pool[i], pool[-1] = pool[-1], pool[i]
            child = pool.pop()
            arr[x] = child
            parent[child] = x
        pool.append(x)
    return left, right, parent, 2 * n - 2


@dataclass
class Dendrogram:
    """A PHRG dendrogram with its counts; see the module docstring for the layout."""

    n: int
    left: np.ndarray
    right: np.ndarray
    parent: np.ndarray
    root: int
    is_pub: np.ndarray
    is_pri: np.ndarray
    pub_edges: np.ndarray   # (2, E_pub) u < v
    pri_edges: np.ndarray   # (2, E_pri) u < v

    def __post_init__(self):
        self.refresh()

    def refresh(self) -> None:
        """Recompute every count and both log-likelihoods from scratch."""
        (self.ntot, self.npub, self.npri, self.epub, self.epri, self.lpub,
         self.lpri) = K.recompute(self.left, self.right, self.parent, self.root, self.n,
                                  self.is_pub, self.is_pri, self.pub_edges[0], self.pub_edges[1],
                                  self.pri_edges[0], self.pri_edges[1])

    def full_loglik(self) -> tuple[float, float]:
        """``(L_pub, L_pri)`` recomputed from scratch (does not change the stored state)."""
        out = K.recompute(self.left, self.right, self.parent, self.root, self.n, self.is_pub,
                          self.is_pri, self.pub_edges[0], self.pub_edges[1], self.pri_edges[0],
                          self.pri_edges[1])
        return float(out[5]), float(out[6])

    @property
    def internal(self) -> np.ndarray:
        return np.arange(self.n, 2 * self.n - 1)

    def n_bar(self) -> np.ndarray:
        """``N-bar_r`` of every internal node (index ``r - n``)."""
        r = self.internal
        return self.npri[self.left[r]] * self.npri[self.right[r]]

    def canonical(self) -> str:
        """A label-free string of the tree shape over leaf ids (for enumeration tests)."""
        def rec(x):
            if x < self.n:
                return str(x)
            a, b = sorted((rec(self.left[x]), rec(self.right[x])))
            return f"({a},{b})"
        return rec(self.root)


def build_dendrogram(num_nodes: int, pub_edges: np.ndarray, pri_edges: np.ndarray,
                     is_pri: np.ndarray, rng: np.random.Generator) -> Dendrogram:
    """A random dendrogram over all nodes with the given edge sets and private-node set."""
    is_pub = np.zeros(num_nodes, np.bool_)
    is_pub[pub_edges.reshape(-1)] = True
    left, right, parent, root = random_dendrogram(num_nodes, rng)
    return Dendrogram(num_nodes, left, right, parent, root, is_pub, np.asarray(is_pri, np.bool_),
                      np.ascontiguousarray(pub_edges, np.int64),
                      np.ascontiguousarray(pri_edges, np.int64))


def fit_mcmc(D: Dendrogram, *, temperature: float, steps: int, rng: np.random.Generator,
             mode: str = "sound", n_pub_moves: int = 1, n_priv_moves: int = 1,
             chunk: int = 1 << 18, check_every_chunk: bool = True) -> dict:
    """Run ``steps`` moves on ``D`` in place (fixed step count, spec E12).

    Returns a dict with ``steps``, ``accepted``, ``lpub``, ``lpri`` and ``max_drift`` (largest
    gap between the incremental and the recomputed likelihoods seen at chunk ends).
    """
    mode = check_choice("mode", mode, MODES)
    steps = check_int("steps", steps, low=0)
    n_pub_moves = check_int("n_pub_moves", n_pub_moves, low=0)
    n_priv_moves = check_int("n_priv_moves", n_priv_moves, low=0)
    if n_pub_moves + n_priv_moves == 0:
        raise InvalidParameterError("n_pub_moves", "n_pub_moves + n_priv_moves >= 1", 0)
    if D.n < 3:
        return {"steps": 0, "accepted": 0, "lpub": D.lpub, "lpri": D.lpri, "max_drift": 0.0}
    nonroot = np.array([x for x in range(D.n, 2 * D.n - 1) if x != D.root], np.int64)
    pub_ptr, pub_idx = _csr(D.pub_edges[0], D.pub_edges[1], D.n)
    pri_ptr, pri_idx = _csr(D.pri_edges[0], D.pri_edges[1], D.n)
    stack = np.empty(2 * D.n + 2, np.int64)
    period = n_pub_moves + n_priv_moves
    lpub, lpri, accepted, done, drift = D.lpub, D.lpri, 0, 0, 0.0
    while done < steps:
        size = min(chunk, steps - done)
        uniforms = rng.random((size, 3))
        kinds = ((np.arange(done, done + size) % period) >= n_pub_moves).astype(np.int8)
        lpub, lpri, acc = K.mcmc_run(
            D.left, D.right, D.parent, D.n, nonroot, D.ntot, D.npub, D.npri, D.epub, D.epri,
            pub_ptr, pub_idx, pri_ptr, pri_idx, uniforms, kinds, float(temperature),
            mode == "sound", lpub, lpri, stack)
        accepted += acc
        done += size
        if check_every_chunk:
            full_pub, full_pri = D.full_loglik()
            drift = max(drift, abs(full_pub - lpub), abs(full_pri - lpri))
            if drift > 1e-6 * max(1.0, abs(full_pub) + abs(full_pri)):
                raise RuntimeError(f"PHRG likelihood bookkeeping drifted by {drift:g}")
            lpub, lpri = full_pub, full_pri
    D.lpub, D.lpri = lpub, lpri
    return {"steps": done, "accepted": accepted, "lpub": lpub, "lpri": lpri,
            "max_drift": drift}
