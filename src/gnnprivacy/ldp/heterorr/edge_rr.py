"""EdgeRR and privHRG: private-edge release through a fitted PHRG (spec 001 §3.3-3.6, §4.3).

Pipeline: fit the dendrogram by MCMC (exponential mechanism, ``eps_e1``), perturb the private
connection counts with Laplace noise (``eps_e2``, with privHRG's Erdos-Renyi merge of
low-signal subtrees and one shared noise draw per merged subtree), sample private edges from
the noisy probabilities and return their union with the untouched public edges.

*Privacy* (unit ``EDGE``, relation ``ADD_OR_REMOVE`` of one **private** edge; public edges and
the private-node set are fixed and public): ``eps_e = eps_e1 + eps_e2`` by sequential
composition; the MCMC term holds at stationarity only (``guarantee="asymptotic"``; in
``mode="paper"`` it is ``"unsupported"``, spec E10, E11, E16). Two events are emitted, one per
noisy step, into the accountant the caller passes. `priv_hrg` is EdgeRR with every edge
private and ``V-bar = V`` (the privHRG baseline, spec §5.3).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch

from gnnprivacy._validation import check_choice, check_int, check_probability, check_real
from gnnprivacy.accounting.builders import pure_dp_event
from gnnprivacy.accounting.events import ScopedDpEvent
from gnnprivacy.accounting.units import NeighboringRelation, PrivacyUnit
from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.ldp.heterorr import _kernels as K
from gnnprivacy.ldp.heterorr.hrg import (MODES, Dendrogram, build_dendrogram, default_steps,
                                         delta_e, fit_mcmc, temperature)

PRIVATE_NODE_SETS = ("all", "declared", "observed")

__all__ = ["EdgeRRResult", "PRIVATE_NODE_SETS", "edge_rr", "noisy_probs", "priv_hrg",
           "sample_private_edges", "split_edges", "undirected_pairs"]


def undirected_pairs(edge_index, num_nodes: int) -> np.ndarray:
    """Unique undirected pairs ``(2, E)`` with ``u < v`` (self-loops dropped)."""
    ei = np.asarray(edge_index.cpu() if isinstance(edge_index, torch.Tensor) else edge_index,
                    dtype=np.int64)
    if ei.ndim != 2 or ei.shape[0] != 2:
        raise InvalidParameterError("edge_index", "an array of shape (2, E)", ei.shape)
    if ei.size and (ei.min() < 0 or ei.max() >= num_nodes):
        raise InvalidParameterError("edge_index", f"node ids in [0, {num_nodes})", "out of range")
    u, v = np.minimum(ei[0], ei[1]), np.maximum(ei[0], ei[1])
    keep = u != v
    keys = np.unique(u[keep] * num_nodes + v[keep])
    return np.stack([keys // num_nodes, keys % num_nodes])


def to_edge_index(pairs: np.ndarray) -> torch.Tensor:
    """Both directions of undirected ``pairs`` as a coalesced ``edge_index``."""
    from torch_geometric.utils import coalesce

    p = torch.as_tensor(pairs, dtype=torch.long)
    return coalesce(torch.cat([p, p.flip(0)], dim=1))


def split_edges(edge_index, num_nodes: int, *, private_frac: float,
                rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Declare each undirected edge private independently with probability ``private_frac``."""
    rho = check_probability("private_edge_frac", private_frac)
    pairs = undirected_pairs(edge_index, num_nodes)
    private = rng.random(pairs.shape[1]) < rho
    return pairs[:, ~private], pairs[:, private]


def noisy_probs(D: Dendrogram, *, eps_e2: float, rng: np.random.Generator,
                er_merge: bool = True, tau_b: float = 0.05, tau_c: float = 0.01,
                clip: bool = True) -> np.ndarray:
    """Noisy private connection probabilities ``p~_r`` per internal node (spec §3.5, Alg. 3).

    Returns an array indexed ``r - n``. Each private edge is counted in exactly one released
    count (its LCA's, or its merged subtree root's), each count gets one Laplace(1/eps_e2)
    draw, so the step is ``eps_e2``-edge-DP. Merge decisions depend only on private-leaf counts.
    """
    eps = check_real("eps_e2", eps_e2, low=0.0, low_open=True)
    n = D.n
    p = np.zeros(n - 1)
    stack = [D.root]
    while stack:
        r = stack.pop()
        if r < n:
            continue
        lq, rq = int(D.npri[D.left[r]]), int(D.npri[D.right[r]])
        nbar = lq * rq
        pbar = (lq + rq) * (lq + rq - 1) // 2
        lam_b = math.inf if nbar == 0 else 1.0 / (eps * nbar)
        lam_c = math.inf if pbar == 0 else 1.0 / (eps * pbar)
        if er_merge and lam_b >= tau_b and lam_c >= tau_c:
            sub, todo = [], [r]
            while todo:
                x = todo.pop()
                if x >= n:
                    sub.append(x)
                    todo.extend((D.left[x], D.right[x]))
            sub = np.asarray(sub)
            m = float(D.epri[sub].sum())
            val = (m + rng.laplace(0.0, 1.0 / eps)) / pbar if pbar > 0 else 0.0
            p[sub - n] = min(max(val, 0.0), 1.0) if clip else val
        else:
            if nbar > 0:
                val = (D.epri[r] + rng.laplace(0.0, 1.0 / eps)) / nbar
                p[r - n] = min(max(val, 0.0), 1.0) if clip else val
            stack.extend((D.left[r], D.right[r]))
    return p


def sample_private_edges(D: Dendrogram, probs: np.ndarray, rng: np.random.Generator
                         ) -> np.ndarray:
    """Sample ``Binomial(N-bar_r, p~_r)`` distinct private-leaf pairs at each internal node."""
    order, lo, hi = K.leaf_ranges(D.left, D.right, D.root, D.n, D.is_pri)
    internal = D.internal
    lsz = hi[D.left[internal]] - lo[D.left[internal]]
    rsz = hi[D.right[internal]] - lo[D.right[internal]]
    nbar = lsz * rsz
    pr = np.clip(probs, 0.0, 1.0)
    counts = rng.binomial(np.maximum(nbar, 0), np.where(nbar > 0, pr, 0.0))
    out = []
    for j in np.flatnonzero(counts):
        r = internal[j]
        a0, b0, nb = lo[D.left[r]], lo[D.right[r]], int(rsz[j])
        idx = rng.choice(int(nbar[j]), size=int(counts[j]), replace=False)
        out.append(np.stack([order[a0 + idx // nb], order[b0 + idx % nb]]))
    if not out:
        return np.zeros((2, 0), np.int64)
    e = np.concatenate(out, axis=1)
    return np.stack([e.min(axis=0), e.max(axis=0)])


@dataclass
class EdgeRRResult:
    """What `edge_rr` returns: the released edges and what the accountant needs."""

    edge_index: torch.Tensor
    events: list
    guarantee: str
    info: dict = field(default_factory=dict)


def _private_node_mask(num_nodes: int, pri: np.ndarray, how: str, declared) -> np.ndarray:
    if how == "all":
        return np.ones(num_nodes, np.bool_)
    if how == "observed":
        mask = np.zeros(num_nodes, np.bool_)
        mask[pri.reshape(-1)] = True
        return mask
    if declared is None:
        raise InvalidParameterError("private_nodes", "a boolean mask when "
                                    "private_node_set='declared'", None)
    mask = np.asarray(declared, np.bool_)
    if mask.shape != (num_nodes,):
        raise InvalidParameterError("private_nodes", f"a boolean mask of shape ({num_nodes},)",
                                    mask.shape)
    if pri.size and not mask[pri.reshape(-1)].all():
        raise InvalidParameterError("private_nodes", "a set containing every endpoint of a "
                                    "private edge", "a set missing some")
    return mask


def edge_rr(pub_edges: np.ndarray, pri_edges: np.ndarray, num_nodes: int, *, epsilon: float,
            generator: np.random.Generator, split: float = 0.5, mode: str = "sound",
            c_em: float | None = None, private_node_set: str | None = None,
            private_nodes=None, steps: int | None = None, n_pub_moves: int = 1,
            n_priv_moves: int = 1, er_merge: bool = True, accountant=None) -> EdgeRRResult:
    """Release ``E_pub u E~_pri`` with ``epsilon``-edge-DP for the private edges.

    Args:
        pub_edges: public undirected pairs ``(2, E)``, ``u < v``.
        pri_edges: private undirected pairs ``(2, E)``, ``u < v``, disjoint from the public ones.
        num_nodes: ``n`` (all nodes are leaves of the dendrogram).
        epsilon: ``eps_e > 0``; ``eps_e1 = split * eps_e`` (MCMC), ``eps_e2`` the rest (Laplace).
        generator: a ``numpy.random.Generator``.
        split: ``eps_e1 / eps_e`` in ``(0, 1)``.
        mode: ``"sound"`` (joint acceptance, ``c_em = 2``, ``V-bar = V``) or ``"paper"``
            (alternating chain, ``c_em = 1``, ``V-bar`` = nodes with a private edge).
        c_em: the exponential mechanism's constant (overrides the mode's default).
        private_node_set: ``"all"``, ``"declared"`` or ``"observed"`` (overrides the mode's default).
        private_nodes: boolean mask for ``private_node_set="declared"``.
        steps: MCMC moves (default ``ceil(50 n / 65536) * 65536``).
        accountant: if given, the two events are composed into it (unit ``EDGE``).

    Raises:
        InvalidParameterError: ``epsilon <= 0``, ``split`` outside (0, 1), no private edge, ...
    """
    eps = check_real("eps_e", epsilon, low=0.0, low_open=True)
    if math.isinf(eps):
        raise InvalidParameterError("eps_e", "a finite real number > 0", epsilon)
    split = check_real("split", split, low=0.0, high=1.0, low_open=True, high_open=True)
    mode = check_choice("mode", mode, MODES)
    c_em = (2.0 if mode == "sound" else 1.0) if c_em is None else check_real(
        "c_em", c_em, low=0.0, low_open=True)
    how = ("all" if mode == "sound" else "observed") if private_node_set is None else \
        check_choice("private_node_set", private_node_set, PRIVATE_NODE_SETS)
    num_nodes = check_int("num_nodes", num_nodes, low=2)
    pub = np.asarray(pub_edges, np.int64).reshape(2, -1)
    pri = np.asarray(pri_edges, np.int64).reshape(2, -1)
    if pri.shape[1] == 0:
        raise InvalidParameterError("private edges", "at least one private edge (EdgeRR "
                                    "protects private edges; raise private_edge_frac)", 0)
    is_pri = _private_node_mask(num_nodes, pri, how, private_nodes)
    eps1, eps2 = split * eps, (1.0 - split) * eps
    n_bar = int(is_pri.sum())
    T = temperature(eps1, n_bar, c_em)
    D = build_dendrogram(num_nodes, pub, pri, is_pri, generator)
    steps = default_steps(num_nodes) if steps is None else check_int("steps", steps, low=0)
    chain = fit_mcmc(D, temperature=T, steps=steps, rng=generator, mode=mode,
                     n_pub_moves=n_pub_moves, n_priv_moves=n_priv_moves)
    probs = noisy_probs(D, eps_e2=eps2, rng=generator, er_merge=er_merge)
    sampled = sample_private_edges(D, probs, generator)
    pairs = undirected_pairs(np.concatenate([pub, sampled], axis=1), num_nodes)
    sound = mode == "sound" and c_em >= 2 and how != "observed"
    guarantee = "asymptotic" if sound else "unsupported"
    events = [_edge_event(eps1), _edge_event(eps2)]
    if accountant is not None:
        for ev in events:
            accountant.compose(ev)
    info = {"eps_e1": eps1, "eps_e2": eps2, "c_em": c_em, "mode": mode,
            "private_node_set": how, "n_bar": n_bar, "delta_e": delta_e(n_bar),
            "temperature": T, "mcmc_steps": chain["steps"], "mcmc_accepted": chain["accepted"],
            "loglik_pub": chain["lpub"], "loglik_pri": chain["lpri"],
            "num_public_edges": int(pub.shape[1]), "num_private_edges": int(pri.shape[1]),
            "num_sampled_private_edges": int(sampled.shape[1]),
            "num_released_edges": int(pairs.shape[1])}
    return EdgeRRResult(to_edge_index(pairs), events, guarantee, info)


def priv_hrg(edge_index, num_nodes: int, *, epsilon: float, generator: np.random.Generator,
             accountant=None, **kwargs) -> EdgeRRResult:
    """privHRG (Xiao et al. KDD 2014): EdgeRR with every edge private and ``V-bar = V``."""
    pairs = undirected_pairs(edge_index, num_nodes)
    return edge_rr(np.zeros((2, 0), np.int64), pairs, num_nodes, epsilon=epsilon,
                   generator=generator, private_node_set="all", accountant=accountant,
                   **kwargs)


def _edge_event(eps: float) -> ScopedDpEvent:
    return ScopedDpEvent(pure_dp_event(epsilon=eps), PrivacyUnit.EDGE,
                         NeighboringRelation.ADD_OR_REMOVE)
