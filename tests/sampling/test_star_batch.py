"""StarBatch layout helpers against a plain-Python reference."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.sampling import StarBatch, empty_star_batch


def _batch(stars: list[tuple[int, list[int]]]) -> StarBatch:
    centers = torch.tensor([c for c, _ in stars], dtype=torch.long)
    nodes = torch.tensor([j for _, p in stars for j in p], dtype=torch.long)
    sub = torch.tensor([b for b, (_, p) in enumerate(stars) for _ in p], dtype=torch.long)
    return StarBatch(centers, nodes, sub, len(stars))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 99), st.lists(st.integers(0, 99), max_size=6)), max_size=8),
       st.integers(0, 3))
def test_padded_layout_matches_reference(stars, extra):
    b = _batch(stars)
    width = 1 + max([len(p) for _, p in stars], default=0)
    nodes, mask = b.to_padded(width + extra)
    expected = [[c] + p + [-1] * (width + extra - 1 - len(p)) for c, p in stars]
    assert nodes.tolist() == (expected if stars else [])
    assert nodes.shape == (len(stars), width + extra)
    assert torch.equal(mask, nodes >= 0)
    assert b.degrees().tolist() == [len(p) for _, p in stars]
    assert b.rowptr()[-1] == b.num_peripherals
    assert b.star_edge_index().tolist() == [[j for _, p in stars for j in p],
                                            [c for c, p in stars for _ in p]]


def test_padding_never_truncates_and_repr_is_informative():
    b = _batch([(5, [1, 2, 3]), (7, [])])
    assert b.to_padded()[0].tolist() == [[5, 1, 2, 3], [7, -1, -1, -1]]
    with pytest.raises(InvalidParameterError, match="'max_len'.*no truncation"):
        b.to_padded(3)
    assert repr(b) == "StarBatch(num_subgraphs=2, num_peripherals=3)"
    with pytest.raises(InvalidParameterError, match="'centers'"):
        StarBatch(torch.tensor([1, 2]), torch.zeros(0, dtype=torch.long), torch.zeros(0, dtype=torch.long), 3)


def test_empty_batch():
    e = empty_star_batch()
    assert e.num_subgraphs == 0 and e.num_peripherals == 0
    nodes, mask = e.to_padded()
    assert nodes.shape == (0, 1) and mask.shape == (0, 1)
    assert e.to_padded(4)[0].shape == (0, 4)
