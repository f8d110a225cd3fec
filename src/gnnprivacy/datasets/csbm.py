r"""Contextual stochastic block model (CSBM), generated locally: the embedded default dataset.

Model (Deshpande et al., NeurIPS 2018, "Contextual Stochastic Block Models"; the
classes/features variant of e.g. Chien et al., ICLR 2021):

* labels: ``num_nodes`` nodes in ``num_classes`` balanced classes (sizes differ by at
  most one), assigned in random order;
* edges: an SBM. Each unordered pair ``{u, v}``, ``u != v``, is an edge independently with
  probability ``p_in`` if ``y_u = y_v`` and ``p_out`` otherwise, where
  ``p_in = h d / (n/C - 1)`` and ``p_out = (1 - h) d / (n - n/C)``,
  so the expected average degree is ``d`` (``avg_degree``) and the expected
  fraction of intra-class edges (edge homophily) is ``h`` (``homophily``) for balanced
  classes. Sampling is exact and never builds an ``n x n`` matrix: per block the edge count
  is Binomial(#pairs, p), then that many distinct pairs are drawn uniformly (an Erdős–Rényi
  G(m, p) block is G(m, M) with M ~ Binomial).
* features: ``x_v = mu_{y_v} + N(0, I_d)``, with class means ``mu_c = s * e_c`` for
  orthonormal directions ``e_c`` (random, from a QR decomposition; random unit vectors when
  ``C > d``) and ``s = feature_signal``. Orthonormal means are ``s * sqrt(2)`` apart.

The graph is undirected (both directions stored, coalesced) and has no self-loops.
Isolated nodes are possible (no minimum degree is enforced): with average degree
``d`` about ``e^-d`` of the nodes are isolated.
Deterministic for a given ``seed`` (one ``numpy.random.default_rng(seed)`` stream).
"""

from __future__ import annotations

import numpy as np

from gnnprivacy._validation import check_int, check_probability, check_real
from gnnprivacy.errors import InvalidParameterError


def _triangle_pairs(k: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray]:
    """Decode indices ``k`` in ``[0, m(m-1)/2)`` into pairs ``i < j`` of ``range(m)`` (row-major)."""
    k = k.astype(np.int64)

    def start(i):  # index of pair (i, i+1)
        return i * (2 * m - i - 1) // 2

    i = np.floor(((2 * m - 1) - np.sqrt((2.0 * m - 1) ** 2 - 8.0 * k)) / 2).astype(np.int64)
    i = np.clip(i, 0, m - 2)
    i -= (start(i) > k).astype(np.int64)
    i += (start(i + 1) <= k).astype(np.int64)
    j = k - start(i) + i + 1
    return i, j


def _sample_block(rng: np.random.Generator, n_pairs: int, p: float) -> np.ndarray:
    """Distinct uniformly chosen pair indices in ``[0, n_pairs)``, Binomial(n_pairs, p) of them."""
    count = int(rng.binomial(n_pairs, p)) if n_pairs > 0 else 0
    if count == 0:
        return np.empty(0, dtype=np.int64)
    return rng.choice(n_pairs, size=count, replace=False, shuffle=False).astype(np.int64)


def _sample_edges(rng, members: list[np.ndarray], p_in: float, p_out: float) -> np.ndarray:
    """Undirected SBM edges as a (2, E) array with ``src < dst`` (one column per edge)."""
    parts = []
    for a, nodes_a in enumerate(members):
        m = len(nodes_a)
        i, j = _triangle_pairs(_sample_block(rng, m * (m - 1) // 2, p_in), m)
        parts.append(np.stack([nodes_a[i], nodes_a[j]]))
        for nodes_b in members[a + 1:]:
            k = _sample_block(rng, m * len(nodes_b), p_out)
            parts.append(np.stack([nodes_a[k // len(nodes_b)], nodes_b[k % len(nodes_b)]]))
    edges = np.concatenate(parts, axis=1)
    return np.sort(edges, axis=0)


def _class_means(rng, num_classes: int, num_features: int, signal: float) -> np.ndarray:
    g = rng.standard_normal((num_features, num_classes))
    if num_classes <= num_features:
        q, _ = np.linalg.qr(g)
        directions = q[:, :num_classes].T
    else:
        directions = (g / np.linalg.norm(g, axis=0, keepdims=True)).T
    return signal * directions


def csbm_probabilities(num_nodes: int, num_classes: int, avg_degree: float, homophily: float) -> tuple[float, float]:
    """``(p_in, p_out)`` of the CSBM for balanced classes (see the module docstring).

    Raises:
        InvalidParameterError: a probability would exceed 1 (``avg_degree`` too large).
    """
    size = num_nodes / num_classes
    p_in = homophily * avg_degree / (size - 1) if size > 1 else 0.0
    p_out = (1 - homophily) * avg_degree / (num_nodes - size) if num_classes > 1 else 0.0
    if p_in > 1 or p_out > 1 or (size <= 1 and homophily * avg_degree > 0):
        raise InvalidParameterError(
            "avg_degree", "small enough that p_in = h*d/(n/C-1) and p_out = (1-h)*d/(n-n/C) are <= 1",
            avg_degree)
    return p_in, p_out


def generate_csbm_arrays(*, num_nodes: int = 1000, num_classes: int = 4, num_features: int = 32,
                         avg_degree: float = 10.0, homophily: float = 0.8, feature_signal: float = 1.0,
                         seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sample a CSBM graph as numpy arrays ``(x float32 [n, d], y int64 [n], edges int64 [2, E])``.

    ``edges`` holds each undirected edge once, ``src < dst``. Arguments as in
    `generate_csbm`.
    """
    n = check_int("num_nodes", num_nodes, low=2)
    c = check_int("num_classes", num_classes, low=1, high=n)
    d = check_int("num_features", num_features, low=1)
    deg = check_real("avg_degree", avg_degree, low=0.0)
    h = check_probability("homophily", homophily)
    s = check_real("feature_signal", feature_signal, low=0.0)
    if c == 1 and h < 1:
        raise InvalidParameterError("homophily", "1 when num_classes is 1", homophily)
    p_in, p_out = csbm_probabilities(n, c, deg, h)
    rng = np.random.default_rng(check_int("seed", seed, low=0))
    y = rng.permutation(np.arange(n) % c).astype(np.int64)
    members = [np.flatnonzero(y == k) for k in range(c)]
    edges = _sample_edges(rng, members, p_in, p_out)
    means = _class_means(rng, c, d, s)
    x = (means[y] + rng.standard_normal((n, d))).astype(np.float32)
    return x, y, edges


def generate_csbm(*, num_nodes: int = 1000, num_classes: int = 4, num_features: int = 32,
                  avg_degree: float = 10.0, homophily: float = 0.8, feature_signal: float = 1.0,
                  seed: int = 0):
    """Sample a CSBM graph as a PyG ``Data`` (``x`` float32, ``y`` int64, undirected ``edge_index``).

    Args:
        num_nodes: number of nodes ``n`` (>= 2).
        num_classes: number of classes ``C`` (balanced).
        num_features: feature dimension ``d``.
        avg_degree: expected average degree (``2|E|/n``).
        homophily: expected fraction of intra-class edges, in [0, 1].
        feature_signal: norm of each class mean; the noise is standard Gaussian.
        seed: integer seed; the graph is a deterministic function of all arguments.

    Returns:
        ``Data`` with ``edge_index`` holding both directions of every edge (coalesced).
    """
    import torch
    from torch_geometric.data import Data
    from torch_geometric.utils import coalesce

    params = dict(num_nodes=num_nodes, num_classes=num_classes, num_features=num_features,
                  avg_degree=avg_degree, homophily=homophily, feature_signal=feature_signal, seed=seed)
    x, y, edges = generate_csbm_arrays(**params)
    e = torch.from_numpy(edges)
    edge_index = coalesce(torch.cat([e, e.flip(0)], dim=1), num_nodes=num_nodes)
    return Data(x=torch.from_numpy(x), y=torch.from_numpy(y), edge_index=edge_index)
