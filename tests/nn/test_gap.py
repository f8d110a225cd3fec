"""GAP (aggregation perturbation) and the private-embedding study of spec 000 §5."""

import math

import pytest
import torch

from gnnprivacy.auditing.embedding_study import (counting_attack, embedding_release_audit,
                                                 precision_bound, precision_bound_prior,
                                                 sensitivity_check, synthetic_precision)
from gnnprivacy.training.gap import (GAPTrainer, bound_degree, gap_sensitivity, noisy_aggregate,
                                     true_sensitivity)


def _graph(n=60, p=0.2, seed=0):
    g = torch.Generator().manual_seed(seed)
    a = torch.rand(n, n, generator=g) < p
    a = torch.triu(a, 1)
    a = a | a.T
    return a.nonzero().T.contiguous()


def test_bound_degree_caps_in_and_out_degree():
    ei = _graph()
    kept = bound_degree(ei, 60, 3, generator=torch.Generator().manual_seed(1))
    assert torch.bincount(kept[0]).max() <= 3 and torch.bincount(kept[1]).max() <= 3
    assert kept.size(1) > 0
    assert set(map(tuple, kept.T.tolist())) <= set(map(tuple, ei.T.tolist()))


def test_aggregate_sensitivity_under_node_removal():
    """Removing a node (zero slot, its edges dropped) moves the noise-free aggregate matrix by
    at most sqrt((D+1)^2 + D) <= 2(D+1); the paper's sqrt(D) is exceeded (control)."""
    d, n = 4, 40
    ei = bound_degree(_graph(n, 0.3), n, d, generator=torch.Generator().manual_seed(0))
    x = torch.randn(n, 8, generator=torch.Generator().manual_seed(2))
    full = noisy_aggregate(x, ei, hops=1, noise_std=0.0, generator=None)
    z = int(torch.bincount(ei[1], minlength=n).argmax())
    keep = (ei[0] != z) & (ei[1] != z)
    x_minus = x.clone()
    x_minus[z] = 0.0
    without = noisy_aggregate(x_minus, ei[:, keep], hops=0, noise_std=0.0, generator=None)[0]
    # hop-1 sums before normalisation
    def sums(xx, e):
        u = torch.nn.functional.normalize(xx, dim=1)
        return u.clone().index_add_(0, e[1], u[e[0]])
    diff = float(torch.linalg.norm(sums(x, ei) - sums(x_minus, ei[:, keep])))
    assert diff <= true_sensitivity(d) + 1e-6 <= gap_sensitivity(d, "bounded-graph")
    assert diff > gap_sensitivity(d, "paper")
    assert len(full) == 2 and without.shape == x.shape


def test_gap_trainer_accounts_every_release_and_sound_noise_is_larger():
    from gnnprivacy.datasets import load_dataset

    data = load_dataset("csbm", num_nodes=300)
    kw = dict(epsilon=4.0, max_degree=5, encoder_epochs=2, epochs=2, batch_size=64,
              generator=0)
    sound = GAPTrainer(**kw).fit(data)
    paper = GAPTrainer(accounting="paper", **kw).fit(data)
    assert sound.epsilon_ <= 4.0 + 1e-9 and paper.epsilon_ <= 4.0 + 1e-9
    assert sound.noise_multiplier_ == pytest.approx(paper.noise_multiplier_)
    assert sound.agg_std_ / paper.agg_std_ == pytest.approx(2 * 6 / math.sqrt(5))
    plan = sound.plan_
    assert sound.steps_ == plan["encoder_steps"] + plan["hops"] + plan["classifier_steps"]
    assert sound.privacy_record()["unit"] == "node" and sound.privacy_record()["unaccounted"]
    logits = sound.predict_logits(data)
    assert logits.shape == (300, int(data.num_classes))


def test_precision_bound_reference_values():
    assert precision_bound(2, 1e-5, 10) == pytest.approx(0.450859, abs=1e-6)
    assert precision_bound(1e-9, 0.0, 4) == pytest.approx(0.25, abs=1e-6)
    assert precision_bound_prior(2, 1e-5, [0.1] * 10)[0] == pytest.approx(
        precision_bound(2, 1e-5, 10))


def test_counting_and_sensitivity_checks():
    assert all(v == 1.0 for v in counting_attack(trials=50)["accuracy_by_noise"].values())
    s = sensitivity_check(max_degree=6, trials=300)
    assert s["antipodal_difference"] == pytest.approx(2 * 7)
    assert s["random_fraction_above_1"] > 0.9 and s["one_neighbour_max"] <= 1 + 1e-9


def test_synthetic_precision_below_bound():
    r = synthetic_precision(eps=2.0, delta=1e-5, num_classes=10, n=5000)
    assert r["precision_ci95"][1] <= r["bound"]


def test_release_audit_exceeds_published_claim_only():
    r = embedding_release_audit(epsilon=2.0, max_degree=5, runs=3000)
    assert r["published"]["exceeds_claim"] and r["published"]["epsilon_lower_bound"] > 2.0
    assert not r["corrected"]["exceeds_claim"]


# ------------------------------------------------------------- the bounded-graph guarantee
def _agg_sums(x, ei):
    u = torch.nn.functional.normalize(x, dim=1)
    return u.clone().index_add_(0, ei[1], u[ei[0]])


def _remove(ei, z):
    return ei[:, (ei[0] != z) & (ei[1] != z)]


def _bounding(ei, n, d):
    return bound_degree(ei, n, d, generator=torch.Generator().manual_seed(0))


def hub_graph(m: int):
    """Hub 0 linked both ways to leaves 1..m; each leaf linked both ways to its own partner
    m+1..2m. With D = 1 every leaf keeps one of its two in-edges; removing the hub lets the
    partners' edges in."""
    leaves = torch.arange(1, m + 1)
    hub = torch.zeros(m, dtype=torch.long)
    src = torch.cat([hub, leaves, leaves, leaves + m])
    dst = torch.cat([leaves, hub, leaves + m, leaves])
    return torch.stack([src, dst]), 2 * m + 1


@pytest.mark.parametrize("seed", range(4))
def test_bounding_is_the_identity_within_d_and_adjacent_graphs_stay_within_the_sensitivity(seed):
    """The bounded-graph relation: G with in/out-degree <= D and G - z for EVERY z. The
    bounding leaves both unchanged, and the aggregate moves by at most sqrt((D+1)^2+D)."""
    d, n = 3, 50
    g = _bounding(_graph(n, 0.25, seed), n, d)          # a graph within the bound
    assert torch.equal(_bounding(g, n, d), g)
    x = torch.randn(n, 6, generator=torch.Generator().manual_seed(seed))
    full = _agg_sums(x, g)
    worst = 0.0
    for z in range(n):
        g_minus = _remove(g, z)
        assert torch.equal(_bounding(g_minus, n, d), g_minus)
        x_minus = x.clone()
        x_minus[z] = 0.0
        worst = max(worst, float(torch.linalg.norm(full - _agg_sums(x_minus, g_minus))))
    assert worst <= true_sensitivity(d) + 1e-5 <= gap_sensitivity(d)


def test_hub_construction_exceeds_the_sensitivity_after_bounding():
    """Why the mode is not called sound: on an input graph beyond D, removing one hub
    re-selects other nodes' edges, and the bounded aggregates move far beyond 2(D+1)."""
    ei, n = hub_graph(2048)
    x = torch.randn(n, 8, generator=torch.Generator().manual_seed(1))
    x_minus = x.clone()
    x_minus[0] = 0.0
    diff = _agg_sums(x, _bounding(ei, n, 1)) - _agg_sums(x_minus, _bounding(_remove(ei, 0), n, 1))
    changed = int((diff.norm(dim=1) > 1e-6).sum())
    assert float(diff.norm()) > 5 * gap_sensitivity(1) and changed > 500


def test_old_sound_name_is_refused_with_the_new_one():
    from gnnprivacy.errors import InvalidParameterError

    with pytest.raises(InvalidParameterError, match="renamed 'bounded-graph'"):
        GAPTrainer(accounting="sound")
    with pytest.raises(InvalidParameterError, match="bounded-graph"):
        gap_sensitivity(3, "sound")


def _tiny_fit(data, **kw):
    return GAPTrainer(epsilon=4.0, max_degree=2, encoder_epochs=1, epochs=1, batch_size=64,
                      **kw).fit(data)


def test_record_lists_every_unaccounted_access_and_the_dropped_edges():
    from gnnprivacy.datasets import load_dataset

    data = load_dataset("csbm", num_nodes=200)
    rec = _tiny_fit(data, generator=0).privacy_record()
    text = " ".join(rec["unaccounted"])
    assert rec["accounting_mode"] == "bounded-graph" and "sound" not in rec["accounting_mode"]
    assert rec["edges_dropped_by_bounding"] > 0
    assert f"dropped {rec['edges_dropped_by_bounding']} edges" in text
    assert "hop-0" in text and "number of training nodes" in text
    assert "D = 2" in rec["relation_detail"]


def test_secure_mode_draws_noise_from_the_os_not_the_seed():
    from gnnprivacy.datasets import load_dataset

    data = load_dataset("csbm", num_nodes=200)
    a = _tiny_fit(data, generator=0)
    b = _tiny_fit(data, generator=0)
    assert torch.equal(a.aggregates_, b.aggregates_)              # seeded: reproducible
    s1 = _tiny_fit(data, generator=0, secure_mode=True)
    s2 = _tiny_fit(data, generator=0, secure_mode=True)
    assert not torch.equal(s1.aggregates_, s2.aggregates_)
    assert s1.privacy_record()["secure_mode"] is True
    assert s1.epsilon_ == pytest.approx(a.epsilon_)
