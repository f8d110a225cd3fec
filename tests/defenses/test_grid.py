"""GRID (spec 003 §4, checks of §8): similarity, gradient, ConstraintCheck, Algorithm 1, delta,
solver equivalence, release invariants, bad input."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial import distance as ssd

from gnnprivacy.defenses import GRID, GridInvariantError
from gnnprivacy.defenses.grid import check_release, constraint_check, similarity, similarity_grad
from gnnprivacy.defenses.grid.core import select_core_nodes
from gnnprivacy.defenses.grid.nhop import adjacency, estimate_delta, nhop_rows
from gnnprivacy.defenses.grid.projection import valid_rows
from gnnprivacy.defenses.grid.similarity import unit_terms
from gnnprivacy.defenses.grid.solver import SolverSettings, objective_terms, solve_batch, solve_single
from gnnprivacy.errors import InvalidParameterError


def _simplex(rng, m, a, alpha=1.0):
    return rng.dirichlet(np.full(a, alpha), size=m)


def _graph_posteriors(n=120, a=4, p=0.05, seed=0):
    """A random graph with homophilous posteriors (neighbours' logits mixed in)."""
    rng = np.random.default_rng(seed)
    upper = np.triu(rng.random((n, n)) < p, 1)
    i, j = np.nonzero(upper)
    edges = np.stack([i, j])
    y = rng.integers(0, a, n)
    logits = 2.0 * np.eye(a)[y] + rng.normal(0, 0.5, (n, a))
    adj = adjacency(edges.T, n).toarray()
    logits = logits + adj @ logits / np.maximum(adj.sum(1, keepdims=True), 1)
    probs = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    return np.concatenate([edges, edges[::-1]], 1), probs


# --- similarity and gradient (§8 checks 1-2) -------------------------------------------------

def test_similarity_matches_scipy():
    rng = np.random.default_rng(0)
    x, y = _simplex(rng, 50, 6), _simplex(rng, 50, 6)
    ref = [(1 - ssd.cosine(a, b)) + (1 - ssd.correlation(a, b)) for a, b in zip(x, y)]
    np.testing.assert_allclose(similarity(x, y), ref, atol=1e-12)
    # a uniform vector has correlation 0 by definition
    u = np.full(6, 1 / 6)
    assert similarity(u, y[0]) == pytest.approx(1 - ssd.cosine(u, y[0]), abs=1e-12)


def test_gradient_matches_finite_differences_and_autograd():
    import torch

    rng = np.random.default_rng(1)
    x, y = _simplex(rng, 20, 5), _simplex(rng, 20, 5)
    g = similarity_grad(x, y)
    h = 1e-6
    fd = np.zeros_like(x)
    for k in range(5):
        e = np.zeros(5)
        e[k] = h
        fd[:, k] = (similarity(x + e, y) - similarity(x - e, y)) / (2 * h)
    np.testing.assert_allclose(g, fd, rtol=1e-5, atol=1e-8)
    xt = torch.tensor(x, requires_grad=True)
    yt = torch.tensor(y)
    cos = torch.nn.functional.cosine_similarity(xt, yt, dim=1)
    xc, yc = xt - xt.mean(1, keepdim=True), yt - yt.mean(1, keepdim=True)
    corr = (xc * yc).sum(1) / (xc.norm(dim=1) * yc.norm(dim=1))
    (cos + corr).sum().backward()
    np.testing.assert_allclose(g, xt.grad.numpy(), atol=1e-10)
    # positive control: a wrong gradient (cosine part only) disagrees with autograd
    assert not np.allclose(similarity_grad(x, y, "cos"), xt.grad.numpy(), atol=1e-6)


# --- ConstraintCheck (§8 checks 3-6) ---------------------------------------------------------

def test_paper_mode_worked_example():
    v = np.array([0.7, 0.2, 0.1])
    s, _, _ = constraint_check(np.array([-0.5, 0.5, 0.3]), v, 0.4, mode="paper")
    np.testing.assert_allclose(s, [-0.2, 2 / 15, 1 / 15], atol=1e-12)
    np.testing.assert_allclose(v + s, [0.5, 1 / 3, 1 / 6], atol=1e-12)


def test_tie_regression_paper_flips_robust_keeps():
    v = np.array([0.35, 0.40, 0.25])
    s = np.array([0.1, -0.1, 0.0])
    sp_, _, _ = constraint_check(s, v, 0.4, mode="paper")
    r = v + sp_
    np.testing.assert_allclose(r, [0.375, 0.375, 0.25], atol=1e-15)
    assert np.argmax(r) == 0  # label flip: documented defect of the literal algorithm
    sr, _, _ = constraint_check(s, v, 0.4, mode="robust")
    rr = v + sr
    assert np.argmax(rr) == 1 and rr[1] - rr[0] > 0


def test_theta_zero_gives_zero_noise():
    rng = np.random.default_rng(2)
    v = _simplex(rng, 100, 5)
    s, _, _ = constraint_check(rng.normal(0, 1, (100, 5)), v, 0.0)
    assert np.abs(s).max() == 0.0


def _stress_cases(n, seed):
    rng = np.random.default_rng(seed)
    blocks = []
    per = n // 4  # v ~ Dirichlet(alpha) per case via normalised gammas
    for a in (2, 3, 6, 7):
        alpha = rng.choice([0.1, 1.0, 5.0], size=per)
        v = rng.gamma(np.repeat(alpha[:, None], a, 1))
        v = v / v.sum(1, keepdims=True)
        tie = rng.random(per) < 0.1  # forced ties of the top two entries
        o = np.argsort(-v, 1)
        r = np.arange(per)
        m = (v[r, o[:, 0]] + v[r, o[:, 1]]) / 2
        v[r[tie], o[tie, 0]] = m[tie]
        v[r[tie], o[tie, 1]] = m[tie]
        sigma = rng.choice([0.01, 0.3, 2.0], size=per)[:, None]
        s = rng.normal(0, 1, (per, a)) * sigma
        theta = rng.choice([0.1, 0.4, 1.0], size=per)
        blocks.append((v, s, theta))
    return blocks


def _run_stress(mode):
    fails = {"sum": 0, "box": 0, "budget": 0, "flip": 0}
    total = 0
    for v, s, theta in _stress_cases(100_000, 7):
        for th in np.unique(theta):
            sel = theta == th
            vv, top = v[sel], v[sel].argmax(1)
            out, _, _ = constraint_check(s[sel], vv, float(th), mode=mode, top=top)
            r = vv + out
            fails["sum"] += int((np.abs(out.sum(1)) > 1e-9).sum())
            fails["box"] += int(((r < 0) | (r > 1)).any(1).sum())
            fails["budget"] += int((np.abs(out).sum(1) > th + 1e-9).sum())
            fails["flip"] += int((r.argmax(1) != top).sum())
            total += int(sel.sum())
    return fails, total


def test_stress_robust_never_fails_paper_does():
    robust, total = _run_stress("robust")
    assert total == 100_000
    assert robust == {"sum": 0, "box": 0, "budget": 0, "flip": 0}
    paper, _ = _run_stress("paper")
    # the literal ConstraintCheck breaks sum-to-one often and flips labels on ties (§9 A8/A9)
    assert paper["sum"] > 0.2 * total
    assert paper["flip"] > 0


def test_robust_idempotent_without_backtrack():
    rng = np.random.default_rng(3)
    v = _simplex(rng, 2000, 5)
    s1, bt, _ = constraint_check(rng.normal(0, 0.3, (2000, 5)), v, 0.4)
    s2, _, _ = constraint_check(s1, v, 0.4)
    np.testing.assert_allclose(s2[~bt], s1[~bt], atol=1e-12)


# --- Algorithm 1, delta (§8 checks 7-8) --------------------------------------------------------

def test_core_selection_hand_built():
    # path 0-1-2-3-4 and triangle 5-6-7
    edges = np.array([[0, 1], [1, 2], [2, 3], [3, 4], [5, 6], [5, 7], [6, 7]])
    w = np.array([1.9, 1.8, 1.0, 1.7, 1.5, 1.4, 0.1])
    wdeg = np.zeros(8)
    np.add.at(wdeg, edges[:, 0], w)
    np.add.at(wdeg, edges[:, 1], w)
    core = select_core_nodes(edges, w, wdeg, 1.2)
    # (0,1): wdeg 1.9 vs 3.7 -> 1; (1,2) covered; (3,4): 2.7 vs 1.7 -> 3; (5,6): 2.9 vs 1.6 -> 5;
    # (5,7) covered; (2,3) and (6,7) are below delta
    assert core.tolist() == [1, 3, 5]
    full = select_core_nodes(edges, w, wdeg, -np.inf)
    cover = np.zeros(8, bool)
    cover[full] = True
    assert (cover[edges[:, 0]] | cover[edges[:, 1]]).all()
    assert select_core_nodes(edges, w, wdeg, -np.inf, pick="lower").tolist() != full.tolist()


def test_delta_exact_when_few_pairs_and_deterministic():
    edges = np.array([[0, 1], [1, 2], [2, 3], [3, 4]])  # path: 3-hop pairs (0,3), (1,4)
    adj = adjacency(edges, 5)
    rng = np.random.default_rng(0)
    v = _simplex(rng, 5, 3)
    q = nhop_rows(adj, np.arange(5), 3).toarray()
    assert q[0].nonzero()[0].tolist() == [3] and q[4].nonzero()[0].tolist() == [1]
    d, info = estimate_delta(adj, v, 3, generator=np.random.default_rng(1))
    assert info["exact"] and info["pairs"] == 2
    assert d == pytest.approx((similarity(v[0], v[3]) + similarity(v[1], v[4])) / 2)
    edges2, probs = _graph_posteriors(200, p=0.06)
    a2 = adjacency(np.unique(np.sort(edges2.T, 1), axis=0), 200)
    d1, i1 = estimate_delta(a2, probs, 3, generator=np.random.default_rng(5))
    d2, _ = estimate_delta(a2, probs, 3, generator=np.random.default_rng(5))
    assert not i1["exact"] and i1["pairs"] == 1000 and d1 == d2


# --- solver (§8 checks 9-10, 12) --------------------------------------------------------------

@pytest.mark.parametrize("objective", ["paper", "mean", "gap_sq"])
def test_batch_solver_matches_per_node_reference(objective):
    rng = np.random.default_rng(4)
    a = 5
    cfg = SolverSettings(theta=0.4, lr=0.05, objective=objective)
    vs, terms, refs = [], [], []
    for _ in range(12):
        v = rng.dirichlet(np.ones(a))
        vp, vq = rng.dirichlet(np.ones(a), rng.integers(1, 5)), rng.dirichlet(np.ones(a), rng.integers(0, 9))
        up, cp = unit_terms(vp)
        uq, cq = unit_terms(vq) if len(vq) else (np.zeros((0, a)), np.zeros((0, a)))
        terms.append((up.sum(0), cp.sum(0), len(vp), uq.sum(0), cq.sum(0), len(vq)))
        vs.append(v)
        refs.append(solve_single(v, vp, vq, cfg)[0])
    t = [np.array(x) for x in zip(*terms)]
    ta, tb = objective_terms(t[0], t[1], t[2], t[3], t[4], t[5], objective)
    s, diag = solve_batch(np.array(vs), ta, tb, cfg)
    np.testing.assert_allclose(s, np.array(refs), atol=1e-10)
    assert diag["max_abs_dual"] <= 1e-12  # KKT machinery inert under robust projection
    if objective == "paper":
        assert diag["D_after"].sum() < diag["D_before"].sum()


def _one_row_terms(scale=1.0, seed=5, a=5):
    rng = np.random.default_rng(seed)
    v = rng.dirichlet(np.ones(a))
    vp, vq = rng.dirichlet(np.ones(a), 3), rng.dirichlet(np.ones(a), 20)
    up, cp = unit_terms(vp)
    uq, cq = unit_terms(vq)
    ta, tb = objective_terms(up.sum(0)[None], cp.sum(0)[None], [3], uq.sum(0)[None],
                             cq.sum(0)[None], [20], "paper")
    return v[None], scale * ta, scale * tb


def test_normalized_step_moves_by_lr_theta_and_ignores_the_objective_scale():
    v, ta, tb = _one_row_terms()
    one = SolverSettings(theta=1.0, lr=0.1, max_iter=1, step="normalized")
    s, _ = solve_batch(v, ta, tb, one)
    # one iteration from s = 0 moves by lr * theta (before the projection, which may only shorten it)
    assert 0.0 < np.linalg.norm(s) <= 0.1 + 1e-12
    cfg = SolverSettings(theta=1.0, lr=0.1, step="normalized")
    s1, _ = solve_batch(v, ta, tb, cfg)
    s10, _ = solve_batch(v, 10.0 * ta, 10.0 * tb, cfg)      # the same objective, ten times larger
    np.testing.assert_allclose(s1, s10, atol=1e-12)
    # positive control: the paper's raw step depends on the scale
    raw = SolverSettings(theta=1.0, lr=0.01, step="raw")
    r1, _ = solve_batch(v, ta, tb, raw)
    r10, _ = solve_batch(v, 10.0 * ta, 10.0 * tb, raw)
    assert np.abs(r1 - r10).max() > 1e-3


def test_normalized_step_reaches_more_of_a_large_budget_in_k_iterations():
    """At theta 1 the paper's step (alpha 0.01, K 20) stops short of the optimum it reaches with
    more iterations; the normalized step gets there (or lower) within K."""
    v, ta, tb = _one_row_terms(scale=0.05)              # a mean-sized objective (small gradients)
    d = {}
    for name, cfg in (("raw", SolverSettings(theta=1.0, objective="paper")),
                      ("raw_long", SolverSettings(theta=1.0, objective="paper", max_iter=2000)),
                      ("normalized", SolverSettings(theta=1.0, lr=0.1, step="normalized"))):
        _, diag = solve_batch(v, ta, tb, cfg)
        d[name] = float(diag["D_after"][0])
    assert d["raw_long"] < d["raw"] - 1e-3                # K = 20 raw steps stop short
    assert d["normalized"] <= d["raw_long"] + 0.05 * abs(d["raw_long"])


def test_grid_step_parameter():
    assert GRID().settings.step == "raw" and GRID().settings.lr == 0.01
    g = GRID(step="normalized")
    assert g.settings.lr == 0.1 and g.get_params()["lr"] is None
    assert GRID(step="normalized", lr=0.3).settings.lr == 0.3
    assert g.with_params(step="raw").settings.lr == 0.01      # the default follows the step
    with pytest.raises(InvalidParameterError, match="step"):
        GRID(step="adam")
    edge_index, probs = _graph_posteriors()
    res = GRID(theta=1.0, step="normalized", objective="mean").fit(edge_index, probs)
    assert res.max_l1_distortion <= 1.0 + 1e-9 and res.als == 0
    assert all(x == 0 for x in res.violations.values())
    assert res.diagnostics["objective_after"] < res.diagnostics["objective_before"]


# --- GRID end to end (§8 check 11) -------------------------------------------------------------

def test_grid_release_invariants_and_objective():
    edge_index, probs = _graph_posteriors()
    res = GRID(theta=0.4, n_hop=3).fit(edge_index, probs)
    v, r = res.clean, res.released
    assert res.num_core_nodes > 0
    assert np.all(np.abs(r.sum(1) - 1) <= 1e-9) and r.min() >= 0 and r.max() <= 1
    assert (r.argmax(1) == v.argmax(1)).all() and res.als == 0
    assert res.max_l1_distortion <= 0.4 + 1e-9
    noncore = np.setdiff1d(np.arange(len(v)), res.core)
    assert np.array_equal(r[noncore], v[noncore])
    assert res.gan <= 0.4 * res.num_core_nodes / len(v) + 1e-12
    assert all(x == 0 for x in res.violations.values())
    assert res.diagnostics["objective_after"] < res.diagnostics["objective_before"]


def test_check_release_positive_controls():
    edge_index, probs = _graph_posteriors()
    res = GRID().fit(edge_index, probs)
    v, r, core = res.clean, res.released.copy(), res.core
    noncore = np.setdiff1d(np.arange(len(v)), core)[0]
    broken = r.copy()
    broken[noncore] = np.roll(broken[noncore], 1)  # changes a non-core row (and likely its label)
    viol = check_release(v, broken, core, 0.4)
    assert viol["non_core_changed"] == 1
    over = r.copy()
    c = core[0]
    over[c] = v[c] * 0.5 + 0.5 * np.eye(v.shape[1])[v[c].argmax()]
    assert check_release(v, over, core, 0.01)["over_budget"] >= 1
    e = np.array([[noncore, np.setdiff1d(np.arange(len(v)), core)[1]]])
    assert check_release(v, r, core, 0.4, covered_edges=e)["uncovered_edges"] == 1


def test_without_core_selection_solves_all_connected_nodes():
    edge_index, probs = _graph_posteriors()
    res = GRID(use_core_selection=False).fit(edge_index, probs)
    deg = np.bincount(edge_index[0], minlength=len(probs))
    assert res.core.tolist() == np.flatnonzero(deg > 0).tolist()


def test_paper_mode_reports_violations_instead_of_raising():
    edge_index, probs = _graph_posteriors()
    res = GRID(mode="paper", lr=1.0).fit(edge_index, probs)
    assert set(res.violations) >= {"not_distribution", "label_changed"}


def test_per_query_mode():
    edge_index, probs = _graph_posteriors()
    g = GRID()
    node = int(edge_index[0, 0])
    r = g.defend_query(edge_index, probs, node)
    v = probs[node] / probs[node].sum()
    assert abs(r.sum() - 1) <= 1e-9 and r.argmax() == v.argmax() and np.abs(r - v).sum() <= 0.4 + 1e-9
    assert valid_rows((r - v)[None], v[None], 0.4, np.array([v.argmax()]))[0]


# --- bad input (task item 6) ------------------------------------------------------------------

@pytest.mark.parametrize("theta", [0.0, -0.1, 2.5, float("nan")])
def test_theta_out_of_range(theta):
    with pytest.raises(InvalidParameterError, match="theta"):
        GRID(theta=theta)


def test_n_hop_below_two():
    with pytest.raises(InvalidParameterError, match="n_hop"):
        GRID(n_hop=1)


@pytest.mark.parametrize("bad", ["logits", "negative", "nan", "1d"])
def test_posteriors_must_be_distributions(bad):
    edge_index, probs = _graph_posteriors()
    p = {"logits": np.log(probs), "negative": probs - 0.3, "nan": np.where(probs > 0.5, np.nan, probs),
         "1d": probs[:, 0]}[bad]
    with pytest.raises(InvalidParameterError, match="probs"):
        GRID().fit(edge_index, p)


def test_isolated_nodes_and_no_edges():
    edge_index, probs = _graph_posteriors()
    n = len(probs)
    extra = np.vstack([probs, _simplex(np.random.default_rng(0), 5, probs.shape[1])])
    res = GRID().fit(edge_index, extra)
    assert not np.isin(np.arange(n, n + 5), res.core).any()
    assert np.array_equal(res.released[n:], res.clean[n:])
    with pytest.warns(RuntimeWarning, match="no edges"):
        res0 = GRID().fit(np.zeros((2, 0), np.int64), probs)
    assert res0.num_core_nodes == 0 and np.array_equal(res0.released, res0.clean)
    with pytest.raises(InvalidParameterError, match="edge_index"):
        GRID().fit(np.array([[0, n + 10], [1, 2]]), probs)


def test_grid_invariant_error_is_raised_on_a_broken_release(monkeypatch):
    import gnnprivacy.defenses.grid.grid as grid_mod

    edge_index, probs = _graph_posteriors()
    real = grid_mod.solve_batch

    def broken(v, a, b, cfg, top=None):
        s, d = real(v, a, b, cfg, top=top)
        return s * 3.0, d  # over budget

    monkeypatch.setattr(grid_mod, "solve_batch", broken)
    with pytest.raises(GridInvariantError):
        GRID().fit(edge_index, probs)


# --- counterparts in the same harness (spec §5.1) ------------------------------------------------

def test_memguard_keeps_labels_and_budget_in_expectation():
    from gnnprivacy.defenses.memguard import MemGuard

    edge_index, probs = _graph_posteriors()
    logits = np.log(probs)
    e = np.unique(np.sort(edge_index.T, 1), axis=0)
    rng = np.random.default_rng(0)
    neg = rng.integers(0, len(probs), (len(e), 2))
    u, w = np.r_[e[:, 0], neg[:, 0]], np.r_[e[:, 1], neg[:, 1]]
    lab = np.r_[np.ones(len(e)), np.zeros(len(neg))].astype(int)
    mg = MemGuard(budget=0.2, steps=30).fit_classifier(probs, u, w, lab)
    released, info = mg.defend(logits, edge_index)
    assert (released.argmax(1) == probs.argmax(1)).all()
    np.testing.assert_allclose(released.sum(1), 1.0, atol=1e-9)
    assert info["memguard_perturbed"] > 0
    assert np.abs(released - probs).sum(1).mean() <= 0.2 + 0.1  # expectation, small-sample slack
    zero, _ = MemGuard(budget=0.0, steps=5).fit_classifier(probs, u, w, lab).defend(logits, edge_index)
    np.testing.assert_allclose(zero, probs, atol=1e-12)  # budget 0: nothing released noisy
