"""Public user-side preprocessing: OR-grouping and the German credit binarisation (spec §3.2, §10.1)."""

from __future__ import annotations

import os

import pytest
import torch

from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.ldp.german import NUM_GERMAN_FEATURES, binarize_german
from gnnprivacy.ldp.grouping import group_features, grouped_dim


def test_or_grouping_contiguous_blocks_last_shorter():
    x = torch.tensor([[0, 0, 1, 0, 0, 0, 0],
                      [0, 0, 0, 0, 0, 0, 3],
                      [1, 1, 0, 0, 0, 0, 0]], dtype=torch.float32)
    out = group_features(x, 3)
    assert out.tolist() == [[1, 0, 0], [0, 0, 1], [1, 0, 0]]
    assert grouped_dim(7, 3) == 3 and grouped_dim(1433, 25) == 58 and grouped_dim(4714, 100) == 48
    assert torch.equal(group_features(x, 1), (x > 0).float())


def test_grouping_sparsity_matches_independent_columns():
    g = torch.Generator().manual_seed(0)
    x = (torch.rand(20_000, 70, generator=g) < 0.008).float()   # Citeseer-like density
    zero_share = (group_features(x, 70) == 0).float().mean().item()
    assert zero_share == pytest.approx(0.992 ** 70, abs=0.02)      # spec §10.1: ~0.57


def test_grouping_rejects_bad_input():
    with pytest.raises(InvalidParameterError, match="group_size"):
        group_features(torch.ones(2, 3), 0)
    with pytest.raises(InvalidParameterError, match="finite"):
        group_features(torch.tensor([[1.0, float("nan")]]), 2)
    assert group_features(torch.tensor([[-1.0, 0.5, -2.0]]), 2).tolist() == [[1.0, 0.0]]
    with pytest.raises(InvalidParameterError, match="2-D"):
        group_features(torch.ones(3), 2)


def _german_table(n=6):
    names = (["Gender", "ForeignWorker", "Single", "Age", "LoanDuration", "LoanAmount",
              "LoanRateAsPercentOfIncome", "YearsAtCurrentHome", "NumberOfOtherLoansAtBank",
              "NumberOfLiableIndividuals"] + [f"B{i}" for i in range(17)]
             + [f"PurposeOfLoan={i}" for i in range(10)])
    x = torch.zeros(n, len(names))
    col = {k: i for i, k in enumerate(names)}
    x[:, col["Age"]] = torch.tensor([18, 30, 31, 50, 51, 75.0])[:n]
    x[:, col["LoanDuration"]] = torch.tensor([4, 10, 11, 20, 30, 31.0])[:n]
    x[:, col["LoanAmount"]] = torch.tensor([250, 1000, 1001, 2500, 4000, 4001.0])[:n]
    x[:, col["LoanRateAsPercentOfIncome"]] = torch.tensor([1, 2, 3, 4, 3, 2.0])[:n]
    x[:, col["YearsAtCurrentHome"]] = torch.tensor([4, 1, 2, 3, 4, 2.0])[:n]
    x[:, col["NumberOfOtherLoansAtBank"]] = torch.tensor([1, 2, 3, 4, 1, 1.0])[:n]
    x[:, col["NumberOfLiableIndividuals"]] = torch.tensor([1, 2, 1, 2, 1, 1.0])[:n]
    x[torch.arange(n), col["PurposeOfLoan=0"] + torch.arange(n) % 10] = 1.0
    return x, names


def test_german_fixed_bins_and_thresholds():
    x, names = _german_table()
    out, out_names = binarize_german(x, names)
    assert out.shape == (6, NUM_GERMAN_FEATURES) and len(out_names) == 46
    assert set(out.unique().tolist()) <= {0.0, 1.0}
    col = {k: i for i, k in enumerate(out_names)}
    age = out[:, [col["Age<=30"], col["Age(30,50]"], col["Age>50"]]].argmax(1)
    assert age.tolist() == [0, 0, 1, 1, 2, 2]           # right-closed bins
    dur = out[:, [col[f"LoanDuration{s}"] for s in ("<=10", "(10,20]", "(20,30]", ">30")]].argmax(1)
    assert dur.tolist() == [0, 0, 1, 1, 2, 3]
    amount = [col[f"LoanAmount{s}"] for s in ("<=1000", "(1000,2000]", "(2000,3000]",
                                              "(3000,4000]", ">4000")]
    assert out[:, amount].argmax(1).tolist() == [0, 0, 1, 2, 3, 4]
    assert out[:, col["LoanRateAsPercentOfIncome_geq_3"]].tolist() == [0, 0, 1, 1, 1, 0]
    assert out[:, col["YearsAtCurrentHome_geq_3"]].tolist() == [1, 0, 0, 1, 1, 0]
    assert out[:, col["NumberOfOtherLoansAtBank_gt_1"]].tolist() == [0, 1, 1, 1, 0, 0]
    assert out[:, col["NumberOfLiableIndividuals_minus_1"]].tolist() == [0, 1, 0, 1, 0, 0]
    assert (out[:, [col[n] for n in out_names if n.startswith("Age")]].sum(1) == 1).all()


def test_german_rejects_wrong_columns_and_non_binary_attributes():
    x, names = _german_table()
    with pytest.raises(InvalidParameterError, match="feature_names"):
        binarize_german(x[:, 1:], names[1:])
    x[0, names.index("Single")] = 2.0
    with pytest.raises(InvalidParameterError, match="0/1"):
        binarize_german(x, names)


@pytest.mark.dataset
def test_german_dataset_gives_46_binary_features(shared_datasets, tmp_path):
    from gnnprivacy.datasets import load_dataset

    data = load_dataset("german", root=shared_datasets, cache_dir=tmp_path)
    out, _ = binarize_german(data.x, data.feature_names)
    assert out.shape == (1000, 46)
    assert (out == 0).float().mean().item() == pytest.approx(0.742, abs=0.01)  # paper: 74.2%


@pytest.fixture
def shared_datasets():
    root = os.environ.get("GNNPRIVACY_SHARED_DATASETS",
                          os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared",
                                       "datasets"))
    if not os.path.isdir(os.path.join(root, "German")):
        pytest.skip(f"shared datasets not found at {root}")
    return root
