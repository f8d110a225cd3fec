"""LinkTeller: exact influence on a linear 1-hop model, no signal on an edgeless model."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gnnprivacy.attacks.linkteller import influence_matrix, linkteller_attack
from gnnprivacy.errors import InvalidParameterError


def _graph(n=80, p=0.06, seed=0):
    rng = np.random.default_rng(seed)
    iu = np.stack(np.triu_indices(n, 1))
    e = iu[:, rng.random(iu.shape[1]) < p]
    pri = rng.random(e.shape[1]) < 0.5
    return e[:, ~pri], e[:, pri]


def _linear_model(edges, n):
    A = torch.eye(n)
    A[edges[0], edges[1]] = 1.0
    A[edges[1], edges[0]] = 1.0
    return lambda x: A @ x


def test_influence_is_the_adjacency_for_a_linear_one_hop_model():
    pub, pri = _graph()
    n = 80
    f = _linear_model(np.concatenate([pub, pri], axis=1), n)
    x = torch.rand(n, 4, generator=torch.Generator().manual_seed(0)) + 0.5
    t = torch.arange(n)
    infl = influence_matrix(f, x, t)
    adj = torch.zeros(n, n, dtype=torch.bool)
    edges = np.concatenate([pub, pri], axis=1)
    adj[edges[0], edges[1]] = True
    adj[edges[1], edges[0]] = True
    assert bool((infl[adj] > 0).all()) and bool((infl[~adj] == 0).all())


def test_attack_auc_one_on_the_true_graph_and_half_without_edges():
    pub, pri = _graph()
    n = 80
    x = torch.rand(n, 4, generator=torch.Generator().manual_seed(1)) + 0.5
    true = linkteller_attack(_linear_model(np.concatenate([pub, pri], axis=1), n), x,
                             num_nodes=n, private_edges=pri, public_edges=pub, n_targets=80,
                             generator=np.random.default_rng(0))
    assert true["auc"] == pytest.approx(1.0) and true["average_precision"] == pytest.approx(1.0)
    # positive control: a model that never saw the private edges cannot rank them
    blind = linkteller_attack(_linear_model(pub, n), x, num_nodes=n, private_edges=pri,
                              public_edges=pub, n_targets=80,
                              generator=np.random.default_rng(0))
    assert blind["auc"] == pytest.approx(0.5)


def test_negatives_exclude_public_edges_by_default():
    pub, pri = _graph(seed=2)
    n = 80
    f = _linear_model(pub, n)    # only public edges: influence marks public pairs
    x = torch.ones(n, 2)
    default = linkteller_attack(f, x, num_nodes=n, private_edges=pri, public_edges=pub,
                                n_targets=80, generator=np.random.default_rng(3))
    assert default["auc"] == pytest.approx(0.5)
    with pytest.raises(InvalidParameterError):
        linkteller_attack(f, x, num_nodes=n, private_edges=np.zeros((2, 0)), public_edges=pub)


def test_within_hops_on_a_path():
    from gnnprivacy.attacks.linkteller import within_hops

    path = np.array([[0, 1, 2, 3], [1, 2, 3, 4]])
    nodes = np.array([0, 2, 4])
    np.testing.assert_array_equal(within_hops(path, 5, nodes, 1), np.eye(3, dtype=bool))
    np.testing.assert_array_equal(within_hops(path, 5, nodes, 2),
                                  [[1, 1, 0], [1, 1, 1], [0, 1, 1]])
    assert within_hops(path, 5, nodes, 4).all()


def _two_hop_model(edges, n):
    A = torch.eye(n)
    A[edges[0], edges[1]] = 1.0
    A[edges[1], edges[0]] = 1.0
    return lambda x: A @ (A @ x)


def test_beyond_public_pairs_separate_what_public_paths_explain():
    """A 2-hop model on the public edges alone: the private edges' endpoints that share a public
    neighbour get influence (AUC above 0.5 on all pairs), but beyond 2 public hops there is
    none (AUC 0.5 there); the same model on the true graph still ranks them perfectly there."""
    n = 120
    rng = np.random.default_rng(4)                     # 4 communities: clustered edges
    iu = np.stack(np.triu_indices(n, 1))
    same = iu[0] // 30 == iu[1] // 30
    e = iu[:, rng.random(iu.shape[1]) < np.where(same, 0.2, 0.01)]
    private = rng.random(e.shape[1]) < 0.5
    pub, pri = e[:, ~private], e[:, private]
    x = torch.rand(n, 3, generator=torch.Generator().manual_seed(2)) + 0.5
    kw = dict(num_nodes=n, private_edges=pri, public_edges=pub, n_targets=n)
    public_only = linkteller_attack(_two_hop_model(pub, n), x, generator=np.random.default_rng(5),
                                    **kw)
    assert public_only["auc"] > 0.55                          # explained by public paths
    assert public_only["num_positives_beyond_public"] > 10
    assert public_only["auc_beyond_public"] == pytest.approx(0.5)
    both = np.concatenate([pub, pri], axis=1)
    true = linkteller_attack(_two_hop_model(both, n), x, generator=np.random.default_rng(5), **kw)
    assert true["auc_beyond_public"] > 0.95
    with pytest.raises(InvalidParameterError, match="public_hops"):
        linkteller_attack(_two_hop_model(pub, n), x, public_hops=0, **kw)


def test_features_are_restored_and_each_query_reported():
    """The target row is scaled in place for its query: x is the same after, also on error."""
    pub, pri = _graph()
    n = 80
    f = _linear_model(np.concatenate([pub, pri], axis=1), n)
    x = torch.rand(n, 4, generator=torch.Generator().manual_seed(1)) + 0.5
    before = x.clone()
    seen, ticks = [], []

    def spy(z):
        seen.append(z.clone())
        return f(z)

    t = torch.tensor([3, 7, 11])
    class Task:
        def update(self, n=1):
            ticks.append(n)

    made = []
    influence_matrix(spy, x, t, progress=lambda d, total: made.append(total) or Task())
    assert torch.equal(x, before) and ticks == [1, 1, 1] and made == [3]
    # each query saw exactly one row scaled: its target's
    for k, v in enumerate(t.tolist(), start=1):
        changed = (seen[k] != before).any(dim=1).nonzero().flatten().tolist()
        assert changed == [v] and torch.allclose(seen[k][v], before[v] * 1.01)

    calls = [0]

    def failing(z):
        calls[0] += 1
        if calls[0] == 2:
            raise RuntimeError("API down")
        return f(z)

    with pytest.raises(RuntimeError):
        influence_matrix(failing, x, t)
    assert torch.equal(x, before)


def test_sparse_csr_features_give_the_dense_influences():
    pub, pri = _graph(seed=3)
    n = 80
    f = _linear_model(np.concatenate([pub, pri], axis=1), n)
    g = torch.Generator().manual_seed(2)
    x = (torch.rand(n, 6, generator=g) + 0.5) * (torch.rand(n, 6, generator=g) < 0.4)
    t = torch.arange(0, n, 3)
    dense = influence_matrix(f, x, t)
    xs = x.to_sparse_csr()
    sparse = influence_matrix(lambda z: f(z.to_dense()), xs, t)
    torch.testing.assert_close(sparse, dense)
    assert torch.equal(xs.to_dense(), x)                      # restored
    with pytest.raises(InvalidParameterError):
        influence_matrix(f, x.to_sparse_coo(), t)


@pytest.mark.parametrize("bad, name", [({"n_targets": 1}, "n_targets"), ({"delta": 0.0}, "delta"),
                                       ({"negatives": "all"}, "negatives"),
                                       ({"private_edge_frac": 0.0}, "private_edge_frac"),
                                       ({"seed": -1}, "seed")])
def test_run_linkteller_refuses_bad_attack_options_before_loading_data(bad, name, monkeypatch):
    """On Facebook these used to surface after minutes of release and training."""
    import gnnprivacy.datasets as ds
    from gnnprivacy.experiments.linkteller_run import run_linkteller

    def no_load(*a, **k):
        raise AssertionError("data loaded before the options were checked")

    monkeypatch.setattr(ds, "load_dataset", no_load)
    with pytest.raises(InvalidParameterError) as info:
        run_linkteller("cora", **bad)
    assert info.value.name == name
