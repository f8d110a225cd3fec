"""The inductive training graph contains no test node and no edge touching one."""

from __future__ import annotations

import pytest
import torch

from gnnprivacy.datasets import inductive_train_graph, load_dataset


def _check_no_leak(data, sub):
    test_nodes = set(data.test_mask.nonzero().view(-1).tolist())
    kept = sub.orig_id.tolist()
    assert not test_nodes & set(kept)
    assert not sub.test_mask.any()
    assert sub.num_nodes == int((data.train_mask | data.val_mask).sum())
    # map the subgraph's edges back: none may touch a test node, and all induced edges survive
    back = sub.orig_id[sub.edge_index]
    assert not torch.isin(back, torch.tensor(sorted(test_nodes))).any()
    keep = data.train_mask | data.val_mask
    induced = keep[data.edge_index[0]] & keep[data.edge_index[1]]
    assert back.size(1) == int(induced.sum())
    assert torch.equal(sub.x, data.x[sub.orig_id]) and torch.equal(sub.y, data.y[sub.orig_id])
    assert torch.equal(sub.train_mask, data.train_mask[sub.orig_id])


def test_inductive_graph_on_csbm():
    data = load_dataset("csbm", split="inductive", seed=3)
    assert data.split.inductive
    sub = inductive_train_graph(data)
    _check_no_leak(data, sub)
    assert sub.parent_num_nodes == data.num_nodes and sub.name == "csbm"
    assert sub.split is data.split and sub.num_classes == data.num_classes
    # same partition as the transductive random split of the same seed
    assert torch.equal(load_dataset("csbm", split="random", seed=3).test_mask, data.test_mask)


def test_positive_control_leaky_graph_is_caught():
    data = load_dataset("csbm", split="inductive", seed=3)
    leaky = data.subgraph(torch.ones(data.num_nodes, dtype=torch.bool))  # forgets to drop test nodes
    leaky.orig_id = torch.arange(data.num_nodes)
    with pytest.raises(AssertionError):
        _check_no_leak(data, leaky)


def test_input_is_not_modified_and_masks_required():
    data = load_dataset("csbm", split="inductive", num_nodes=200)
    before = data.edge_index.clone()
    inductive_train_graph(data)
    assert torch.equal(data.edge_index, before) and data.num_nodes == 200
    del data.test_mask
    with pytest.raises(ValueError, match="test_mask"):
        inductive_train_graph(data)


@pytest.mark.dataset
def test_inductive_graph_on_cora(shared_root, session_cache, no_data_env):
    data = load_dataset("cora", root=shared_root, cache_dir=session_cache, split="inductive",
                        train_frac=0.8, val_frac=0.0, test_frac=0.2)
    _check_no_leak(data, inductive_train_graph(data))
