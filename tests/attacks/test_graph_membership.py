"""Graph membership inference (a graph in or out of training): LiRA over K models trained on
balanced halves of a pool; a memorising non-private model is caught (control), a model at
epsilon 1 is not."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch_geometric.data import Data

from gnnprivacy.attacks.graph_membership import graph_membership
from gnnprivacy.datasets.tu_graphs import GraphSet, stratified_graph_split


def _random_label_graphs(n=48, seed=0):
    """Labels independent of the graphs: only memorisation predicts them."""
    gen = torch.Generator().manual_seed(seed)
    graphs = []
    for i in range(n):
        k = int(torch.randint(3, 7, (1,), generator=gen))
        ring = torch.arange(k)
        ei = torch.stack([torch.cat([ring, (ring + 1) % k]), torch.cat([(ring + 1) % k, ring])])
        graphs.append(Data(x=torch.randn(k, 6, generator=gen), edge_index=ei,
                           y=torch.tensor([i % 2])))
    labels = np.array([i % 2 for i in range(n)])
    split = stratified_graph_split(labels, seed=0, dataset="toy", fractions=(0.75, 0.0, 0.25))
    return GraphSet("toy", graphs, split, 2, 6)


@pytest.mark.slow
def test_lira_catches_memorisation_and_not_a_private_model():
    gset = _random_label_graphs()
    kw = dict(num_models=6, epochs=60, batch_size=12, hidden=32, lr=0.02)
    plain = graph_membership(gset, epsilon=None, **kw)
    print("non-private", plain["auc"], plain["auc_ci95"])
    assert plain["auc"] > 0.75 and plain["auc_ci95"]["low"] > 0.6       # the control
    private = graph_membership(gset, epsilon=1.0, **kw)
    assert private["epsilon"] <= 1.0 + 1e-9 and private["pool"] == 36
    low, high = private["auc_ci95"]["low"], private["auc_ci95"]["high"]
    print("epsilon 1", private["auc"], private["auc_ci95"])
    assert low <= 0.5 <= high + 0.02 and abs(private["auc"] - 0.5) < 0.12
