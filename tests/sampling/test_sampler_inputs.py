"""Boundary validation of the samplers: one message shape (parameter, expected, received)."""

from __future__ import annotations

import math

import pytest
import torch

from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.sampling import (
    CounterRandom,
    HeterPoissonSampler,
    NodeBatchSampler,
    inference_stars,
    poisson_node_batch,
    sample_degree_bounded_subgraphs,
)
from gnnprivacy.sampling._graph import clean_graph

EI = torch.tensor([[0, 1, 2, 2], [1, 2, 0, 2]])
ALL = torch.ones(3, dtype=torch.bool)


def _hp(**overrides):
    kw = dict(candidates=ALL, eligible=ALL, q_b=0.5, M=1)
    kw.update(overrides)
    ei = kw.pop("edge_index", EI)
    n = kw.pop("num_nodes", 3)
    return HeterPoissonSampler(ei, n, **kw)


@pytest.mark.parametrize("q_b", [0, 0.0, -0.1, 1.0001, 2, math.nan, math.inf, "0.5", None, True])
def test_q_b_outside_unit_interval_is_rejected(q_b):
    with pytest.raises(InvalidParameterError, match="'q_b'"):
        _hp(q_b=q_b)


@pytest.mark.parametrize("M", [0, 0.5, 0.999, -1, math.nan, math.inf, "2"])
def test_M_below_one_or_not_finite_is_rejected(M):
    with pytest.raises(InvalidParameterError, match="'M'"):
        _hp(M=M)


def test_q_b_one_and_M_one_are_accepted():
    s = _hp(q_b=1.0, M=1.0)
    assert s.sample(torch.Generator().manual_seed(0)).num_subgraphs == 3


@pytest.mark.parametrize("cand", [torch.zeros(3, dtype=torch.bool), torch.tensor([], dtype=torch.long)])
def test_empty_candidate_set_is_rejected(cand):
    with pytest.raises(InvalidParameterError, match="'candidates'.*non-empty"):
        _hp(candidates=cand)


@pytest.mark.parametrize("bad, match", [
    (torch.tensor([[0, 3], [1, 0]]), r"\[0, num_nodes=3\)"),
    (torch.tensor([[0, -1], [1, 0]]), "ids in"),
    (torch.tensor([0, 1, 2]), r"shape \(2, E\)"),
    (torch.tensor([[0.0, 1.0], [1.0, 0.0]]), "integer"),
    ([[0, 1], [1, 0]], "torch.Tensor"),
])
def test_bad_edge_index_is_rejected(bad, match):
    with pytest.raises(InvalidParameterError, match=match):
        _hp(edge_index=bad)
    with pytest.raises(InvalidParameterError, match=match):
        inference_stars(bad, 3, query_nodes=torch.tensor([0]), allowed=ALL, generator=torch.Generator())
    with pytest.raises(InvalidParameterError, match=match):
        sample_degree_bounded_subgraphs(bad, 3, train_nodes=torch.tensor([0]), max_degree=1,
                                        generator=torch.Generator())


@pytest.mark.parametrize("nodes", [torch.ones(4, dtype=torch.bool), torch.tensor([0, 5]),
                                   torch.tensor([0.5]), [0, 1]])
def test_bad_node_sets_are_rejected(nodes):
    with pytest.raises(InvalidParameterError, match="'candidates'"):
        _hp(candidates=nodes)
    with pytest.raises(InvalidParameterError, match="'eligible'"):
        _hp(eligible=nodes)


def test_bad_num_nodes_and_generator_are_rejected():
    with pytest.raises(InvalidParameterError, match="'num_nodes'"):
        _hp(num_nodes=0)
    with pytest.raises(InvalidParameterError, match="'generator'"):
        _hp().sample(42)
    with pytest.raises(InvalidParameterError, match="'seed'"):
        CounterRandom(seed=-1)


def test_self_loops_and_duplicates_are_removed_before_degrees():
    ei = torch.tensor([[0, 0, 0, 1, 1], [0, 1, 1, 1, 2]])   # loops 0->0, 1->1; 0->1 twice
    g = clean_graph(ei, 3)
    assert (g.num_self_loops, g.num_duplicates) == (2, 1)
    assert g.edge_index().tolist() == [[0, 1], [1, 2]]
    assert g.out_degree().tolist() == [1, 1, 0] and g.in_degree().tolist() == [0, 1, 1]
    s = HeterPoissonSampler(ei, 3, candidates=torch.tensor([1]), eligible=ALL, q_b=1.0, M=1)
    assert s.out_degree.tolist() == [1, 1, 0]
    b = s.sample(torch.Generator().manual_seed(0))
    assert b.periph_nodes.tolist() == [0]                   # never 1 itself, 0 only once


def test_inference_and_minibatch_parameters_are_validated():
    g = torch.Generator()
    with pytest.raises(InvalidParameterError, match="'fanout'"):
        inference_stars(EI, 3, query_nodes=torch.tensor([0]), allowed=ALL, fanout=-1, generator=g)
    with pytest.raises(InvalidParameterError, match="'query_nodes'.*repeats"):
        inference_stars(EI, 3, query_nodes=torch.tensor([0, 0]), allowed=ALL, generator=g)
    with pytest.raises(InvalidParameterError, match="'batch_size'"):
        NodeBatchSampler(10, batch_size=11)
    with pytest.raises(InvalidParameterError, match="'batch_size'"):
        NodeBatchSampler(10, batch_size=0)
    with pytest.raises(InvalidParameterError, match="sampling"):
        NodeBatchSampler(10, batch_size=5, sampling="with_replacement")
    for rate in (0, 1.5, -0.2):
        with pytest.raises(InvalidParameterError, match="'rate'"):
            poisson_node_batch(torch.arange(5), rate=rate, generator=g)
    with pytest.raises(InvalidParameterError, match="'max_degree'"):
        sample_degree_bounded_subgraphs(EI, 3, train_nodes=torch.tensor([0]), max_degree=-1, generator=g)
    with pytest.raises(InvalidParameterError, match="'train_nodes'.*non-empty"):
        sample_degree_bounded_subgraphs(EI, 3, train_nodes=torch.zeros(3, dtype=torch.bool),
                                        max_degree=1, generator=g)
