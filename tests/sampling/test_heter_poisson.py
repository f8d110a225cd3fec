"""HeterPoisson sampler: spec 000 §8 checks S1-S6 and S8 (statistical ones with controls)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from _sampling_stats import ALPHA, chisquare_pvalue, freq_tolerance, mean_tolerance, z_bonferroni
from scipy import stats

from gnnprivacy.sampling import CounterRandom, HeterPoissonSampler, StarBatch


def _all(n: int) -> torch.Tensor:
    return torch.ones(n, dtype=torch.bool)


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _copies(ei: torch.Tensor, n: int, c: int) -> torch.Tensor:
    """``c`` disjoint copies of a graph (copy r uses ids r*n .. r*n+n-1): independent trials."""
    return torch.cat([ei + r * n for r in range(c)], dim=1)


def _tile_mask(mask: torch.Tensor, c: int) -> torch.Tensor:
    return mask.repeat(c)


# ----------------------------------------------------------------------------- S1, S3
N1, Q1, R1 = 50, 0.3, 2500


def _central_matrix(draw, n: int, reps: int, seed: int) -> np.ndarray:
    g = _gen(seed)
    out = np.zeros((reps, n), dtype=bool)
    for r in range(reps):
        out[r, draw(g).numpy()] = True
    return out


def _central_checks(mat: np.ndarray, q: float) -> dict[str, bool]:
    reps, n = mat.shape
    freq = mat.mean(axis=0)
    sizes = mat.sum(axis=1)
    return {
        "per_node": bool(np.all(np.abs(freq - q) <= freq_tolerance(q, reps, num_tests=n))),
        "pooled": bool(abs(freq.mean() - q) <= freq_tolerance(q, reps * n)),
        "batch_size": chisquare_pvalue(sizes, stats.binom.pmf(np.arange(n + 1), n, q)) > ALPHA,
    }


@pytest.fixture(scope="module")
def central_matrix() -> np.ndarray:
    g = _gen(0)
    ei = torch.randint(0, N1, (2, 200), generator=g)
    s = HeterPoissonSampler(ei, N1, candidates=_all(N1), eligible=_all(N1), q_b=Q1, M=1)
    return _central_matrix(lambda gen: s.sample(gen).centers, N1, R1, seed=1)


@pytest.mark.statistical
def test_central_inclusion_rate_and_batch_size_follow_poisson_sampling(central_matrix):
    assert _central_checks(central_matrix, Q1) == {"per_node": True, "pooled": True, "batch_size": True}


@pytest.mark.statistical
def test_central_checks_catch_fixed_size_and_wrong_rate():
    fixed = _central_matrix(lambda g: torch.randperm(N1, generator=g)[:15], N1, R1, seed=2)
    assert not _central_checks(fixed, Q1)["batch_size"]
    s = HeterPoissonSampler(torch.zeros(2, 0, dtype=torch.long), N1, candidates=_all(N1),
                            eligible=_all(N1), q_b=1.1 * Q1, M=1)
    biased = _central_matrix(lambda g: s.sample(g).centers, N1, R1, seed=3)
    assert not _central_checks(biased, Q1)["pooled"]


def _max_abs_corr(mat: np.ndarray) -> float:
    c = np.corrcoef(mat.T.astype(float))
    return float(np.max(np.abs(c[np.triu_indices_from(c, k=1)])))


@pytest.mark.statistical
def test_central_trials_are_independent_across_nodes(central_matrix):
    n = central_matrix.shape[1]
    bound = z_bonferroni(n * (n - 1) // 2) / np.sqrt(R1)     # corr ~ N(0, 1/R) under independence
    assert _max_abs_corr(central_matrix) < bound
    shared = _central_matrix(  # control: one uniform shared by every candidate
        lambda g: torch.arange(N1) if float(torch.rand(1, generator=g)) < Q1 else torch.arange(0),
        N1, 500, seed=4)
    assert _max_abs_corr(shared) >= bound


# ----------------------------------------------------------------------------- S2
DEGREES = (1, 3, 10, 50)


def _s2_graph() -> tuple[torch.Tensor, int, torch.Tensor]:
    """Targets 0..49 (the candidates); source 50+k has out-degree DEGREES[k] into targets
    0..d-1 and in-degree 2 (from targets 48, 49), so D_in != D_ot."""
    src, dst = [], []
    for k, d in enumerate(DEGREES):
        j = 50 + k
        src += [j] * d + [48, 49]
        dst += list(range(d)) + [j, j]
    n = 50 + len(DEGREES)
    cand = torch.zeros(n, dtype=torch.bool)
    cand[:50] = True
    return torch.tensor([src, dst]), n, cand


class InDegreeSampler(HeterPoissonSampler):
    """Deliberately broken: uses M / D_in instead of M / D_ot."""

    def _peripheral_probability(self, src):
        d_in = torch.bincount(self.graph.dst, minlength=self.num_nodes)[src].double()
        return torch.clamp(self.M / d_in, max=1.0)


COPIES = 30


def _s2_sampler(cls, q_b: float, M: float):
    ei, n, cand = _s2_graph()
    return cls(_copies(ei, n, COPIES), n * COPIES, candidates=_tile_mask(cand, COPIES),
               eligible=_all(n * COPIES), q_b=q_b, M=M)


def _peripheral_counts(sampler, steps: int, seed: int) -> np.ndarray:
    """(steps * COPIES, len(DEGREES)): how many sub-graphs hold each source, per step and copy."""
    g = _gen(seed)
    n = sampler.num_nodes // COPIES
    sources = (torch.arange(50, 50 + len(DEGREES)) + n * torch.arange(COPIES)[:, None]).flatten()
    out = []
    for _ in range(steps):
        hits = torch.bincount(sampler.sample(g).periph_nodes, minlength=sampler.num_nodes)[sources]
        out.append(hits.reshape(COPIES, len(DEGREES)).numpy())
    return np.concatenate(out)


def _s2_checks(counts: np.ndarray, q_b: float, M: float, num_tests: int) -> list[bool]:
    ok = []
    for col, d in enumerate(DEGREES):
        p = q_b * min(1.0, M / d)
        k = counts[:, col]
        chi_ok = chisquare_pvalue(k, stats.binom.pmf(np.arange(d + 1), d, p)) > ALPHA / num_tests
        mean_ok = abs(k.mean() - d * p) <= mean_tolerance(np.sqrt(d * p * (1 - p)), len(k), num_tests)
        ok.append(chi_ok and mean_ok)
    return ok


@pytest.mark.statistical
@pytest.mark.parametrize("M", [1, 4])
def test_peripheral_count_is_binomial_in_out_degree(M):
    counts = _peripheral_counts(_s2_sampler(HeterPoissonSampler, 0.5, M), 100, seed=10 + M)
    assert all(_s2_checks(counts, 0.5, M, num_tests=2 * len(DEGREES)))
    broken = _peripheral_counts(_s2_sampler(InDegreeSampler, 0.5, M), 100, seed=20 + M)
    assert not all(_s2_checks(broken, 0.5, M, num_tests=2 * len(DEGREES)))


@pytest.mark.statistical
@pytest.mark.parametrize("M", [1, 4])
def test_expected_peripheral_count_is_M_when_all_out_neighbours_central(M):
    for cls, expect_ok in ((HeterPoissonSampler, True), (InDegreeSampler, False)):
        counts = _peripheral_counts(_s2_sampler(cls, 1.0, M), 40, seed=30 + M)
        checks = []
        for col, d in enumerate(DEGREES):
            p = min(1.0, M / d)
            tol = mean_tolerance(np.sqrt(d * p * (1 - p)), len(counts), num_tests=len(DEGREES))
            checks.append(abs(counts[:, col].mean() - min(d, M)) <= tol)  # = M whenever d >= M
        assert all(checks) is expect_ok


@pytest.mark.statistical
def test_out_degree_is_measured_in_the_whole_graph():
    # j = 0 points to 1..4; only node 1 is a candidate (inductive-like restriction); c copies.
    ei = torch.tensor([[0, 0, 0, 0], [1, 2, 3, 4]])
    c = 100
    cand = torch.tensor([False, True, False, False, False])
    elig = torch.tensor([True, True, False, False, False])
    kw = dict(candidates=_tile_mask(cand, c), eligible=_tile_mask(elig, c), q_b=1.0, M=1)
    whole = HeterPoissonSampler(_copies(ei, 5, c), 5 * c, **kw)
    assert whole.out_degree[:5].tolist() == [4, 0, 0, 0, 0]
    restricted = HeterPoissonSampler(_copies(ei[:, :1], 5, c), 5 * c, **kw)
    steps = 20
    for sampler, expect_ok in ((whole, True), (restricted, False)):   # control: D_ot in the subgraph
        g = _gen(5)
        freq = np.mean([sampler.sample(g).num_peripherals / c for _ in range(steps)])
        assert bool(abs(freq - 0.25) <= freq_tolerance(0.25, steps * c)) is expect_ok


# ----------------------------------------------------------------------------- S4
def _stars(batch: StarBatch) -> dict[int, list[int]]:
    out = {int(c): [] for c in batch.centers}
    for j, b in zip(batch.periph_nodes.tolist(), batch.periph_subgraph.tolist()):
        out[int(batch.centers[b])].append(j)
    return out


def _overlap_violations(batch: StarBatch) -> int:
    return int(torch.isin(batch.periph_nodes, batch.centers).sum())


def _remove_earlier_only(batch: StarBatch) -> StarBatch:
    """The reference code's weaker removal [C]: only against centres of EARLIER sub-graphs."""
    keep = [batch.periph_nodes[e] not in batch.centers[: batch.periph_subgraph[e]]
            for e in range(batch.num_peripherals)]
    keep = torch.tensor(keep, dtype=torch.bool)
    return StarBatch(batch.centers, batch.periph_nodes[keep], batch.periph_subgraph[keep], batch.num_subgraphs)


def test_overlap_removal_removes_every_central_peripheral_and_ablation_keeps_them():
    n = 10
    full = torch.ones(n, n, dtype=torch.bool).fill_diagonal_(False).nonzero().T   # complete digraph
    kw = dict(candidates=_all(n), eligible=_all(n), q_b=0.5, M=n)
    enforced = HeterPoissonSampler(full, n, **kw)
    ablation = HeterPoissonSampler(full, n, enforce_no_overlap=False, **kw)
    rng = CounterRandom(seed=3)
    kept_some = earlier_only_leaks = False
    for t in range(20):
        a, b = enforced.sample(rng.at_step(t)), ablation.sample(rng.at_step(t))
        assert _overlap_violations(a) == 0
        kept_some |= _overlap_violations(b) > 0
        earlier_only_leaks |= _overlap_violations(_remove_earlier_only(b)) > 0   # control
    assert kept_some and earlier_only_leaks


def _check_star_batch(batch: StarBatch, sampler: HeterPoissonSampler) -> None:
    """Structural properties every HeterPoisson batch must have."""
    assert bool(sampler.candidate_mask[batch.centers].all())
    assert bool((batch.centers.diff() > 0).all())
    assert bool((batch.periph_subgraph.diff() >= 0).all())
    centre_of = batch.centers[batch.periph_subgraph]
    assert bool(sampler.eligible_mask[batch.periph_nodes].all())
    assert bool((batch.periph_nodes != centre_of).all())
    n = sampler.num_nodes
    keys = centre_of * n + batch.periph_nodes
    graph_keys = sampler.graph.dst * n + sampler.graph.src
    assert bool(torch.isin(keys, graph_keys).all())            # j -> centre is an edge of G
    assert torch.unique(keys).numel() == keys.numel()          # each peripheral once per star


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), n=st.integers(2, 30), density=st.floats(0.05, 0.9),
       q_b=st.floats(0.05, 1.0), M=st.floats(1.0, 6.0))
def test_no_central_node_survives_as_peripheral_on_random_graphs(seed, n, density, q_b, M):
    g = _gen(seed)
    ei = (torch.rand(n, n, generator=g) < density).nonzero().T       # self-loops included on purpose
    cand = torch.rand(n, generator=g) < 0.6
    cand[int(torch.randint(0, n, (1,), generator=g))] = True
    elig = cand | (torch.rand(n, generator=g) < 0.5)
    kw = dict(candidates=cand, eligible=elig, q_b=q_b, M=M)
    enforced = HeterPoissonSampler(ei, n, **kw)
    ablation = HeterPoissonSampler(ei, n, enforce_no_overlap=False, **kw)
    for t in range(3):
        rng = CounterRandom(seed=seed, step=t)
        a, b = enforced.sample(rng), ablation.sample(rng)
        _check_star_batch(a, enforced)
        _check_star_batch(b, ablation)
        assert _overlap_violations(a) == 0
        central = {int(c) for c in b.centers}
        assert _stars(a) == {c: [j for j in p if j not in central] for c, p in _stars(b).items()}


def test_isolated_centre_self_loop_cap_and_empty_batch():
    # 0 -> 0 self-loop only (isolated after cleaning); 1 -> 2 with D_ot(1) = 1 < M.
    ei = torch.tensor([[0, 1], [0, 2]])
    s = HeterPoissonSampler(ei, 3, candidates=torch.tensor([0, 2]), eligible=_all(3), q_b=1.0, M=4)
    assert s.graph.num_self_loops == 1 and s.out_degree.tolist() == [0, 1, 0]
    g = _gen(0)
    for _ in range(200):   # p = min(1, 4/1) = 1: always kept; 0 never its own peripheral
        b = s.sample(g)
        assert _stars(b) == {0: [], 2: [1]}
    nodes, mask = b.to_padded()
    assert nodes.tolist() == [[0, -1], [2, 1]] and mask.tolist() == [[True, False], [True, True]]
    tiny = HeterPoissonSampler(ei, 3, candidates=torch.tensor([2]), eligible=_all(3), q_b=1e-9, M=1)
    empty = tiny.sample(g)
    assert empty.num_subgraphs == 0 and empty.degrees().shape == (0,)
    assert empty.to_padded()[0].shape == (0, 1)


# ----------------------------------------------------------------------------- S5
def _coupling_graph() -> tuple[torch.Tensor, int, int]:
    g = _gen(7)
    n = 40
    adj = torch.rand(n, n, generator=g) < 0.15
    ei = adj.fill_diagonal_(False).nonzero().T
    z = int(torch.nonzero(torch.bincount(ei[0], minlength=n) >= 3)[0])
    return ei, n, z


def _coupling_setup(enforce: bool):
    ei, n, z = _coupling_graph()
    minus = _all(n)
    minus[z] = False
    kw = dict(q_b=0.3, M=2, enforce_no_overlap=enforce)
    full = HeterPoissonSampler(ei, n, candidates=_all(n), eligible=_all(n), **kw)
    without = HeterPoissonSampler(ei, n, candidates=minus, eligible=minus, **kw)
    return full, without, z


def _coupled(a: dict, b: dict, z: int) -> bool:
    """a (with z) and b (without z) differ only by z's own sub-graph and z's appearances."""
    a = {c: [j for j in p if j != z] for c, p in a.items() if c != z}
    return a == b


@pytest.mark.parametrize("enforce", [True, False])
def test_counter_mode_coupling_removing_z_changes_only_trials_involving_z(enforce):
    full, without, z = _coupling_setup(enforce)
    rng = CounterRandom(seed=123)
    for t in range(150):
        a, b = _stars(full.sample(rng.at_step(t))), _stars(without.sample(rng.at_step(t)))
        assert _coupled(a, b, z)
        if enforce and z in a:
            assert all(z not in p for p in a.values())
    # control: a stateful generator shifts every later draw, so the coupling breaks
    broken = [not _coupled(_stars(full.sample(_gen(t))), _stars(without.sample(_gen(t))), z)
              for t in range(20)]
    assert any(broken)


@pytest.mark.statistical
def test_counter_mode_law_of_z_matches_the_theorem_2_mixture():
    ei, n, z = _coupling_graph()
    c = 20   # disjoint copies: one independent z per copy
    full = HeterPoissonSampler(_copies(ei, n, c), n * c, candidates=_all(n * c), eligible=_all(n * c),
                               q_b=0.3, M=2)
    zs = z + n * torch.arange(c)
    d = int(full.out_degree[z])
    q, p = full.q_b, full.q_b * min(1.0, full.M / d)
    rng = CounterRandom(seed=99)
    outcomes = []
    for t in range(150):
        b = full.sample(rng.at_step(t))
        k = torch.bincount(b.periph_nodes, minlength=n * c)[zs]
        outcomes.append(torch.where(torch.isin(zs, b.centers), d + 1, k).numpy())
    probs = np.append((1 - q) * stats.binom.pmf(np.arange(d + 1), d, p), q)
    assert chisquare_pvalue(np.concatenate(outcomes), probs) > ALPHA


# ----------------------------------------------------------------------------- S6
def test_direction_convention_on_a_directed_path():
    ab_bc = torch.tensor([[0, 1], [1, 2]])          # a=0 -> b=1 -> c=2: b aggregates a
    kw = dict(candidates=torch.tensor([1]), eligible=_all(3), q_b=1.0, M=1)
    s = HeterPoissonSampler(ab_bc, 3, **kw)
    g = _gen(0)
    assert all(_stars(s.sample(g)) == {1: [0]} for _ in range(50))
    mirrored = HeterPoissonSampler(ab_bc.flip(0), 3, **kw)   # control: the mirrored convention [C]
    assert _stars(mirrored.sample(g)) == {1: [2]}


def test_accounting_params_and_degree_histogram():
    ei = torch.tensor([[0, 0, 0, 1, 2, 2], [1, 2, 3, 0, 0, 3]])
    s = HeterPoissonSampler(ei, 4, candidates=torch.tensor([1, 2]), eligible=_all(4), q_b=0.25, M=2)
    assert s.out_degree.tolist() == [3, 1, 2, 0]
    params = s.accounting_params()
    assert {k: params[k] for k in ("q_b", "M", "max_out_degree", "enforce_no_overlap")} == {
        "q_b": 0.25, "M": 2.0, "max_out_degree": 3, "enforce_no_overlap": True}
    assert s.out_degree_histogram().tolist() == [1, 1, 1, 1]
    assert params["out_degrees"] == (0, 1, 2, 3)
    # D_max(G) is public: removing a sensitive node (here 0, the max) leaves it unchanged
    minus = HeterPoissonSampler(ei, 4, candidates=torch.tensor([1, 2]), eligible=torch.tensor([1, 2, 3]),
                                q_b=0.25, M=2)
    assert minus.max_out_degree == 3
    assert "q_b=0.25" in repr(s)
