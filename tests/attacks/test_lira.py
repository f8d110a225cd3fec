"""LiRA with shadow models (attacks/lira.py and gp.assess(..., train_fn=...)), against a known
truth: an overfit model leaks, a model whose training ignores membership does not."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional as F

import gnnprivacy as gp
from gnnprivacy.attacks.lira import half_memberships, lira_attack, lira_scores
from gnnprivacy.errors import InvalidParameterError


def _game(shift, k=16, n=400, seed=0):
    rng = np.random.default_rng(seed)
    mem = half_memberships(k, np.arange(n), n, generator=rng)
    base = rng.normal(0, 2, n)                       # per-node difficulty
    phi = base + shift * mem + rng.normal(0, 1, (k, n))
    return phi, mem


def test_half_memberships_are_balanced_and_stay_in_the_pool():
    mem = half_memberships(8, np.arange(10, 50), 60, generator=np.random.default_rng(0))
    assert (mem[:, 10:50].sum(0) == 4).all() and not mem[:, :10].any() and not mem[:, 50:].any()


@pytest.mark.parametrize("variant", ["online", "offline"])
def test_lira_on_synthetic_scores(variant):
    leak = lira_attack(*_game(2.0), variant=variant)
    null = lira_attack(*_game(0.0), variant=variant)
    assert leak["auc"] > 0.8 and leak["tpr_at_1pct_fpr"] > 0.05
    lo, hi = null["auc_ci95"]
    assert lo < 0.5 < hi and abs(null["auc"] - 0.5) < 0.03
    assert len(leak["roc"]["fpr"]) == len(leak["roc"]["tpr"]) and leak["roc"]["tpr"][-1] == 1.0


def test_lira_scores_need_a_known_variant():
    phi, mem = _game(1.0, k=4, n=20)
    with pytest.raises(InvalidParameterError, match="variant"):
        lira_scores(phi[0], phi[1:], mem[1:], variant="both")


class Sage(nn.Module):
    def __init__(self, f, c, h=64):
        super().__init__()
        from torch_geometric.nn import SAGEConv

        self.c1, self.head = SAGEConv(f, h), nn.Linear(h, c)

    def forward(self, x, edge_index):
        return self.head(torch.relu(self.c1(x, edge_index)))


def _fit(data, seed, mask):
    torch.manual_seed(seed)
    model = Sage(data.num_features, int(data.y.max()) + 1)
    opt = torch.optim.Adam(model.parameters(), lr=0.02)
    for _ in range(150):
        opt.zero_grad()
        out = model(data.x, data.edge_index)
        F.cross_entropy(out[mask], data.y[mask]).backward()
        opt.step()
    return model


@pytest.fixture(scope="module")
def graph():
    # few, noisy features: a model must memorise its training labels to fit them
    return gp.load_dataset("csbm", num_nodes=300, train_frac=0.5, val_frac=0.0, test_frac=0.5,
                           num_features=64, feature_signal=0.5, homophily=0.5)


def test_lira_through_assess_an_overfit_model_leaks(graph):
    def overfit(data, seed):
        return _fit(data, seed, data.train_mask)

    card = gp.assess(overfit(graph, 0), graph, train_fn=overfit, shadows=8,
                     link_attacks=())
    for variant in ("online", "offline"):
        lira = card["membership"][f"lira_{variant}"]
        assert lira["auc_ci95"][0] > 0.85 and lira["tpr_at_1pct_fpr"] > 0.1, lira
    assert card["membership"]["lira_released_model"]["auc"] > 0.85
    assert card["code_audit"]["note"].startswith("train_fn does not train through make_private")


def test_lira_through_assess_a_model_independent_of_membership(graph):
    fixed = torch.arange(int(graph.num_nodes)) % 2 == 0      # ignores data.train_mask

    def independent(data, seed):
        return _fit(data, seed, fixed)

    card = gp.assess(independent(graph, 0), graph, train_fn=independent, shadows=8,
                     code_audit=False, link_stealing=False)
    for variant in ("online", "offline"):
        lira = card["membership"][f"lira_{variant}"]
        assert lira["auc_ci95"][0] < 0.5 < lira["auc_ci95"][1], lira
        assert abs(lira["auc"] - 0.5) < 0.06
