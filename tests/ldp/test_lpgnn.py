"""LPGNN baseline: KProp, Drop targets, forward correction (spec 004 §10.3)."""

from __future__ import annotations

import pytest
import torch

from gnnprivacy.ldp.lpgnn import LPGNN, LPGNNConfig, drop_targets, grr_transition_matrix
from gnnprivacy.ldp.propagation import sym_adjacency
from gnnprivacy.ldp.reports import collect_reports


def test_grr_transition_matrix_is_stochastic_with_keep_probability_on_diagonal():
    t = grr_transition_matrix(1.0, 4)
    p = torch.e / (torch.e + 3)
    assert torch.allclose(t.sum(1), torch.ones(4))
    assert torch.allclose(t.diag(), torch.full((4,), float(p)))


def test_drop_targets_majority_of_neighbours_and_own_label_when_isolated():
    # path 0-1-2, node 3 isolated; labelled: 0, 2, 3 (node 1 is a test node)
    ei = torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]])
    y = torch.tensor([2, -1, 2, 1])
    lab = torch.tensor([True, False, True, True])
    adj = sym_adjacency(ei, 4)
    t = drop_targets(adj, y, lab, num_classes=3, steps=2)
    assert t.tolist() == [2, -1, 2, 1]
    assert drop_targets(adj, y, lab, num_classes=3, steps=0).tolist() == [2, -1, 2, 1]


def test_lpgnn_trains_on_multibit_reports(sbm):
    accs = []
    for seed in range(2):
        view = collect_reports(sbm.x, sbm.y, edge_index=sbm.edge_index, train_mask=sbm.train_mask,
                               val_mask=sbm.val_mask, test_mask=sbm.test_mask,
                               num_classes=sbm.num_classes, eps_x=1.0, eps_y=3.0, m=6,
                               feature_mechanism="multibit",
                               generator=torch.Generator().manual_seed(seed))
        model = LPGNN(LPGNNConfig(kx=2, ky=2)).fit(view, generator=torch.Generator().manual_seed(seed))
        accs.append((model.predict()[sbm.test_mask] == sbm.y[sbm.test_mask]).float().mean().item())
        assert model.fit_.outcome.history[-1]["loss"] < model.fit_.outcome.history[0]["loss"]
    assert sum(accs) / 2 > 1 / sbm.num_classes + 0.15, accs


def test_lpgnn_rejects_grr_fs_reports(sbm):
    view = collect_reports(sbm.x, sbm.y, edge_index=sbm.edge_index, train_mask=sbm.train_mask,
                           val_mask=sbm.val_mask, test_mask=sbm.test_mask,
                           num_classes=sbm.num_classes, eps_x=1.0, eps_y=1.0, m=2,
                           generator=torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match="multi-bit"):
        LPGNN().fit(view, generator=torch.Generator())
