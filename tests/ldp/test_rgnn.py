"""RGNN end to end (Algorithm 3), the naive baseline and hyperparameter selection."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.ldp.reports import collect_reports
from gnnprivacy.ldp.rgnn import (RGNN, RGNNConfig, ReconstructionCache, grid_configs, select_rgnn,
                                 train_rgnn)


def _view(data, seed=0, eps_x=1.0, eps_y=1.0, m=6, mechanism="grr-fs"):
    return collect_reports(data.x, data.y, edge_index=data.edge_index, train_mask=data.train_mask,
                           val_mask=data.val_mask, test_mask=data.test_mask,
                           num_classes=data.num_classes, eps_x=eps_x, eps_y=eps_y, m=m,
                           feature_mechanism=mechanism, generator=torch.Generator().manual_seed(seed))


def _acc(data, logits):
    m = data.test_mask
    return (logits[m].argmax(1) == data.y[m]).float().mean().item()


def test_rgnn_beats_the_naive_baseline_on_a_homophilous_graph(sbm):
    rgnn, naive = [], []
    for seed in range(3):
        view = _view(sbm, seed=seed)
        g = torch.Generator().manual_seed(seed)
        rgnn.append(_acc(sbm, RGNN(RGNNConfig(kx=4, ky=4, num_clusters=8, dropout=0.5))
                         .fit(view, generator=g).logits_))
        base = RGNNConfig(kx=0, ky=0, alpha=0.0, dropout=0.5)
        naive.append(_acc(sbm, RGNN(base).fit(view, generator=g).logits_))
    assert sum(rgnn) / 3 > sum(naive) / 3 + 0.15, (rgnn, naive)
    assert sum(rgnn) / 3 > 0.6


def test_fit_is_deterministic_for_a_generator_and_leaves_global_rng_alone(sbm):
    view = _view(sbm)
    cfg = RGNNConfig(kx=2, ky=2, num_clusters=4, dropout=0.5, epochs=20)
    state = torch.random.get_rng_state()
    a = RGNN(cfg).fit(view, generator=torch.Generator().manual_seed(3), partition_seed=1)
    assert torch.equal(state, torch.random.get_rng_state())
    b = RGNN(cfg).fit(view, generator=torch.Generator().manual_seed(3), partition_seed=1)
    assert torch.equal(a.logits_, b.logits_) and a.fit_.outcome.best_epoch == b.fit_.outcome.best_epoch
    assert a.predict().shape == (sbm.num_nodes,) and "RGNN(config=" in repr(a)


@pytest.mark.parametrize("backbone", ["gcn", "gat"])
def test_other_backbones_train(sbm, backbone):
    view = _view(sbm)
    fit = train_rgnn(ReconstructionCache(view), RGNNConfig(backbone=backbone, kx=2, ky=2,
                                                           num_clusters=4, epochs=15),
                     generator=torch.Generator().manual_seed(0))
    assert fit.logits.shape == (sbm.num_nodes, sbm.num_classes)
    assert fit.outcome.history[-1]["loss"] < fit.outcome.history[0]["loss"]
    assert fit.num_bags == 4


def test_selection_keeps_incumbent_unless_clearly_better(sbm):
    view = _view(sbm)
    cache = ReconstructionCache(view)
    configs = grid_configs(RGNNConfig(kx=4, ky=4, num_clusters=4, epochs=20), {"kx": (0, 4)})
    assert [c.kx for c in configs] == [4, 0]              # incumbent first, no duplicate
    g = torch.Generator().manual_seed(0)
    fit, table = select_rgnn(cache, configs, generator=g, z=1e9)
    assert fit.config == configs[0] and table[0]["chosen"] and not table[1]["chosen"]
    assert {"kx", "ky", "score", "advantage_se", "best_epoch"} <= set(table[0])
    # a bad incumbent (no reconstruction, no LLP) is replaced by a clearly better config
    bad = RGNNConfig(kx=0, ky=0, alpha=0.0, epochs=60, dropout=0.5)
    fit, table = select_rgnn(cache, [bad, dataclasses.replace(bad, kx=4, ky=4)],
                             generator=g, z=2.0)
    assert fit.config.kx == 4 and table[1]["chosen"], table


def test_selection_runs_never_see_validation_reports(sbm):
    view = _view(sbm)
    flipped = dataclasses.replace(view, y_reports=torch.where(
        view.val_mask, (view.y_reports + 1) % sbm.num_classes, view.y_reports))
    a = ReconstructionCache(view, hide_val_labels=True).labels(4)
    b = ReconstructionCache(flipped, hide_val_labels=True).labels(4)
    assert torch.equal(a, b)
    assert not torch.equal(ReconstructionCache(view).labels(4), ReconstructionCache(flipped).labels(4))


def test_config_and_view_validation(sbm):
    with pytest.raises(InvalidParameterError, match="backbone"):
        RGNNConfig(backbone="gin")
    with pytest.raises(InvalidParameterError, match="kx"):
        RGNNConfig(kx=-1)
    with pytest.raises(InvalidParameterError, match="llp_source"):
        RGNNConfig(llp_source="oracle")
    with pytest.raises(ValueError, match="GRR-FS"):
        ReconstructionCache(_view(sbm, mechanism="multibit"))
