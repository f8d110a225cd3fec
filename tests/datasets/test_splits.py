"""Splits: disjoint, sized by the fractions, reproducible from (seed, dataset), saved and reloaded."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gnnprivacy.datasets import Split, load_dataset, random_split, resolve_fractions, split_from_masks
from gnnprivacy.errors import CorruptDatasetError, InvalidParameterError, UnknownNameError


def _assert_partition(split: Split):
    idx = [split.train_idx, split.val_idx, split.test_idx]
    for arr in idx:
        assert arr.dtype == np.int64 and np.all(np.diff(arr) > 0)  # sorted, unique
    allidx = np.concatenate(idx)
    assert np.unique(allidx).size == allidx.size, "train/val/test overlap"
    assert allidx.size == 0 or (allidx.min() >= 0 and allidx.max() < split.num_nodes)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(0, 400), seed=st.integers(0, 2**32),
       tr=st.integers(0, 20), va=st.integers(0, 20), te=st.integers(0, 20))
def test_random_split_sizes_and_disjointness(n, seed, tr, va, te):
    total = max(20, tr + va + te)  # fractions on a grid of 1/total, summing to <= 1
    fr = (tr / total, va / total, te / total)
    split = random_split(n, seed=seed, dataset="x", train_frac=fr[0], val_frac=fr[1], test_frac=fr[2])
    _assert_partition(split)
    n_tr, n_va = round(fr[0] * n), round(fr[1] * n)
    n_va = min(n_va, n - n_tr)
    n_te = min(round(fr[2] * n), n - n_tr - n_va)
    assert split.sizes == {"train": n_tr, "val": n_va, "test": n_te}


def test_defaults_and_eighty_twenty():
    assert resolve_fractions() == (0.5, 0.25, 0.25)
    assert resolve_fractions(0.8, None, 0.2) == pytest.approx((0.8, 0.0, 0.2))
    assert resolve_fractions(0.6) == pytest.approx((0.6, 0.2, 0.2))
    assert resolve_fractions(None, 0.1, 0.1) == pytest.approx((0.8, 0.1, 0.1))
    split = random_split(1000, seed=1, train_frac=0.8, val_frac=0.0, test_frac=0.2)
    assert split.sizes == {"train": 800, "val": 0, "test": 200}
    assert split.fractions == pytest.approx((0.8, 0.0, 0.2))


@pytest.mark.parametrize("fractions", [(0.7, 0.3, 0.2), (1.2, None, None), (-0.1, 0.5, 0.5),
                                       (0.5, float("nan"), 0.1), (0.5, True, 0.1)])
def test_bad_fractions_raise_naming_the_fractions(fractions):
    with pytest.raises(InvalidParameterError) as info:
        resolve_fractions(*fractions)
    message = str(info.value)
    assert "train_frac" in message and "test_frac" in message and "sum <= 1" in message
    assert repr(fractions[0]) in message


def test_load_dataset_rejects_fractions_summing_above_one():
    with pytest.raises(InvalidParameterError, match="train_frac, val_frac, test_frac"):
        load_dataset("csbm", train_frac=0.7, val_frac=0.3, test_frac=0.2)


def test_reproducible_from_seed_and_name():
    a = random_split(500, seed=3, dataset="cora")
    assert a == random_split(500, seed=3, dataset="cora")
    assert np.array_equal(a.train_idx, random_split(500, seed=3, dataset="cora").train_idx)
    assert a.digest != random_split(500, seed=4, dataset="cora").digest
    assert a.digest != random_split(500, seed=3, dataset="citeseer").digest
    inductive = random_split(500, seed=3, dataset="cora", kind="inductive")
    assert inductive.inductive and inductive.digest == a.digest  # same partition, other flag


def test_save_load_roundtrip_and_digest_check(tmp_path):
    split = random_split(300, seed=7, dataset="csbm", train_frac=0.6, val_frac=0.1)
    path = tmp_path / "split.npz"
    split.save(path)
    again = Split.load(path)
    assert again == split and again.to_dict() == split.to_dict()
    d = split.to_dict()
    json.dumps(d)
    assert d["sizes"] == {"train": 180, "val": 30, "test": 90} and len(d["digest"]) == 64
    with np.load(path) as f:  # tamper with the indices: the stored digest must catch it
        arrays = dict(f)
    arrays["train_idx"] = arrays["train_idx"][:-1]
    np.savez(path, **arrays)
    with pytest.raises(CorruptDatasetError, match="digest"):
        Split.load(path)


def test_split_is_frozen_and_validates():
    split = random_split(10, seed=0)
    with pytest.raises(Exception):
        split.seed = 1
    with pytest.raises(ValueError):
        split.train_idx[0] = 5
    with pytest.raises(InvalidParameterError, match="disjoint"):
        Split(kind="random", seed=0, train_idx=[0, 1], val_idx=[1], test_idx=[], num_nodes=3)
    with pytest.raises(UnknownNameError):
        Split(kind="other", seed=0, train_idx=[], val_idx=[], test_idx=[], num_nodes=3)


def test_split_from_masks():
    masks = np.array([[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 1]], dtype=bool)
    split = split_from_masks(*masks, dataset="toy")
    assert split.kind == "public" and split.seed is None
    assert split.sizes == {"train": 1, "val": 1, "test": 2}
    assert all(np.array_equal(a, b) for a, b in zip(split.masks(), masks))


def test_load_dataset_split_options():
    data = load_dataset("csbm", seed=5, num_nodes=200)
    assert data.split.kind == "random" and data.split.seed == 5
    assert int(data.train_mask.sum()) == 100 and not (data.train_mask & data.test_mask).any()
    assert data.split == load_dataset("csbm", seed=5, num_nodes=200).split
    assert data.split != load_dataset("csbm", seed=6, num_nodes=200).split
    with pytest.raises(InvalidParameterError, match="no public split"):
        load_dataset("csbm", split="public")
    with pytest.raises(UnknownNameError, match="inductive"):
        load_dataset("csbm", split="transductive")


@pytest.mark.dataset
def test_cora_public_split_sizes(shared_root, session_cache, no_data_env):
    data = load_dataset("cora", root=shared_root, cache_dir=session_cache)
    assert data.split.kind == "public" and data.split.sizes == {"train": 140, "val": 500, "test": 1000}
    assert int(data.train_mask.sum()) == 140 and not (data.val_mask & data.test_mask).any()
    rand = load_dataset("cora", root=shared_root, cache_dir=session_cache, split="random", seed=1)
    assert rand.split.sizes == {"train": 1354, "val": 677, "test": 677}
    _assert_partition(rand.split)
    assert rand.split == load_dataset("cora", root=shared_root, cache_dir=session_cache,
                                      split="random", seed=1).split
    # fractions without split= mean a random split, even for cora
    eighty = load_dataset("cora", root=shared_root, cache_dir=session_cache, train_frac=0.8, test_frac=0.2)
    assert eighty.split.kind == "random" and eighty.split.sizes["val"] == 0
    with pytest.raises(InvalidParameterError, match="split='public'"):
        load_dataset("cora", root=shared_root, cache_dir=session_cache, split="public", train_frac=0.5)
