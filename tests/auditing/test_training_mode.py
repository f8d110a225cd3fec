"""Training-mode audits: the real trainer with an inserted canary node."""

import pytest
import torch

from gnnprivacy.auditing import audit
from gnnprivacy.auditing.training import insert_canary


def test_insert_canary_adds_one_mislabelled_training_node():
    from gnnprivacy.datasets import load_dataset

    data = load_dataset("csbm", num_nodes=200)
    g, z = insert_canary(data, degree=5, generator=torch.Generator().manual_seed(0))
    assert z == 200 and g.num_nodes == 201 and bool(g.train_mask[z])
    assert int((g.edge_index[0] == z).sum()) == 5 == int((g.edge_index[1] == z).sum())
    assert data.num_nodes == 200                      # input not mutated


def test_training_mode_runs_the_real_trainer():
    r = audit("dpmlp", "csbm", params={"steps": 10}, epsilon=1.0, mode="training", runs=3)
    assert r.mode == "training" and r.runs == 3 and r.epsilon_claimed == 1.0
    assert len(r.details["scores"]["member"]) == 3 and not r.violation


@pytest.mark.slow
def test_training_mode_positive_control_nonprivate_gcn_memorises_the_canary():
    r = audit("gcn", "csbm", mode="training", runs=8,
              params={"epochs": 200, "patience": 200, "dropout": 0.0, "weight_decay": 0.0})
    assert r.mia_auc > 0.9 and r.epsilon_lower_bound > 0.3
