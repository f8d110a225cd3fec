"""GAP (aggregation perturbation) and the private-embedding study of spec 000 §5."""

import math

import pytest
import torch

from gnnprivacy.auditing.embedding_study import (counting_attack, embedding_release_audit,
                                                 precision_bound, precision_bound_prior,
                                                 sensitivity_check, synthetic_precision)
from gnnprivacy.nn.gap import (GAPTrainer, bound_degree, gap_sensitivity, noisy_aggregate,
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
    assert diff <= true_sensitivity(d) + 1e-6 <= gap_sensitivity(d, "sound")
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
