"""Node membership inference: LiRA, shadow attack, white-box gradient attack."""

import numpy as np
import pytest

from gnnprivacy.attacks.membership import (MembershipGame, balanced_memberships, lira,
                                           parse_queries, shadow_attack, train_membership_models)
from gnnprivacy.auditing.gradient_observation import gradient_observation_attack
from gnnprivacy.errors import InvalidParameterError


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


def _two_query_game(k: int = 16, n: int = 400, seed: int = 0) -> MembershipGame:
    """Signal only in the second query ("0hop"); the primary ("full") is pure noise."""
    rng = np.random.default_rng(seed)
    m = balanced_memberships(k, n, generator=rng)
    base = rng.normal(size=n)
    full = base + 0.5 * rng.normal(size=(k, n))
    hop0 = base + 1.0 * m + 0.5 * rng.normal(size=(k, n))
    p = 1 / (1 + np.exp(-full))
    return MembershipGame("synthetic", m, full, np.stack([p, 1 - p], axis=2), float("inf"),
                          extra_phi={"0hop": hop0})


def test_parse_queries():
    assert parse_queries("full") == ("full",)
    assert parse_queries("full+0hop") == ("full", "0hop")
    assert parse_queries(["0hop"]) == ("0hop",)
    for bad in ("2hop", "full+full", "", ()):
        with pytest.raises(InvalidParameterError):
            parse_queries(bad)


def test_lira_uses_the_named_query_and_sums_several():
    game = _two_query_game()
    assert game.queries == ("full", "0hop")
    assert abs(lira(game, n_boot=20)["auc"] - 0.5) < 0.03          # default: the primary query
    hop0 = lira(game, n_boot=20, query="0hop")
    both = lira(game, n_boot=20, query="full+0hop")
    assert hop0["auc"] > 0.8 and both["auc"] > 0.75 and both["query"] == "full+0hop"
    with pytest.raises(InvalidParameterError):
        lira(_game(1.0), query="0hop")                               # not in that game


def test_per_node_variance_helps_when_node_variances_differ():
    rng = np.random.default_rng(1)
    k, n = 32, 600
    m = balanced_memberships(k, n, generator=rng)
    scale = np.where(rng.random(n) < 0.5, 0.05, 2.0)              # quiet and loud nodes
    phi = rng.normal(size=n) + 0.3 * m + scale * rng.normal(size=(k, n))
    game = MembershipGame("synthetic", m, phi, np.zeros((k, n, 1)), float("inf"))
    fixed = lira(game, n_boot=20, fixed_variance=True)
    per_node = lira(game, n_boot=20, fixed_variance=False)
    assert per_node["auc"] > fixed["auc"] + 0.05 and per_node["fixed_variance"] is False


def _csbm(n: int = 200):
    from gnnprivacy.datasets import load_dataset

    return load_dataset("csbm", num_nodes=n)


def test_0hop_query_is_each_node_alone():
    import torch

    from gnnprivacy.attacks.membership import _induced, _query
    from gnnprivacy.auditing.training import make_trainer_for, node_logits
    from gnnprivacy.method.registry import get_method

    data = _csbm()
    mask = torch.from_numpy(balanced_memberships(2, 200, generator=np.random.default_rng(0))[0])
    params = get_method("gcn").make_params({"epochs": 20})
    trainer = make_trainer_for("gcn", params, seed=0)
    trainer.fit(_induced(data, mask))
    hop0 = node_logits(trainer, _query(data, mask, "0hop"))
    full = node_logits(trainer, _query(data, mask, "full"))
    alone = _induced(data, torch.arange(200) == 7)                    # node 7 without neighbours
    assert torch.allclose(hop0[7], node_logits(trainer, alone)[0], atol=1e-5)
    assert not torch.allclose(hop0, full)


def test_train_with_two_queries_end_to_end():
    game = train_membership_models("gcn", _csbm(), num_models=4, queries="full+0hop",
                                   params={"epochs": 20, "patience": 20})
    assert game.queries == ("full", "0hop") and game.extra_phi["0hop"].shape == (4, 200)
    assert not np.allclose(game.phi, game.extra_phi["0hop"])
    out = lira(game, query="full+0hop", n_boot=20)
    assert out["num_scores"] > 0 and out["game"] == "induced"


def test_labels_game_split_and_ldp_method():
    import torch

    from gnnprivacy.attacks.membership import _labels_split

    data = _csbm()
    mask = torch.from_numpy(balanced_memberships(2, 200, generator=np.random.default_rng(0))[0])
    split = _labels_split(data, mask, torch.Generator().manual_seed(0))
    assert torch.equal(split.train_mask | split.val_mask, mask)
    assert not (split.train_mask & split.val_mask).any() and torch.equal(split.test_mask, ~mask)
    assert int(split.val_mask.sum()) == int(mask.sum()) // 3
    assert split.edge_index.shape == data.edge_index.shape            # whole graph kept
    game = train_membership_models("rgnn", data, num_models=2,
                                   params={"group_size": 1, "epochs": 10, "kx": 2, "ky": 2,
                                           "num_clusters": 4, "eps_x": 0.1, "eps_y": 1.0})
    assert game.game == "labels" and game.phi.shape == (2, 200)
    assert game.claimed_epsilon == pytest.approx(10 * 0.1 + 1.0)      # sound m eps_x + eps_y
    with pytest.raises(InvalidParameterError):
        train_membership_models("rgnn", data, num_models=2, game="induced")
    with pytest.raises(InvalidParameterError):
        train_membership_models("rgnn", data, num_models=2, queries="0hop")
    with pytest.raises(InvalidParameterError):
        train_membership_models("gcn", data, num_models=2, game="edges")


def test_query_reachable_from_assess_cli(tmp_path):
    import json

    from click.testing import CliRunner

    from gnnprivacy.cli import main
    from gnnprivacy.method.runner import run

    rec = run({"method": "dpmlp", "dataset": "csbm", "dataset_args": "num_nodes=120",
               "epsilon": 2.0, "steps": 5, "runs_dir": str(tmp_path)})
    args = ["assess", str(tmp_path / f"{rec.run_id}.json"), "--audit-runs", "200",
            "--no-link-stealing", "--no-baseline", "--no-save", "--lira-models", "4"]
    result = CliRunner().invoke(main, args + ["--lira-query", "full+0hop", "--json"])
    assert result.exit_code == 0, result.output
    lira_card = json.loads(result.stdout)["membership"]["lira"]
    assert lira_card["query"] == "full+0hop" and lira_card["game"] == "induced"
    bad = CliRunner().invoke(main, args + ["--lira-query", "3hop"])
    assert bad.exit_code != 0 and "query" in bad.output
