"""GRID (Graph Link Disguise): output perturbation against link stealing.

Lou et al., "GRID: Protecting Training Graph from Link Stealing Attacks on GNN Models"
(spec 003 §4). After training, GRID adds crafted noise to the released probability vectors of
a small set of *core* nodes so that the similarity of linked pairs drops to the level of
n-hop (indirect) neighbours, while keeping every node's prediction:

1. ``delta`` = mean ``sim`` over (at most 1,000 sampled) pairs at distance ``n``;
2. core nodes ``N_c`` = Algorithm 1 (a similarity-weighted vertex cover of the edges with
   ``sim >= delta``);
3. for each core node, OPT-GRID (Eq. 8) by Algorithm 2, all core nodes solved at once.

Guarantees checked on every run (``mode="robust"``, the default; a violation raises
`GridInvariantError`): every released vector is a probability vector; its top-1 equals
the clean top-1 (so model accuracy is unchanged exactly); ``|r_i - v_i|_1 <= theta``; non-core
rows are bit-identical to the (float64, row-renormalised) clean rows; the core set covers every
edge with ``sim >= delta``. ``mode="paper"`` runs the paper's literal ConstraintCheck, whose
defects (sum-to-one broken, label flips on ties) are counted in ``violations`` instead.

*Privacy*: empirical only. GRID gives no differential-privacy guarantee; the "formal
guarantee" of the paper concerns utility (top-1, distribution, L1 budget). No privacy event is
emitted and no epsilon is claimed.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field

import numpy as np

from gnnprivacy._estimator import EstimatorParams
from gnnprivacy._validation import check_choice, check_int, check_positive, check_real
from gnnprivacy.defenses.grid.core import PICKS, edge_weights, select_core_nodes
from gnnprivacy.defenses.grid.nhop import Q_MODES, adjacency, estimate_delta, nhop_rows
from gnnprivacy.defenses.grid.projection import MODES, SUM_TOL
from gnnprivacy.defenses.grid.similarity import SIMILARITIES, unit_terms
from gnnprivacy.defenses.grid.solver import (DEFAULT_LR, NORM_GRADS, OBJECTIVES, STEPS, SolverSettings,
                                             objective_terms, solve_batch)
from gnnprivacy.errors import InvalidParameterError

__all__ = ["GRID", "GRIDResult", "GridInvariantError", "check_posteriors", "check_release"]


class GridInvariantError(AssertionError):
    """A released output broke one of GRID's utility guarantees (a bug, never expected)."""


def check_posteriors(probs, *, name: str = "probs", atol: float = 1e-6) -> np.ndarray:
    """Validate probability vectors (finite, >= 0, rows summing to 1 within ``atol``);
    return them as float64 rows renormalised to sum exactly-ish to 1."""
    v = np.asarray(probs.detach().cpu().numpy() if hasattr(probs, "detach") else probs,
                   dtype=np.float64)
    if v.ndim != 2 or v.shape[0] == 0 or v.shape[1] < 2:
        raise InvalidParameterError(name, "an (N, A) array of probability vectors with A >= 2",
                                    v.shape)
    if not np.isfinite(v).all():
        raise InvalidParameterError(name, "finite probability vectors",
                                    f"{int((~np.isfinite(v)).sum())} non-finite entries")
    if (v < 0).any():
        raise InvalidParameterError(name, "non-negative probability vectors",
                                    f"minimum entry {v.min():.3g}")
    sums = v.sum(1)
    bad = np.abs(sums - 1.0) > atol
    if bad.any():
        raise InvalidParameterError(name, f"rows summing to 1 (within {atol:g}); pass softmax "
                                    "outputs, not logits", f"{int(bad.sum())} rows, e.g. row "
                                    f"{int(np.argmax(bad))} sums to {sums[bad][0]:.6g}")
    return v / sums[:, None]


def _edges(edge_index, num_nodes: int) -> np.ndarray:
    from gnnprivacy.datasets.link_splits import undirected_edges

    ei = np.asarray(edge_index.cpu().numpy() if hasattr(edge_index, "cpu") else edge_index)
    if ei.size == 0:
        return np.zeros((0, 2), np.int64)
    if not np.issubdtype(ei.dtype, np.integer):
        raise InvalidParameterError("edge_index", "an integer array of shape (2, E)", ei.dtype)
    if ei.min() < 0 or ei.max() >= num_nodes:
        raise InvalidParameterError("edge_index", f"node ids in [0, {num_nodes})",
                                    f"ids in [{ei.min()}, {ei.max()}]")
    return undirected_edges(ei)


def check_release(v, r, core, theta, *, top=None, covered_edges=None, tol=SUM_TOL) -> dict:
    """Check GRID's guarantees on a release; return the violation counts (all 0 when valid).

    Keys: ``not_distribution`` (sum off by > ``tol`` or an entry outside [0, 1]),
    ``label_changed``, ``over_budget`` (L1 > theta + 1e-9), ``non_core_changed`` (any bit),
    ``uncovered_edges`` (of ``covered_edges`` (E, 2), neither endpoint in the core).
    """
    core_mask = np.zeros(v.shape[0], dtype=bool)
    core_mask[np.asarray(core, dtype=np.int64)] = True
    top = v.argmax(1) if top is None else top
    dist = (np.abs(r.sum(1) - 1.0) > tol) | (r < 0).any(1) | (r > 1).any(1)
    out = {"not_distribution": int(dist.sum()), "label_changed": int((r.argmax(1) != top).sum()),
           "over_budget": int((np.abs(r - v).sum(1) > theta + 1e-9).sum()),
           "non_core_changed": int((r[~core_mask] != v[~core_mask]).any(1).sum()),
           "uncovered_edges": 0}
    if covered_edges is not None and len(covered_edges):
        e = np.asarray(covered_edges)
        out["uncovered_edges"] = int((~(core_mask[e[:, 0]] | core_mask[e[:, 1]])).sum())
    return out


@dataclass
class GRIDResult:
    """What `GRID.fit` returns.

    Attributes:
        released: ``(N, A)`` float64 released vectors ``R = V + S``.
        clean: ``(N, A)`` float64 clean vectors ``V`` (input renormalised).
        core: sorted core node ids.
        delta: the core threshold.
        seconds: wall-clock time of ``fit``.
        diagnostics: per-core-node arrays (``iterations``, ``backtracks``, ``c_min``,
            ``D_before``, ``D_after``, ``l1``, ``num_P``, ``num_Q``) and run facts.
        violations: `check_release` counts (all 0 in robust mode).
    """

    released: np.ndarray
    clean: np.ndarray
    core: np.ndarray
    delta: float
    seconds: float
    diagnostics: dict = field(default_factory=dict)
    violations: dict = field(default_factory=dict)

    @property
    def num_core_nodes(self) -> int:
        return int(self.core.size)

    @property
    def l1_distortion(self) -> np.ndarray:
        """``|r_i - v_i|_1`` per node."""
        return np.abs(self.released - self.clean).sum(1)

    @property
    def max_l1_distortion(self) -> float:
        return float(self.l1_distortion.max(initial=0.0))

    @property
    def gan(self) -> float:
        """Graph-averaged noise ``(1/N) sum_i |r_i - v_i|_1``."""
        return float(self.l1_distortion.mean())

    @property
    def als(self) -> float:
        """Averaged label loss: share of nodes whose top-1 changed (spec §9 A10)."""
        return float((self.released.argmax(1) != self.clean.argmax(1)).mean())

    def summary(self) -> dict:
        """Scalar facts for a run record."""
        return {"num_core_nodes": self.num_core_nodes, "max_l1_distortion": self.max_l1_distortion,
                "grid_seconds": self.seconds, "grid_delta": self.delta, "gan": self.gan,
                "als": self.als, **{f"violations_{k}": v for k, v in self.violations.items()},
                **{k: v for k, v in self.diagnostics.items() if np.isscalar(v)}}


class GRID(EstimatorParams):
    """GRID defence (spec 003 §4): ``GRID(theta=0.4, n_hop=3).fit(edge_index, probs)``.

    Args:
        theta: L1 distortion budget per node, in (0, 2].
        n_hop: the hop ``n`` (>= 2) whose similarity level linked pairs are pulled to.
        max_iter: Algorithm 2's ``K`` (20).
        lr: Algorithm 2's primal step ``alpha`` (default 0.01 with ``step="raw"``, 0.1 with
            ``"normalized"``, where every iteration moves by ``lr * theta``).
        dual_lr: Algorithm 2's dual step ``beta``.
        tol: Algorithm 2's stopping tolerance.
        delta_pairs: at most this many n-hop pairs estimate delta (1,000).
        similarity: ``"corr+cos"`` (paper), ``"cos"`` or ``"corr"``.
        objective: ``"paper"`` (Eq. 8, signed sums), ``"mean"`` or ``"gap_sq"``.
        q_mode: ``"exact"`` (distance exactly n) or ``"within"`` (2..n).
        q_max: optional cap on ``|Q_i|`` (seeded uniform subsample); default none.
        mode: ConstraintCheck ``"robust"`` (default) or ``"paper"`` (literal, defective).
        top1_margin: robust mode's margin ``tau``.
        norm_grad: ``"l1_sign"`` (sign subgradient) or ``"paper_l2"`` (s/|s|).
        step: ``"raw"`` (the paper's Algorithm 2: ``alpha grad D``) or ``"normalized"``
            (``alpha theta grad D / |grad D|``, scale-free; see `gnnprivacy.defenses.grid.solver`).
        pick: Algorithm 1 adds the ``"higher"`` (paper) or ``"lower"`` wdeg endpoint.
        use_core_selection: ``False`` solves every node with degree > 0 (Table VII ablation).
        seed: seeds delta's sampling and the Q subsampling.
        chunk_size: core nodes whose n-hop sets are built at once (memory bound).

    *Privacy*: empirical defence only; no DP guarantee and no privacy event (see module doc).

    Example:
        >>> import torch
        >>> from gnnprivacy.defenses import GRID
        >>> edge_index = torch.tensor([[0, 1, 1, 2, 2, 3], [1, 0, 2, 1, 3, 2]])   # a path 0-1-2-3
        >>> probs = torch.softmax(torch.randn(4, 3, generator=torch.Generator().manual_seed(0)), 1)
        >>> result = GRID(theta=0.4, n_hop=2).fit(edge_index, probs)
        >>> bool((result.released.argmax(1) == probs.numpy().argmax(1)).all())   # predictions kept
        True
    """

    def __init__(self, *, theta: float = 0.4, n_hop: int = 3, max_iter: int = 20,
                 lr: float | None = None, dual_lr: float = 0.01, tol: float = 1e-6,
                 delta_pairs: int = 1000, similarity: str = "corr+cos", objective: str = "paper",
                 q_mode: str = "exact", q_max: int | None = None, mode: str = "robust",
                 top1_margin: float = 1e-6, norm_grad: str = "l1_sign", pick: str = "higher",
                 use_core_selection: bool = True, seed: int = 0, chunk_size: int = 1024,
                 step: str = "raw"):
        self.theta = check_real("theta", theta, low=0.0, high=2.0, low_open=True)
        self.n_hop = check_int("n_hop", n_hop, low=2)
        step = check_choice("step", step, STEPS)
        self.settings = SolverSettings(
            theta=self.theta, lr=DEFAULT_LR[step] if lr is None else check_positive("lr", lr),
            step=step,
            dual_lr=check_real("dual_lr", dual_lr, low=0.0),
            tol=check_real("tol", tol, low=0.0), max_iter=check_int("max_iter", max_iter, low=1),
            top1_margin=check_real("top1_margin", top1_margin, low=0.0),
            mode=check_choice("mode", mode, MODES),
            objective=check_choice("objective", objective, OBJECTIVES),
            similarity=check_choice("similarity", similarity, SIMILARITIES),
            norm_grad=check_choice("norm_grad", norm_grad, NORM_GRADS))
        self.delta_pairs = check_int("delta_pairs", delta_pairs, low=1)
        self.q_mode = check_choice("q_mode", q_mode, Q_MODES)
        self.q_max = None if q_max is None else check_int("q_max", q_max, low=1)
        self.pick = check_choice("pick", pick, PICKS)
        if not isinstance(use_core_selection, bool):
            raise InvalidParameterError("use_core_selection", "a bool", use_core_selection)
        self.use_core_selection = use_core_selection
        self.seed = check_int("seed", seed, low=0)
        self.chunk_size = check_int("chunk_size", chunk_size, low=1)

    def __repr__(self) -> str:
        s = self.settings
        return (f"GRID(theta={self.theta}, n_hop={self.n_hop}, mode={s.mode!r}, "
                f"objective={s.objective!r}, similarity={s.similarity!r}, max_iter={s.max_iter}, "
                f"lr={s.lr}, step={s.step!r}, q_mode={self.q_mode!r}, "
                f"use_core_selection={self.use_core_selection})")

    # -- aggregation of the P and Q terms ---------------------------------------------------
    def _terms(self, adj, nodes, unit, cunit, rng):
        m, A = len(nodes), unit.shape[1]
        aP, bP, aQ, bQ = (np.zeros((m, A)) for _ in range(4))
        nP, nQ = np.zeros(m), np.zeros(m)
        for start in range(0, m, self.chunk_size):
            sl = slice(start, start + self.chunk_size)
            src = nodes[sl]
            p = adj[src]
            q = nhop_rows(adj, src, self.n_hop, self.q_mode)
            if self.q_max is not None:
                q = _subsample_rows(q, self.q_max, rng)
            aP[sl], bP[sl], nP[sl] = p @ unit, p @ cunit, np.diff(p.indptr)
            aQ[sl], bQ[sl], nQ[sl] = q @ unit, q @ cunit, np.diff(q.indptr)
        return aP, bP, nP, aQ, bQ, nQ

    # -- public API -------------------------------------------------------------------------
    def fit(self, edge_index, probs) -> GRIDResult:
        """Defend the outputs ``probs`` (N, A) of a model trained on the graph ``edge_index``.

        Raises:
            InvalidParameterError: ``probs`` not probability vectors, bad ``edge_index``.
            GridInvariantError: a guarantee failed (robust mode; never expected).
        """
        t0 = time.perf_counter()
        v = check_posteriors(probs)
        num = v.shape[0]
        edges = _edges(edge_index, num)
        rng = np.random.default_rng(np.random.SeedSequence([self.seed, 3]))
        cfg = self.settings
        if len(edges) == 0:
            warnings.warn("GRID: the graph has no edges; nothing to disguise, outputs released "
                          "unchanged", RuntimeWarning, stacklevel=2)
            res = GRIDResult(released=v.copy(), clean=v, core=np.zeros(0, np.int64),
                             delta=float("nan"), seconds=time.perf_counter() - t0,
                             diagnostics={"delta_pairs": 0})
            res.violations = check_release(v, res.released, res.core, self.theta)
            return res
        adj = adjacency(edges, num)
        delta, dinfo = estimate_delta(adj, v, self.n_hop, max_pairs=self.delta_pairs,
                                      kind=cfg.similarity, generator=rng)
        w, wdeg = edge_weights(v, edges, cfg.similarity)
        if self.use_core_selection:
            core = select_core_nodes(edges, w, wdeg, delta, pick=self.pick)
            covered = edges[w >= delta] if np.isfinite(delta) else edges[:0]
        else:
            core = np.flatnonzero(np.diff(adj.indptr) > 0)
            covered = edges
        unit, cunit = unit_terms(v)
        aP, bP, nP, aQ, bQ, nQ = self._terms(adj, core, unit, cunit, rng)
        a, b = objective_terms(aP, bP, nP, aQ, bQ, nQ, cfg.objective)
        top = v.argmax(1)
        s, diag = solve_batch(v[core], a, b, cfg, top=top[core])
        released = v.copy()
        released[core] = v[core] + s
        seconds = time.perf_counter() - t0
        diagnostics = {"delta_pairs": dinfo["pairs"], "delta_exact": dinfo["exact"],
                       "delta_fallback": dinfo["fallback"],
                       "mean_iterations": float(diag["iterations"].mean()) if core.size else 0.0,
                       "total_backtracks": int(diag["backtracks"].sum()),
                       "max_abs_dual": diag["max_abs_dual"],
                       "objective_before": float(diag["D_before"].sum()),
                       "objective_after": float(diag["D_after"].sum()),
                       "mean_Q_size": float(nQ.mean()) if core.size else 0.0,
                       "covered_edges": int(len(covered)), "num_edges": int(len(edges)),
                       "per_node": {"iterations": diag["iterations"], "backtracks": diag["backtracks"],
                                    "c_min": diag["c_min"], "D_before": diag["D_before"],
                                    "D_after": diag["D_after"], "num_P": nP, "num_Q": nQ}}
        res = GRIDResult(released=released, clean=v, core=core, delta=float(delta),
                         seconds=seconds, diagnostics=diagnostics)
        res.violations = check_release(v, released, core, self.theta, top=top,
                                       covered_edges=covered)
        if cfg.mode == "robust" and any(res.violations.values()):
            raise GridInvariantError(f"GRID release broke its guarantees: {res.violations}")
        return res

    def defend_query(self, edge_index, probs, node: int) -> np.ndarray:
        """Per-query mode (spec §4.9): noise for ``node`` computed from the query graph.

        ``probs`` are the model's outputs on the query graph ``edge_index``; ``node`` is
        always treated as a core node. Returns the released vector of ``node``.
        """
        v = check_posteriors(probs)
        node = check_int("node", node, low=0, high=v.shape[0] - 1)
        edges = _edges(edge_index, v.shape[0])
        adj = adjacency(edges, v.shape[0])
        unit, cunit = unit_terms(v)
        rng = np.random.default_rng(np.random.SeedSequence([self.seed, 4]))
        terms = self._terms(adj, np.array([node]), unit, cunit, rng)
        a, b = objective_terms(*terms, self.settings.objective)
        s, _ = solve_batch(v[[node]], a, b, self.settings)
        r = v[node] + s[0]
        viol = check_release(v[[node]], r[None], [0], self.theta)
        if self.settings.mode == "robust" and any(viol.values()):
            raise GridInvariantError(f"GRID per-query release broke its guarantees: {viol}")
        return r

    def with_params(self, **changes) -> "GRID":
        """A copy with some parameters changed (the others as this one was constructed)."""
        return GRID(**{**self.get_params(deep=False), **changes})


def _subsample_rows(q, q_max: int, rng: np.random.Generator):
    import scipy.sparse as sp

    rows, cols = [], []
    for r in range(q.shape[0]):
        c = q.indices[q.indptr[r]:q.indptr[r + 1]]
        if c.size > q_max:
            c = np.sort(rng.choice(c, size=q_max, replace=False))
        rows.append(np.full(c.size, r))
        cols.append(c)
    rows, cols = np.concatenate(rows), np.concatenate(cols)
    return sp.csr_matrix((np.ones(rows.size), (rows, cols)), shape=q.shape)

