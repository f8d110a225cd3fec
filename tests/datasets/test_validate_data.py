"""``validate_data``: a property test against an independent oracle, plus the runner's use of it.

For random small graphs (random features with NaN/inf sprinkled in, random labels, random edges,
random masks) ``validate_data`` must accept exactly the graphs the oracle accepts, and refuse the
others with an ``InvalidParameterError`` (never another exception).
"""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch_geometric.data import Data

from gnnprivacy.datasets import validate_data
from gnnprivacy.errors import InvalidParameterError


@st.composite
def graphs(draw):
    n = draw(st.integers(1, 8))
    f = draw(st.integers(1, 3))
    specials = st.sampled_from([0.0, 1.0, -2.5, float("nan"), float("inf"), -float("inf")])
    x = np.array(draw(st.lists(st.one_of(st.floats(-5, 5), specials), min_size=n * f, max_size=n * f)),
                 dtype=np.float32).reshape(n, f)
    y = np.array(draw(st.lists(st.integers(-1 if draw(st.booleans()) else 0, 3), min_size=n, max_size=n)))
    e = draw(st.integers(0, 6))
    hi = n + (1 if draw(st.integers(0, 4)) == 0 else 0)  # sometimes an id out of range
    ei = np.array(draw(st.lists(st.integers(0, hi - 1), min_size=2 * e, max_size=2 * e)), dtype=np.int64).reshape(2, e)
    masks = [np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool) for _ in range(3)]
    return x, y, ei, masks


def oracle(x, y, ei, masks) -> bool:
    n = x.shape[0]
    tr, va, te = masks
    if not np.isfinite(x).all() or (y < 0).any():
        return False
    if ei.size and (ei.min() < 0 or ei.max() >= n):
        return False
    if (tr & va).any() or (tr & te).any() or (va & te).any():
        return False
    if not tr.any() or not te.any():
        return False
    return len(set(y[tr].tolist())) >= 2


@settings(max_examples=150, deadline=None)
@given(graphs())
def test_validate_data_agrees_with_the_oracle(g):
    x, y, ei, (tr, va, te) = g
    data = Data(x=torch.from_numpy(x), y=torch.from_numpy(y), edge_index=torch.from_numpy(ei),
                train_mask=torch.from_numpy(tr), val_mask=torch.from_numpy(va), test_mask=torch.from_numpy(te))
    try:
        validate_data(data)
        accepted = True
    except InvalidParameterError:
        accepted = False
    assert accepted == oracle(x, y, ei, (tr, va, te))


def test_nan_features_are_refused_by_the_runner_with_their_count(monkeypatch, tmp_path):
    """Every dataset the runner loads goes through validate_data (here: a NaN-poisoned CSBM)."""
    from gnnprivacy.method import runner

    original = runner.load_run_data

    def poisoned(config):
        data = original(config)
        data.x[:3, 0] = float("nan")
        data.x[5, 1] = float("inf")
        return data

    monkeypatch.setattr(runner, "load_run_data", poisoned)
    with pytest.raises(InvalidParameterError, match=r"3 NaN and 1 infinite entries in 4 of 80 nodes"):
        runner.run({"method": "dpmlp", "dataset": "csbm", "dataset_args": "num_nodes=80,num_features=4",
                    "runs_dir": str(tmp_path)})
    assert list(tmp_path.iterdir()) == []  # nothing trained, nothing written
