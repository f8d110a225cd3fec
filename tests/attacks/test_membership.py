"""Node membership inference: LiRA, shadow attack, white-box gradient attack."""

import numpy as np
import pytest

from gnnprivacy.attacks.membership import (MembershipGame, balanced_memberships,
                                           gradient_observation_attack, lira, shadow_attack,
                                           train_membership_models)


def _game(shift: float, k: int = 8, n: int = 400, seed: int = 0) -> MembershipGame:
    rng = np.random.default_rng(seed)
    m = balanced_memberships(k, n, generator=rng)
    base = rng.normal(size=n)                       # per-node difficulty
    phi = base + shift * m + 0.5 * rng.normal(size=(k, n))
    p = 1 / (1 + np.exp(-phi))
    post = np.stack([p, 1 - p], axis=2)
    return MembershipGame("synthetic", m, phi, post, float("inf"))


def test_balanced_memberships():
    m = balanced_memberships(6, 50, generator=np.random.default_rng(0))
    assert m.shape == (6, 50) and (m.sum(0) == 3).all()


def test_lira_detects_memorisation_and_not_noise():
    leaky = lira(_game(1.0), n_boot=50)
    assert leaky["auc"] > 0.8 and leaky["tpr_at_1pct_fpr"] > 0.05
    assert leaky["auc_ci95"]["low"] > 0.75
    silent = lira(_game(0.0), n_boot=50)
    assert abs(silent["auc"] - 0.5) < 0.03
    for key in ("auc", "accuracy", "tpr_at_1pct_fpr", "tpr_at_0.1pct_fpr", "auc_ci95"):
        assert key in silent


def test_shadow_attack_runs_on_the_same_game():
    assert shadow_attack(_game(1.0), n_boot=20)["auc"] > 0.7
    assert abs(shadow_attack(_game(0.0), n_boot=20)["auc"] - 0.5) < 0.05


def test_gradient_observation_attack_grows_with_epsilon():
    lo = gradient_observation_attack("dpmlp", "csbm", epsilon=0.5, runs=2000,
                                     params={"steps": 10})
    hi = gradient_observation_attack("dpmlp", "csbm", epsilon=8.0, runs=2000,
                                     params={"steps": 10})
    assert lo["auc"] < hi["auc"] and hi["auc"] > 0.8


def test_end_to_end_gcn_on_csbm():
    from gnnprivacy.datasets import load_dataset

    data = load_dataset("csbm", num_nodes=200)
    game = train_membership_models("gcn", data, num_models=4,
                                   params={"epochs": 30, "patience": 30})
    assert game.phi.shape == (4, 200) and game.memberships.sum(0).tolist() == [2] * 200
    out = lira(game)
    assert 0.0 <= out["auc"] <= 1.0 and out["num_scores"] > 0
