"""Exact audits of local (discrete-output) mechanisms by enumeration.

For a mechanism with finitely many outputs, the privacy loss is computable exactly: for
inputs ``x, x'`` the tight ε is ``max_y |ln P[M(x)=y] − ln P[M(x')=y]|`` and, for a δ > 0,
the tight ε(δ) solves ``Σ_y max(P[y|x] − e^ε P[y|x'], 0) = δ`` (hockey-stick divergence).
Maximised over the enumerated input pairs, this is the mechanism's exact ε on that input
domain: a lower bound on the true ε that needs no sampling (so no confidence level) and is
tight when the domain contains the worst pair.

Mechanisms are the library's own (`GRR`,
`GRRFS`, `MultiBit`, and any
object with ``probability(x, y)`` returning ``P[M(x_r) = y_r]`` per row), so the audit
reads the exact law they sample from.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import torch

from gnnprivacy._validation import check_int
from gnnprivacy.errors import InvalidParameterError

__all__ = ["exact_epsilon_pair", "exact_epsilon", "grr_audit", "grr_fs_audit", "multibit_audit",
           "feature_rr_audit", "edge_rr_audit",
           "enumerate_outputs"]


def _eps_for_delta(p: np.ndarray, q: np.ndarray, delta: float) -> float:
    """Smallest ε >= 0 with ``Σ max(p − e^ε q, 0) <= δ`` (one direction)."""
    if delta <= 0:
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(p > 0, np.log(p) - np.log(q), -np.inf)
        return float(max(0.0, ratio.max()))
    with np.errstate(divide="ignore", invalid="ignore"):
        loss = np.where(p > 0, np.log(p) - np.log(q), -np.inf)
    order = np.argsort(-loss)
    p_s, q_s, l_s = p[order], q[order], loss[order]
    for i in range(len(l_s)):
        eps = max(l_s[i], 0.0) if np.isfinite(l_s[i]) else 0.0
        hs = float(np.sum(np.maximum(p_s - math.exp(eps) * q_s, 0.0))) if math.isfinite(
            eps) else 1.0
        if hs <= delta:
            # refine inside (l_{i}, l_{i-1}] by bisection
            lo = eps
            hi = l_s[i - 1] if i > 0 and np.isfinite(l_s[i - 1]) else eps
            for _ in range(60):
                mid = 0.5 * (lo + hi)
                if np.sum(np.maximum(p_s - math.exp(mid) * q_s, 0.0)) <= delta:
                    hi = mid
                else:
                    lo = mid
            return float(max(hi, 0.0)) if hi >= lo else float(eps)
    return math.inf


def exact_epsilon_pair(p, q, delta: float = 0.0) -> float:
    """Tight ε(δ) between two output distributions (both directions)."""
    p = np.asarray(p, float)
    q = np.asarray(q, float)
    return max(_eps_for_delta(p, q, delta), _eps_for_delta(q, p, delta))


def exact_epsilon(mechanism, inputs, outputs, *, delta: float = 0.0) -> dict:
    """Exact ε of ``mechanism`` over all pairs of ``inputs`` by enumerating ``outputs``.

    Args:
        mechanism: object with ``probability(x, y)`` (``x``, ``y`` batched ``(n, ...)``).
        inputs: tensor ``(I, ...)`` of candidate inputs.
        outputs: tensor ``(O, ...)`` of every possible output (their probabilities should
            sum to 1 for each input; the sum is reported as ``coverage``).
        delta: δ of the ε(δ) figure (0: pure ε).

    Returns:
        dict with ``epsilon`` (max over pairs), the maximising pair indices, ``coverage``
        (min over inputs of the total enumerated probability, 1 when complete).
    """
    inputs = torch.as_tensor(inputs)
    outputs = torch.as_tensor(outputs)
    n_in, n_out = inputs.shape[0], outputs.shape[0]
    table = np.empty((n_in, n_out))
    for i in range(n_in):
        xi = inputs[i:i + 1].expand(n_out, *inputs.shape[1:])
        table[i] = mechanism.probability(xi, outputs).double().numpy()
    best, pair = 0.0, (0, 0)
    for i, j in itertools.combinations(range(n_in), 2):
        eps = exact_epsilon_pair(table[i], table[j], delta)
        if eps > best:
            best, pair = eps, (i, j)
    return {"epsilon": float(best), "pair": pair, "coverage": float(table.sum(1).min()),
            "num_inputs": n_in, "num_outputs": n_out, "delta": delta, "method": "exact"}


def enumerate_outputs(values, width: int) -> torch.Tensor:
    """Every vector of length ``width`` over ``values`` (``len(values)**width`` rows)."""
    width = check_int("width", width, low=1, high=16)
    return torch.tensor(list(itertools.product(values, repeat=width)))


def grr_audit(epsilon: float, num_categories: int) -> dict:
    """Exact ε of generalized randomized response over ``k`` categories."""
    from gnnprivacy.accounting.units import PrivacyUnit
    from gnnprivacy.mechanisms import GRR

    mech = GRR(epsilon=epsilon, num_categories=num_categories, unit=PrivacyUnit.LABEL)
    cats = torch.arange(num_categories)
    out = exact_epsilon(mech, cats, cats)
    out.update(mechanism="GRR", epsilon_claimed=float(epsilon))
    return out


def _extreme_pair_outputs(d: int, m: int | None, ternary: bool) -> torch.Tensor:
    """One representative output per sufficient-statistic class for the pair (0, 1^d).

    Both laws are exchangeable over coordinates, so P[y | 0] and P[y | 1^d] depend only on
    the number of ones (binary reports) or, for multi-bit, on the number of +1 among the
    ``m`` non-zero entries; one output per class suffices for the pure ε.
    """
    if not ternary:
        return torch.tensor([[1] * w + [0] * (d - w) for w in range(d + 1)])
    return torch.tensor([[1.0] * w + [-1.0] * (m - w) + [0.0] * (d - m) for w in range(m + 1)],
                        dtype=torch.float64)


def grr_fs_audit(*, eps_x: float, m: int, d: int, mode: str = "sound",
                 max_enumerated: int = 8) -> dict:
    """Exact ε of GRR-FS on ``d`` binary features with ``m`` sampled.

    For ``d <= max_enumerated`` every pair of the ``2^d`` inputs is enumerated against all
    ``2^d`` outputs; above, the worst pair ``(0, 1^d)`` is evaluated exactly on one output
    per Hamming-weight class (exact for that pair, hence a valid lower bound, and tight).
    ``epsilon_claimed`` is the figure of ``mode``: ``m eps_x`` (sound) or the RGNN paper's
    ``ln(1 + (m/d)(e^{m eps_x} − 1))`` (spec 004 §9.3, unsound under LDP).
    """
    from gnnprivacy.accounting import grr_fs_epsilon
    from gnnprivacy.mechanisms import GRRFS

    mech = GRRFS.from_feature_epsilon(eps_x, num_features=d, m=m)
    if d <= max_enumerated:
        vectors = enumerate_outputs([0, 1], d)
        out = exact_epsilon(mech, vectors, vectors)
    else:
        pair = torch.stack([torch.zeros(d, dtype=torch.long), torch.ones(d, dtype=torch.long)])
        out = exact_epsilon(mech, pair, _extreme_pair_outputs(d, m, ternary=False))
        out["coverage"] = None
        out["inputs"] = "extreme pair (0, 1^d), one output per Hamming weight"
    out.update(mechanism="GRR-FS", epsilon_claimed=float(grr_fs_epsilon(
        epsilon=eps_x, d=d, m=m, mode=mode)), mode=mode, eps_x=eps_x, m=m, d=d)
    return out


def multibit_audit(*, epsilon: float, d: int, m: int | None = None,
                   max_enumerated: int = 6) -> dict:
    """Exact ε of the multi-bit encoder on ``[0, 1]^d`` (inputs: the corners ``{0, 1}^d``;
    above ``max_enumerated`` features, the extreme pair ``(0, 1^d)`` by output classes)."""
    from gnnprivacy.accounting.units import PrivacyUnit
    from gnnprivacy.mechanisms import MultiBit

    mech = MultiBit(epsilon=epsilon, num_features=d, lower=0.0, upper=1.0, m=m,
                    unit=PrivacyUnit.FEATURE)
    if d <= max_enumerated:
        inputs = enumerate_outputs([0.0, 1.0], d).double()
        out = exact_epsilon(mech, inputs, enumerate_outputs([-1.0, 0.0, 1.0], d).double())
    else:
        pair = torch.stack([torch.zeros(d), torch.ones(d)]).double()
        out = exact_epsilon(mech, pair, _extreme_pair_outputs(d, mech.m, ternary=True))
        out["coverage"] = None
    out.update(mechanism="multi-bit", epsilon_claimed=float(epsilon), m=mech.m, d=d)
    return out


def feature_rr_audit(*, epsilon: float, num_features: int, k: int = 10, theta=None) -> dict:
    """Exact ε of HeteroRR's FeatureRR (spec 001): coordinates are randomised independently,
    so the worst pair of feature vectors differs in every coordinate and the exact ε is the
    sum over coordinates of the largest log-ratio in each ``k x k`` transition matrix."""
    from gnnprivacy.ldp.heterorr.feature_rr import FeatureRR

    mech = FeatureRR(epsilon=epsilon, num_features=num_features, k=k, theta=theta)
    per = []
    for i in range(num_features):
        t = np.log(mech.transition_matrix(i))
        per.append(float((t.max(axis=0) - t.min(axis=0)).max()))
    return {"epsilon": float(sum(per)), "epsilon_claimed": float(epsilon), "per_feature": per,
            "mechanism": "FeatureRR", "method": "exact", "k": k, "delta": 0.0}


def edge_rr_audit(n: int, pub_edges, pri_edges, *, eps_e1: float, c_em: float = 2.0,
                  private_node_set: str = "all") -> dict:
    """Exact audit of EdgeRR's exponential-mechanism step on a tiny graph (``n <= 6``),
    through HeteroRR's enumeration of every dendrogram (`gnnprivacy.ldp.heterorr.audit`)."""
    from gnnprivacy.ldp.heterorr.audit import em_audit

    out = em_audit(n, pub_edges, pri_edges, eps_e1=eps_e1, c_em=c_em,
                   private_node_set=private_node_set)
    return {"epsilon": float(out["max_log_ratio"]), "epsilon_claimed": float(eps_e1),
            "worst_pair": out["worst_pair"], "mechanism": "EdgeRR (exponential mechanism)",
            "method": "exact", "c_em": c_em, "delta": 0.0}


def one_dim_ldp_audit(mechanism: str, *, epsilon: float, d: int) -> dict:
    """The worst-case output ratio of a 1-D feature LDP baseline (spec 001 §5.3) run on each of
    ``d`` coordinates at ``epsilon / d``; coordinates are randomised independently, so the
    worst pair of feature vectors (differing in every coordinate) has ``d`` times one
    coordinate's worst log-ratio.

    Discrete outputs (Duchi's two atoms, the three-output mechanism's ``{-C, 0, C}``) and the
    piecewise-constant densities of PM and PM-SUB are compared over inputs on a grid that
    contains the extremes ``-1, 0, 1`` (where the ratios of these piecewise-linear laws
    peak) and outputs on a grid that contains every breakpoint; the hybrid mechanism's
    atoms and density are compared separately (they never overlap). The result is the
    exact supremum for these laws (``method="exact"``).
    """
    from gnnprivacy.mechanisms.feature_ldp import Duchi, Piecewise, PMSub, ThreeOutput

    d = max(1, int(d))
    eps = float(epsilon) / d
    x = torch.linspace(-1.0, 1.0, 201, dtype=torch.float64)

    def atoms_ratio(probs):                          # probs: (outputs, inputs)
        used = (probs > 0).any(dim=1)                # an output no input can produce is moot
        if not bool((probs[used] > 0).all()):
            return math.inf                          # some input cannot produce a used output
        logs = torch.log(probs[used])
        return float((logs.max(dim=1).values - logs.min(dim=1).values).max())

    def density_ratio(mech, C, breaks):
        y = torch.cat([torch.linspace(-C, C, 4001, dtype=torch.float64),
                       breaks.flatten()]).clamp(-C, C)
        y = torch.cat([y - 1e-12, y + 1e-12]).clamp(-C, C)
        dens = mech.density(x[:, None], y[None, :])
        keep = (dens > 0).all(dim=0)
        logs = torch.log(dens[:, keep])
        return float((logs.max(dim=0).values - logs.min(dim=0).values).max())

    def duchi(e):
        p = Duchi(epsilon=e).prob_positive(x)
        return atoms_ratio(torch.stack([p, 1 - p]))

    def piecewise(e):
        mech = Piecewise(epsilon=e)
        _, C, l, r = mech.params(x)
        return density_ratio(mech, float(C), torch.stack([l, r]))

    if mechanism == "duchi":
        per = duchi(eps)
    elif mechanism == "piecewise":
        per = piecewise(eps)
    elif mechanism == "hybrid":
        per = duchi(eps) if eps <= 0.61 else max(duchi(eps), piecewise(eps))
    elif mechanism == "three-output":
        per = atoms_ratio(torch.stack(ThreeOutput(epsilon=eps).probabilities(x)))
    elif mechanism == "pm-sub":
        mech = PMSub(epsilon=eps)
        _, _, C, g1, g2 = mech.params(x)
        per = density_ratio(mech, float(C), torch.stack([g1, g2]))
    else:
        raise InvalidParameterError("mechanism", "duchi, piecewise, hybrid, three-output or pm-sub",
                                    mechanism)
    return {"epsilon": d * per, "epsilon_claimed": float(epsilon), "per_coordinate": per,
            "d": d, "mechanism": mechanism, "method": "exact", "delta": 0.0}


def edge_rand_audit(*, epsilon: float) -> dict:
    """EdgeRand (Wu et al.): each pair's bit is kept with probability ``e^eps / (1 + e^eps)``;
    one edge changes one bit, so the exact epsilon is the log-odds of keeping it."""
    keep = math.exp(epsilon) / (1.0 + math.exp(epsilon))
    out = exact_epsilon_pair(np.array([keep, 1 - keep]), np.array([1 - keep, keep]))
    return {"epsilon": out, "epsilon_claimed": float(epsilon), "mechanism": "EdgeRand",
            "method": "exact", "delta": 0.0}


def lapgraph_audit(*, epsilon: float, count_share: float = 0.01) -> dict:
    """LapGraph (Wu et al.): Laplace(1/eps2) on every adjacency entry and Laplace(1/eps1) on the
    edge count, then the top-T entries (post-processing). One edge changes one entry and the
    count by 1; the exact privacy loss of the released (noisy matrix, noisy count) is the
    largest log density ratio of the two Laplace laws, found on an output grid."""
    eps1, eps2 = count_share * epsilon, (1.0 - count_share) * epsilon
    worst = 0.0
    for scale in (1.0 / eps1, 1.0 / eps2):
        y = np.linspace(-20 * scale, 20 * scale, 40001)
        worst += float(np.max(np.abs(np.abs(y) - np.abs(y - 1.0)) / scale))
    return {"epsilon": worst, "epsilon_claimed": float(epsilon), "mechanism": "LapGraph",
            "method": "exact", "delta": 0.0, "eps1": eps1, "eps2": eps2}
