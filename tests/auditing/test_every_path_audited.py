"""Issue 43 item 1: the code audit checks every shipped path that trains through the DP
engine, each of its checks made (none ``checked: false``) and passed on the honest code.
The table of paths is complete: a new ``make_private`` sampler, sharded sampler or private
method fails here until it is given an audit path. Broken controls: a graph drawn twice in
one batch, a graph's rows moved into another subgraph, and a node batch whose ids hide a
copied row are each flagged."""

from __future__ import annotations

import pytest
import torch

import gnnprivacy as gp
from audit_paths import (ENGINE_METHODS, KNOWN_UNCHECKED, NO_ENGINE_METHODS, PATHS, audit, failed,
                         graph_list, unchecked, user_graph_train)
from gnnprivacy.auditing.code import code_audit


def test_the_paths_cover_every_sampler_and_private_method():
    from gnnprivacy.training.private.make_private import SAMPLERS
    from gnnprivacy.training.sharded import SHARDED_SAMPLERS

    kinds = {}
    for path in PATHS:
        kind, _, name = path.partition(":")
        kinds.setdefault(kind, set()).add(name)
    assert set(SAMPLERS) <= kinds["make_private"], set(SAMPLERS) - kinds["make_private"]
    assert set(SHARDED_SAMPLERS) <= kinds["sharded"]
    private = {m.name for m in gp.methods() if m.private}
    audited = set(ENGINE_METHODS) | kinds["graph-method"]
    assert private == audited | NO_ENGINE_METHODS, (
        "classify every private method: audited through the engine, or releasing no "
        f"DP-SGD step: {private ^ (audited | NO_ENGINE_METHODS)}")


@pytest.mark.parametrize("path", PATHS)
def test_every_check_is_made_and_passes_on_every_path(path):
    result = audit(path)
    assert set(unchecked(result)) <= KNOWN_UNCHECKED.get(path, set()), unchecked(result)
    assert not result.violation and not failed(result), result.summary()


# ---------------------------------------------------------------------- broken controls
def _graph_audit():
    return code_audit(user_graph_train(), data=graph_list(), seed=0, num_canaries=64,
                      num_noise=64)


def test_a_graph_drawn_twice_in_one_batch_is_flagged(monkeypatch):
    from gnnprivacy.training.private.graph_sampler import GraphSampler

    sample = GraphSampler.sample

    def twice(self, generator):
        batch = sample(self, generator)
        if batch.num_subgraphs == 0:
            return batch
        return self.collate(torch.cat([batch.g_id, batch.g_id[:1]]))

    monkeypatch.setattr(GraphSampler, "sample", twice)
    result = _graph_audit()
    assert result.violation and {"occurrence", "sampling_rate"} <= failed(result), \
        result.summary()


def test_a_graph_whose_rows_lie_in_another_subgraph_is_flagged(monkeypatch):
    """The batch's ids are honest, but subgraph 0 carries the first row of subgraph 1 in
    place of its own: one graph's data in two subgraphs."""
    from gnnprivacy.training.private.graph_sampler import GraphSampler

    collate = GraphSampler.collate

    def copied(self, picked):
        batch = collate(self, picked)
        if batch.num_subgraphs >= 2:
            batch.x = batch.x.clone()
            batch.x[0] = batch.x[int(batch.ptr[1])]
        return batch

    monkeypatch.setattr(GraphSampler, "collate", copied)
    result = _graph_audit()
    assert result.violation and "occurrence" in failed(result), result.summary()
    occurrence = result.details["checks"][0]["occurrence"]
    assert "features are not the training data's" in occurrence["detail"]


def test_a_node_batch_whose_ids_hide_a_copied_row_is_flagged(monkeypatch):
    from gnnprivacy.training.private.samplers import NodeSubgraphs

    assemble = NodeSubgraphs._nodes_batch

    def copied(self, nodes):
        batch = assemble(self, nodes)
        if batch.num_subgraphs >= 2:
            batch.x = batch.x.clone()
            batch.x[0] = self.graph.x[int(batch.n_id[1])]
        return batch

    monkeypatch.setattr(NodeSubgraphs, "_nodes_batch", copied)
    result = audit("make_private:nodes")
    assert result.violation and "occurrence" in failed(result), result.summary()
