"""Link-stealing attacks (He et al.; spec 003 §3.1-3.2), the D1-D4 splits and the CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.spatial import distance as ssd

from gnnprivacy.attacks.base import outcome_metrics
from gnnprivacy.attacks.link_stealing.features import DISTANCES, distances, entropy, entropy_ops, pair_ops
from gnnprivacy.attacks.link_stealing.he import NodeView, attack_features, run_he_attack
from gnnprivacy.nn.pair_classifier import AttackMLP, kmeans_decisions
from gnnprivacy.datasets.link_splits import PairSet, attack_splits, undirected_edges
from gnnprivacy.errors import InvalidParameterError


def test_distances_match_scipy_and_nan_becomes_zero():
    rng = np.random.default_rng(0)
    a, b = rng.random((30, 7)), rng.random((30, 7))
    b[0] = 0.0  # canberra 0/0 terms, cosine/correlation undefined -> 0
    a[1] = 0.5  # constant row: correlation undefined
    got = distances(a, b)
    for k, name in enumerate(DISTANCES):
        fn = getattr(ssd, name)
        with np.errstate(all="ignore"):
            ref = np.array([fn(x, y) for x, y in zip(a, b)], dtype=float)
        ref[~np.isfinite(ref)] = 0.0
        np.testing.assert_allclose(got[:, k], ref, atol=1e-12, err_msg=name)


def test_entropy_and_ops():
    p = np.array([[1.0, 0.0], [0.5, 0.5]])
    h = entropy(p)
    assert h[1] > h[0] and h[1] == pytest.approx(-2 * (0.50001 * np.log(0.50001)))
    ops = pair_ops(np.array([[1.0, 2.0]]), np.array([[3.0, 5.0]]))
    np.testing.assert_allclose(ops, [[2, 3.5, 3, 10, 2, 3, 4, 9]])
    assert entropy_ops(p, p[::-1]).shape == (2, 4)


def test_kmeans_lower_cluster_is_linked():
    d = np.array([0.01, 0.02, 0.03, 0.9, 0.95, 1.0])
    assert kmeans_decisions(d).tolist() == [1, 1, 1, 0, 0, 0]
    assert kmeans_decisions(np.ones(4)).tolist() == [1, 1, 1, 1]


def _toy_data(n=400, a=4, seed=0):

    from gnnprivacy.datasets.csbm import generate_csbm

    return generate_csbm(num_nodes=n, num_classes=a, num_features=16, avg_degree=8,
                         homophily=0.9, feature_signal=1.0, seed=seed)


def test_splits_are_disjoint_balanced_and_deterministic():
    data = _toy_data()
    s = attack_splits(data, seed=3)
    all_nodes = np.concatenate([s.d1.nodes, s.d2.nodes, s.d3.nodes])
    assert len(np.unique(all_nodes)) == data.num_nodes
    edges = {tuple(e) for e in undirected_edges(s.d1.edge_index).tolist()}
    pos = [(u, w) for u, w, l in zip(s.d4.u, s.d4.w, s.d4.label) if l == 1]
    neg = [(u, w) for u, w, l in zip(s.d4.u, s.d4.w, s.d4.label) if l == 0]
    assert len(pos) == len(neg) == round(0.2 * len(edges))
    assert all(p in edges for p in pos) and not any(p in edges for p in neg)
    known = set(zip(s.known.u.tolist(), s.known.w.tolist()))
    assert not known & set(pos) and not known & set(neg)
    assert (s.known.u < s.known.w).all() and (s.d4.u < s.d4.w).all()
    s2 = attack_splits(data, seed=3)
    assert np.array_equal(s.d4.u, s2.d4.u) and np.array_equal(s.d1.nodes, s2.d1.nodes)
    assert not np.array_equal(attack_splits(data, seed=4).d1.nodes, s.d1.nodes)
    assert s.d1.test_mask.mean() == pytest.approx(0.2, abs=0.01)


def test_component_split_keeps_graphs_whole():
    import torch

    data = _toy_data(200)
    data.graph_id = torch.arange(200) // 10
    s = attack_splits(data, seed=0, fractions=(0.4, 0.4, 0.2))
    gid = data.graph_id.numpy()
    for part in (s.d1, s.d2, s.d3):
        for g in np.unique(gid[part.nodes]):
            assert (gid == g).sum() == np.isin(part.nodes, np.flatnonzero(gid == g)).sum()
    with pytest.raises(InvalidParameterError, match="split"):
        attack_splits(_toy_data(100), split="component")


def _synthetic_view(n=300, a=5, seed=0, signal=3.0):
    """Nodes in communities; linked pairs share a community, posteriors follow it."""
    rng = np.random.default_rng(seed)
    comm = rng.integers(0, a, n)
    logits = signal * np.eye(a)[comm] + rng.normal(0, 1, (n, a))
    post = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    x = np.eye(a)[comm] + rng.normal(0, 0.5, (n, a))
    ref = post[rng.permutation(n)] * 0 + post  # reference == target (informative)

    def pairs(m):
        u, w = [], []
        while len(u) < m:
            i, j = rng.integers(0, n, 2)
            if i < j and comm[i] == comm[j]:
                u.append(i), w.append(j)
        neg_u, neg_w = rng.integers(0, n, m), rng.integers(0, n, m)
        keep = neg_u != neg_w
        nu, nw = np.minimum(neg_u, neg_w)[keep], np.maximum(neg_u, neg_w)[keep]
        return PairSet(np.r_[u, nu], np.r_[w, nw], np.r_[np.ones(m), np.zeros(keep.sum())].astype(int))

    return NodeView(target=post, reference=ref, attributes=x), pairs(150), pairs(150)


@pytest.mark.parametrize("attack", [0, 2, 3, 6])
def test_attacks_find_links_on_informative_posteriors(attack):
    view, train, test = _synthetic_view()
    out = run_he_attack(attack, view, test, known_pairs=train, epochs=30, seed=0)
    m = out.metrics
    assert m["auc"] > 0.85 and m["accuracy"] > 0.7
    # positive control: uninformative posteriors give chance-level AUC
    rng = np.random.default_rng(9)
    noise = NodeView(target=rng.dirichlet(np.ones(5), 300), reference=rng.dirichlet(np.ones(5), 300),
                     attributes=rng.random((300, 5)))
    if attack in (0, 3):
        assert run_he_attack(attack, noise, test, known_pairs=train, epochs=30).metrics["auc"] < 0.7


def test_transfer_attacks_use_shadow_pairs():
    view, train, test = _synthetic_view(seed=1)
    shadow, strain, _ = _synthetic_view(seed=2)
    for attack in (1, 4, 5, 7):
        out = run_he_attack(attack, view, test, known_pairs=train, shadow_view=shadow,
                            shadow_pairs=strain, epochs=30)
        assert out.metrics["auc"] > 0.8, attack
    with pytest.raises(InvalidParameterError, match="shadow"):
        run_he_attack(1, view, test)


def test_raw_auc_is_not_flipped():
    labels = np.array([1, 1, 0, 0])
    m = outcome_metrics(np.array([0.1, 0.2, 0.8, 0.9]), labels)
    assert m["auc"] == 0.0 and m["auc_flipped"] == 1.0


def test_scaler_modes_and_feature_dims():
    view, train, test = _synthetic_view()
    assert attack_features(6, view, test).shape[1] == 8 * 5 + 32
    assert attack_features(3, view, test).shape[1] == 4 * 5 + 12
    assert attack_features(1, view, test).shape[1] == 12
    x = attack_features(1, view, train)
    clf = AttackMLP(epochs=5, scaler_mode="train_only").fit(x, train.label)
    sep = AttackMLP(epochs=5, scaler_mode="separate").fit(x, train.label)
    xt = attack_features(1, view, test) * 3.0 + 1.0
    # the separate scaler refits on the test features, so an affine shift of them cancels
    np.testing.assert_allclose(sep.predict_proba(xt), sep.predict_proba(attack_features(1, view, test) * 3 + 1))
    assert not np.allclose(clf.predict_proba(xt), clf.predict_proba(attack_features(1, view, test)))


def test_run_link_stealing_records_and_grid_keeps_accuracy(tmp_path):
    from gnnprivacy.attacks.link_stealing.method import run_link_stealing
    from gnnprivacy.records.record import read_record

    kw = dict(dataset="csbm", seed=0, runs_dir=str(tmp_path), epochs=60, patience=20, attack_epochs=20)
    none = run_link_stealing(attack=0, **kw)
    grid = run_link_stealing(attack=0, defense="grid", **kw)
    assert grid.metrics["model_test_accuracy"] == none.metrics["model_test_accuracy"]
    assert grid.metrics["num_core_nodes"] > 0 and grid.metrics["max_l1_distortion"] <= 0.4 + 1e-9
    rec = read_record(tmp_path / f"{grid.run_id}.json")
    assert rec.method == "link-stealing" and rec.config["defense"] == "grid"
    for key in ("auc", "accuracy", "precision", "recall", "tpr_at_1pct_fpr", "grid_seconds"):
        assert key in rec.metrics


def test_cli_json(tmp_path):
    from click.testing import CliRunner

    from gnnprivacy.cli import main

    res = CliRunner().invoke(main, ["attack", "link-stealing", "--dataset", "csbm", "--attack", "3",
                                    "--defense", "grid", "--theta", "0.3", "--json",
                                    "--runs-dir", str(tmp_path)])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output.strip().splitlines()[-1])
    for key in ("auc", "accuracy", "precision", "recall", "tpr_at_1pct_fpr", "model_test_accuracy",
                "num_core_nodes", "max_l1_distortion", "grid_seconds"):
        assert key in out
    bad = CliRunner().invoke(main, ["attack", "link-stealing", "--dataset", "csbm", "--defense", "grid",
                                    "--theta", "3", "--runs-dir", str(tmp_path)])
    assert bad.exit_code != 0 and "theta" in bad.output


def test_nhop_aware_adaptive_attack_trades_precision_for_recall():
    from gnnprivacy.attacks.link_stealing.pipeline import LinkStealingSettings, run_experiment
    from gnnprivacy.datasets import load_dataset

    data = load_dataset("csbm")
    kw = dict(attack=6, defense="grid", epochs=60, patience=20, attack_epochs=20)
    plain, _ = run_experiment(data, LinkStealingSettings(**kw))
    adaptive, info = run_experiment(data, LinkStealingSettings(adaptive="nhop", **kw))
    assert info["nhop_positives_added"] > 0
    assert adaptive["recall"] > plain["recall"] and adaptive["precision"] < plain["precision"]
    with pytest.raises(InvalidParameterError, match="attack"):
        LinkStealingSettings(attack=0, adaptive="nhop")


@pytest.mark.parametrize("defense, param", [("l2", 0.05), ("dropout", 0.3), ("gap", 4.0),
                                            ("memguard", 0.3), ("minmax", 1.0)])
def test_counterpart_defenses_run_in_the_harness(defense, param):
    from gnnprivacy.attacks.link_stealing.pipeline import (DEFENSE_PARAM_DEFAULTS, LinkStealingSettings,
                                                           run_experiment)
    from gnnprivacy.datasets import load_dataset

    data = load_dataset("csbm", num_nodes=400)
    m, info = run_experiment(data, LinkStealingSettings(attack=0, defense=defense, defense_param=param,
                                                        epochs=30, patience=10))
    assert 0 <= m["auc"] <= 1 and 0 <= m["model_test_accuracy"] <= 1
    if defense == "gap":
        assert 0 < m["gap_epsilon"] <= 4.0 and info["gap_privacy"]["unit"] == "node"
    if defense == "memguard":
        assert m["als"] == 0.0
    default = LinkStealingSettings(defense=defense).defense_param
    assert default is not None and default == DEFENSE_PARAM_DEFAULTS[defense]


def test_defense_param_defaults_are_recorded_and_refused_where_unused():
    from gnnprivacy.attacks.link_stealing.method import LinkStealingParams
    from gnnprivacy.attacks.link_stealing.pipeline import LinkStealingSettings

    assert LinkStealingParams(defense="gap").defense_param == 4.0        # what the record shows
    assert LinkStealingParams(defense="memguard", defense_param=0.2).defense_param == 0.2
    assert LinkStealingParams(defense="grid").defense_param is None
    for defense in ("none", "grid"):
        with pytest.raises(InvalidParameterError, match="defense_param"):
            LinkStealingSettings(defense=defense, defense_param=0.1)
    with pytest.raises(InvalidParameterError, match="defense_param"):
        LinkStealingSettings(defense="l2", defense_param=float("nan"))
    # each counterpart's range is checked when the settings are made, before any training
    for defense, bad in (("l2", -0.1), ("dropout", 1.0), ("gap", 0.0), ("memguard", -1.0),
                         ("minmax", -0.5)):
        with pytest.raises(InvalidParameterError, match="defense_param"):
            LinkStealingSettings(defense=defense, defense_param=bad)
    assert LinkStealingSettings(defense="dropout", defense_param=0.0).defense_param == 0.0


def test_ils_query_subgraphs_drop_the_tested_edge():
    from gnnprivacy.attacks.link_stealing.ils import _graph_features, ils_query_posteriors
    from gnnprivacy.attacks.link_stealing.pipeline import LinkStealingSettings

    # the tested edge is removed from both query subgraphs and from the graph features
    edges = np.array([[0, 1, 1, 2, 0, 2], [1, 0, 2, 1, 2, 0]])
    pairs = PairSet(np.array([0]), np.array([1]), np.array([1]))
    seen = []

    def query(xs, es):
        import torch

        seen.append((xs.shape[0], es.shape[1]))
        return torch.zeros(xs.shape[0], 2)

    import torch

    ils_query_posteriors(query, torch.zeros(3, 1), edges, pairs, batch=1)
    assert seen == [(3, 4), (3, 4)]  # triangle minus the tested edge, both directions
    seen.clear()
    ils_query_posteriors(query, torch.zeros(3, 1), edges, pairs)
    assert seen == [(6, 8)]          # both ego graphs in one disjoint union
    np.testing.assert_allclose(_graph_features(edges, 3, pairs), [[1.0, 1.0, 1.0]])
    with pytest.raises(InvalidParameterError, match="inductive"):
        LinkStealingSettings(model="gcn", ils="A2")


@pytest.mark.parametrize("model", ["sage", "gat", "gin", "gcn"])
def test_batched_ego_graph_queries_equal_one_query_per_ego_graph(model):
    """The disjoint union changes nothing: each centre's posterior is its own ego graph's."""
    from torch_geometric.data import Data

    from gnnprivacy.attacks.link_stealing.ils import ils_query_posteriors
    from gnnprivacy.attacks.link_stealing.pipeline import TARGET_HPARAMS, _train
    from gnnprivacy.datasets import load_dataset

    data = load_dataset("csbm", num_nodes=200)
    hp = TARGET_HPARAMS.get(model, TARGET_HPARAMS["gcn"])
    trained = _train(model, data, hp, epochs=5, patience=5, seed=0, normalize=False)

    def query(xs, es):
        return trained.predict_logits(Data(x=xs, edge_index=es, num_nodes=xs.shape[0]))

    rng = np.random.default_rng(0)
    e = data.edge_index.numpy()
    pick = rng.choice(e.shape[1], 20, replace=False)
    pairs = PairSet(e[0, pick], e[1, pick], np.ones(20, int))
    one = ils_query_posteriors(query, data.x, e, pairs, batch=1)
    many = ils_query_posteriors(query, data.x, e, pairs, batch=7)
    for a, b in zip(one, many):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)
    # control: a model whose output depends on the whole input graph (here through the mean
    # over all nodes) gives other posteriors once batched, so the comparison can fail
    def leaky(xs, es):
        out = query(xs, es)
        return out + out.mean(dim=0, keepdim=True)

    one = ils_query_posteriors(leaky, data.x, e, pairs, batch=1)
    many = ils_query_posteriors(leaky, data.x, e, pairs, batch=7)
    assert not np.allclose(one[0], many[0], atol=1e-4)


@pytest.mark.slow
def test_ils_attacks_on_an_inductive_model():
    from gnnprivacy.attacks.link_stealing.pipeline import LinkStealingSettings, run_experiment
    from gnnprivacy.datasets import load_dataset

    data = load_dataset("csbm", num_nodes=300)
    for ils in ("A2", "A9"):
        m, info = run_experiment(data, LinkStealingSettings(model="sage", ils=ils, epochs=30,
                                                            patience=10))
        assert m["auc"] > 0.6 and info["attack"]["ils"] == ils


def test_link_infiltrator_detects_links_of_a_two_layer_model():
    from torch_geometric.data import Data

    from gnnprivacy.attacks.link_stealing.infiltrator import ETA, run_link_infiltrator
    from gnnprivacy.attacks.link_stealing.pipeline import LinkStealingSettings, TARGET_HPARAMS, _train
    from gnnprivacy.datasets import load_dataset
    from gnnprivacy.datasets.link_splits import attack_splits
    from gnnprivacy.defenses import GRID

    data = load_dataset("csbm", num_nodes=300)
    sp = attack_splits(data, seed=0, setting="inductive")
    d1 = sp.d1.to_data()
    model = _train("sage", d1, TARGET_HPARAMS["sage"], epochs=20, patience=5, seed=0, normalize=False)

    def query(xs, es):
        return model.predict_logits(Data(x=xs, edge_index=es, num_nodes=xs.shape[0]))

    out = run_link_infiltrator(query, d1.x, d1.edge_index.numpy(), sp.d4)
    neg = sp.d4.label == 0
    assert out.scores[neg].max() < ETA  # a is >= 3 hops from w without the edge u-w
    assert out.metrics["auc"] > 0.9
    defended = run_link_infiltrator(query, d1.x, d1.edge_index.numpy(), sp.d4, grid=GRID())
    assert defended.info["per_query_grid"] and 0.0 <= defended.metrics["auc"] <= 1.0
    with pytest.raises(InvalidParameterError, match="inductive"):
        LinkStealingSettings(model="gcn", influence="infiltrator")


def test_label_only_control_is_the_same_top1_rate():
    from gnnprivacy.attacks.link_stealing.pipeline import _auc_label_only
    from gnnprivacy.datasets.link_splits import PairSet

    probs = np.array([[0.9, 0.1], [0.6, 0.4], [0.2, 0.8], [0.3, 0.7]])
    # linked: (0,1) same top-1, (2,3) same; unlinked: (0,2) differ, (1,3) differ -> AUC 1
    pairs = PairSet(np.array([0, 2, 0, 1]), np.array([1, 3, 2, 3]), np.array([1, 1, 0, 0]))
    assert _auc_label_only(probs, pairs) == 1.0
    # one linked pair with different labels: TPR 1/2, FPR 0 -> AUC 0.75
    pairs = PairSet(np.array([0, 1, 0, 1]), np.array([1, 2, 3, 3]), np.array([1, 1, 0, 0]))
    assert _auc_label_only(probs, pairs) == 0.75


def test_output_blind_control_does_not_depend_on_the_released_posteriors():
    """The attacker's own knowledge (F, rho, A*) without the API: identical with and without a
    defence of the outputs, and a positive control -- the clean posteriors add to it."""
    from gnnprivacy.attacks.link_stealing.pipeline import LinkStealingSettings, run_experiment
    from gnnprivacy.datasets import load_dataset

    data = load_dataset("csbm", num_nodes=400)
    kw = dict(attack=6, epochs=40, patience=10, attack_epochs=20)
    none, _ = run_experiment(data, LinkStealingSettings(**kw))
    grid, _ = run_experiment(data, LinkStealingSettings(defense="grid", theta=1.0, **kw))
    assert none["auc_output_blind"] == grid["auc_output_blind"]
    assert none["auc_label_only"] == grid["auc_label_only"]          # GRID keeps every top-1
    assert 0.5 <= none["auc_output_blind"] <= none["auc"]
    zero, _ = run_experiment(data, LinkStealingSettings(attack=0, epochs=40, patience=10))
    assert "auc_output_blind" not in zero                              # no F: nothing to control


def test_low_similarity_adaptive_scores():
    """Spec §3.5 (1): 'reversed' is Attack-0's score negated (raw AUC 1 - AUC); 'disguise'
    scores |sim - delta_hat| with delta_hat from the attacker's shadow graph."""
    from gnnprivacy.attacks.link_stealing.pipeline import LinkStealingSettings, run_experiment
    from gnnprivacy.datasets import load_dataset

    data = load_dataset("csbm", num_nodes=400)
    kw = dict(attack=0, defense="grid", theta=0.8, epochs=40, patience=10)
    plain, _ = run_experiment(data, LinkStealingSettings(**kw))
    rev, _ = run_experiment(data, LinkStealingSettings(adaptive="reversed", **kw))
    assert rev["auc"] == pytest.approx(1.0 - plain["auc"])
    dis, info = run_experiment(data, LinkStealingSettings(adaptive="disguise", **kw))
    assert 0.0 <= dis["auc"] <= 1.0 and info["attack"]["score"] == "-|sim - delta_hat|"
    assert -2.0 <= dis["delta_hat"] <= 2.0
    with pytest.raises(InvalidParameterError, match="attack"):
        LinkStealingSettings(attack=6, adaptive="disguise")


def test_known_view_is_where_the_a_star_training_pairs_are_read():
    """spec §9 A14's other reading: an attacker whose A* posteriors predate the defence trains on
    a different view than it is tested on. Positive control: training on noise posteriors while
    testing on informative ones loses most of the attack."""
    view, train, test = _synthetic_view(seed=3)
    rng = np.random.default_rng(4)
    noise = NodeView(target=rng.dirichlet(np.ones(5), 300), reference=view.reference,
                     attributes=view.attributes)
    same = run_he_attack(3, view, test, known_pairs=train, epochs=30, seed=0).metrics["auc"]
    explicit = run_he_attack(3, view, test, known_pairs=train, epochs=30, seed=0,
                             known_view=view).metrics["auc"]
    assert same == explicit > 0.85
    trained_on_noise = run_he_attack(3, view, test, known_pairs=train, epochs=30, seed=0,
                                     known_view=noise).metrics["auc"]
    assert trained_on_noise < same - 0.15


def test_attacker_training_clean_changes_only_the_training_posteriors():
    from gnnprivacy.attacks.link_stealing.pipeline import LinkStealingSettings, run_experiment
    from gnnprivacy.datasets import load_dataset

    data = load_dataset("csbm", num_nodes=400)
    kw = dict(attack=3, epochs=40, patience=10, attack_epochs=20)
    # without a defence the released posteriors are the clean ones: identical runs
    a, _ = run_experiment(data, LinkStealingSettings(**kw))
    b, _ = run_experiment(data, LinkStealingSettings(attacker_training="clean", **kw))
    assert a["auc"] == b["auc"]
    # with GRID the test posteriors are defended either way; the training ones differ
    d, _ = run_experiment(data, LinkStealingSettings(defense="grid", theta=1.0, **kw))
    c, _ = run_experiment(data, LinkStealingSettings(defense="grid", theta=1.0,
                                                     attacker_training="clean", **kw))
    assert d["model_test_accuracy"] == c["model_test_accuracy"] == a["model_test_accuracy"]
    assert d["auc"] != c["auc"]
    for bad in (dict(attack=0), dict(attack=5), dict(attack=6, model="sage", ils="A2")):
        with pytest.raises(InvalidParameterError, match="attacker_training"):
            LinkStealingSettings(attacker_training="clean", **bad)


def test_a_gap_target_records_its_own_ledger():
    """With defense gap the target model is private: the record says so and carries the
    ledger of GAP's accountant (not the non-private placeholder)."""
    from gnnprivacy.attacks.link_stealing.method import run_link_stealing

    rec = run_link_stealing("csbm", save=False, attack=0, defense="gap", defense_param=4.0,
                            epochs=20, patience=5)
    assert rec.privacy["private"] is True and rec.privacy["unit"] == "node"
    assert 0 < rec.epsilon <= 4.0
    events = str(rec.privacy["ledger"])
    assert "NonPrivateDpEvent" not in events and "Gaussian" in events
    plain = run_link_stealing("csbm", save=False, attack=0, defense="none", epochs=20, patience=5)
    assert plain.privacy["private"] is False and "NonPrivateDpEvent" in str(plain.privacy["ledger"])


def test_feature_rows_are_normalised_only_when_sparse_and_nonnegative():
    """Planetoid-like rows (Cora: 18 non-zeros) are L1-normalised as in He et al.'s code; dense
    rows (Computers: 267) and signed features are not."""
    import torch

    from gnnprivacy.attacks.link_stealing.pipeline import row_normalize_features

    g = torch.Generator().manual_seed(0)
    sparse = (torch.rand(200, 1000, generator=g) < 0.018).float()      # ~18 per row
    dense = (torch.rand(200, 767, generator=g) < 0.35).float()         # ~268 per row
    assert row_normalize_features(sparse)
    assert not row_normalize_features(dense)
    assert not row_normalize_features(sparse - 0.5)
