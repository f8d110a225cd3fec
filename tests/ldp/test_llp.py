"""Label-proportion regulariser, METIS bags and bag targets (spec 004 §7; §12 check 12)."""

from __future__ import annotations

import pytest
import torch

from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.ldp.llp import bag_targets, clip_renormalize, llp_loss, make_bags
from gnnprivacy.ldp.partition import metis_partition


def test_bags_skip_empty_clusters_and_average_per_bag():
    parts = torch.tensor([0, 0, 1, 1, 2, 2])
    train = torch.tensor([True, True, False, False, True, False])   # part 1 has no train node
    bags = make_bags(parts, train)
    assert bags.num_bags == 2 and bags.sizes.tolist() == [2, 1]
    vals = torch.tensor([[1.0], [3.0], [9.0], [9.0], [5.0], [9.0]])
    assert bags.mean(vals).view(-1).tolist() == [2.0, 5.0]


def test_llp_loss_zero_at_match_and_finite_with_clipped_targets():
    parts = torch.tensor([0, 0, 1, 1])
    bags = make_bags(parts, torch.ones(4, dtype=torch.bool))
    logits = torch.tensor([[2.0, 0.0], [0.0, 1.0], [1.0, 1.0], [3.0, -1.0]], requires_grad=True)
    pred = bags.mean(torch.softmax(logits, 1)).detach()
    assert llp_loss(logits, bags, pred).item() == pytest.approx(0.0, abs=1e-6)
    assert llp_loss(logits, bags, pred, direction="pred_target").item() == pytest.approx(0.0, abs=1e-6)
    targets = clip_renormalize(torch.tensor([[1.2, -0.2], [0.5, 0.5]])) + 1e-20
    loss = llp_loss(logits, bags, targets)
    loss.backward()
    assert loss.item() > 0 and torch.isfinite(logits.grad).all()
    # the literal paper direction differs from the default one
    assert llp_loss(logits, bags, targets, direction="pred_target").item() != pytest.approx(loss.item())


def test_no_bag_gives_zero_loss_and_bad_direction_errors():
    bags = make_bags(torch.tensor([0, 1]), torch.zeros(2, dtype=torch.bool))
    logits = torch.zeros(2, 3, requires_grad=True)
    assert bags.num_bags == 0 and llp_loss(logits, bags, torch.zeros(0, 3)).item() == 0.0
    with pytest.raises(InvalidParameterError, match="direction"):
        llp_loss(logits, bags, torch.zeros(0, 3), direction="sideways")


def test_bag_targets_are_distributions_and_exact_at_high_epsilon():
    g = torch.Generator().manual_seed(0)
    parts = torch.randint(0, 5, (200,), generator=g)
    train = torch.rand(200, generator=g) < 0.6
    y = torch.randint(0, 4, (200,), generator=g)
    bags = make_bags(parts, train)
    t = bag_targets(bags, y, epsilon=0.5, num_classes=4)
    assert (t >= 0).all() and torch.allclose(t.sum(1), torch.ones(bags.num_bags), atol=1e-5)
    exact = bag_targets(bags, y, epsilon=40.0, num_classes=4)
    truth = bags.mean(torch.nn.functional.one_hot(y, 4).float())
    assert torch.allclose(exact, truth.clamp_min(0) / truth.sum(1, keepdim=True), atol=1e-5)


@pytest.mark.statistical
def test_bag_targets_debias_grr_reports_with_positive_control():
    from gnnprivacy.mechanisms import GRR

    n, c, eps = 20_000, 4, 1.0
    g = torch.Generator().manual_seed(1)
    y = torch.multinomial(torch.tensor([0.55, 0.25, 0.15, 0.05]), n, replacement=True, generator=g)
    bags = make_bags(torch.zeros(n, dtype=torch.long), torch.ones(n, dtype=torch.bool))
    rep = GRR(epsilon=eps, num_categories=c, unit="label")(y, generator=g)
    truth = torch.bincount(y, minlength=c).float() / n
    est = bag_targets(bags, rep, epsilon=eps, num_classes=c)[0]
    raw = bags.mean(torch.nn.functional.one_hot(rep, c).float())[0]
    # GRR inverse inflates the sampling error by 1/(p - q) ~ 3.3 here: tolerance from n
    tol = 4 * (0.25 / n) ** 0.5 * 3.3
    assert (est - truth).abs().max() < tol
    assert (raw - truth).abs().max() > tol   # positive control: no de-biasing is caught


def test_metis_partition_deterministic_balanced_and_validated():
    g = torch.Generator().manual_seed(2)
    ei = torch.randint(0, 400, (2, 2000), generator=g)
    a = metis_partition(ei, 400, 8, seed=5)
    assert torch.equal(a, metis_partition(ei, 400, 8, seed=5))
    assert a.min() >= 0 and a.max() < 8
    sizes = torch.bincount(a, minlength=8)
    assert sizes.min() > 0.7 * 50 and sizes.max() < 1.3 * 50
    assert (metis_partition(ei, 400, 1) == 0).all()
    with pytest.raises(InvalidParameterError, match="num_parts"):
        metis_partition(ei, 400, 401)


def test_metis_cuts_fewer_edges_than_a_random_partition(sbm):
    parts = metis_partition(sbm.edge_index, sbm.num_nodes, 3, seed=0)
    ei = sbm.edge_index
    within = (parts[ei[0]] == parts[ei[1]]).float().mean().item()
    shuffled = parts[torch.randperm(sbm.num_nodes, generator=torch.Generator().manual_seed(0))]
    within_random = (shuffled[ei[0]] == shuffled[ei[1]]).float().mean().item()
    assert within > 0.8 > 0.5 > within_random   # the SBM's 3 blocks are found
