"""Errors at the boundary: unknown names, missing / partial / corrupt raw files, bad roots.

Also: the cache is never left half-written, and a changed raw file invalidates its entry.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

import pytest

from gnnprivacy.datasets import list_datasets, load_dataset
from gnnprivacy.datasets.paths import resolve_root, root_cache_dir
from gnnprivacy.errors import (CorruptDatasetError, DatasetNotFoundError, InvalidParameterError,
                               UnknownNameError)

CORA_FILES = [f"ind.cora.{s}" for s in ("x", "tx", "allx", "y", "ty", "ally", "graph", "test.index")]


def _entries(cache: Path) -> list[str]:
    """Every path under the cache, relative (to spot leftovers of failed builds)."""
    return sorted(str(p.relative_to(cache)) for p in cache.rglob("*"))


def _copy(shared_root: Path, root: Path, rel: str) -> Path:
    dst = root / rel
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(shared_root / rel, dst)
    return dst


def test_unknown_dataset_lists_choices():
    with pytest.raises(UnknownNameError) as info:
        load_dataset("coraa")
    assert "coraa" in str(info.value)
    for name in ("cora", "twitch-de", "csbm", "ogbn-arxiv"):
        assert repr(name) in str(info.value)
    assert info.value.choices == list_datasets()


def test_unknown_dataset_keyword_is_named():
    with pytest.raises(UnknownNameError, match="num_nodez"):
        load_dataset("csbm", num_nodez=10)


def test_missing_raw_files_name_files_and_root(tmp_path, no_data_env):
    root = tmp_path / "empty-root"
    root.mkdir()
    cache = tmp_path / "cache"
    with pytest.raises(DatasetNotFoundError) as info:
        load_dataset("cora", root=root, cache_dir=cache, download=False)
    message = str(info.value)
    for name in CORA_FILES:
        assert str(root / "Cora" / "raw" / name) in message
    assert "--data-root" in message and "GNNPRIVACY_DATA" in message
    assert not cache.exists(), "download=False with missing files must not touch the cache"


def test_failed_download_becomes_not_found(tmp_path, monkeypatch, no_data_env):
    from torch_geometric.datasets import Planetoid

    def no_network(self):
        raise OSError("network unreachable (simulated)")

    monkeypatch.setattr(Planetoid, "download", no_network)
    root, cache = tmp_path / "root", tmp_path / "cache"
    root.mkdir()
    with pytest.raises(DatasetNotFoundError, match="Download failed.*simulated") as info:
        load_dataset("citeseer", root=root, cache_dir=cache, download=True)
    assert str(root / "CiteSeer" / "raw" / "ind.citeseer.allx") in str(info.value)
    assert [e for e in _entries(cache) if "CiteSeer" in e or ".tmp-" in e] == []


@pytest.mark.dataset
def test_partial_raw_files_are_not_completed(shared_root, tmp_path, no_data_env):
    root, cache = tmp_path / "root", tmp_path / "cache"
    for name in CORA_FILES[1:]:  # everything except ind.cora.x
        _copy(shared_root, root, f"Cora/raw/{name}")
    with pytest.raises(DatasetNotFoundError, match="nothing was downloaded") as info:
        load_dataset("cora", root=root, cache_dir=cache)
    missing_part = str(info.value).split("Data root")[0]
    assert str(root / "Cora" / "raw" / "ind.cora.x") in missing_part
    assert "ind.cora.tx" not in missing_part


@pytest.mark.dataset
def test_corrupt_npz_names_the_file_and_leaves_no_cache(shared_root, tmp_path, no_data_env):
    root, cache = tmp_path / "root", tmp_path / "cache"
    path = _copy(shared_root, root, "Twitch/PT/raw/PT.npz")
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])  # truncated
    with pytest.raises(CorruptDatasetError) as info:
        load_dataset("twitch-pt", root=root, cache_dir=cache, download=False)
    assert str(path) in str(info.value)
    assert [e for e in _entries(cache) if "Twitch" in e or ".tmp-" in e] == []


@pytest.mark.dataset
def test_garbage_german_csv_names_the_file(shared_root, tmp_path, no_data_env):
    root, cache = tmp_path / "root", tmp_path / "cache"
    _copy(shared_root, root, "German/raw/german_edges.txt")
    bad = root / "German" / "raw" / "german.csv"
    bad.write_text("GoodCustomer,Gender\n1,Male,extra\nnot,a,table\n")
    with pytest.raises(CorruptDatasetError, match="german.csv"):
        load_dataset("german", root=root, cache_dir=cache, download=False)
    assert [e for e in _entries(cache) if "German" in e or ".tmp-" in e] == []


@pytest.mark.dataset
def test_changed_raw_file_invalidates_the_cache_entry(shared_root, tmp_path, no_data_env):
    root, cache = tmp_path / "root", tmp_path / "cache"
    path = _copy(shared_root, root, "Twitch/PT/raw/PT.npz")
    good = path.read_bytes()
    assert load_dataset("twitch-pt", root=root, cache_dir=cache).num_nodes == 1912
    assert load_dataset("twitch-pt", root=root, cache_dir=cache).num_nodes == 1912  # from cache
    path.write_bytes(b"garbage")
    with pytest.raises(CorruptDatasetError, match="PT.npz"):
        load_dataset("twitch-pt", root=root, cache_dir=cache)
    path.write_bytes(good)
    assert load_dataset("twitch-pt", root=root, cache_dir=cache).num_nodes == 1912


@pytest.mark.dataset
def test_two_roots_never_share_a_cache_entry(shared_root, tmp_path, no_data_env):
    other, cache = tmp_path / "other-root", tmp_path / "cache"
    _copy(shared_root, other, "Twitch/PT/raw/PT.npz")
    load_dataset("twitch-pt", root=shared_root, cache_dir=cache)
    load_dataset("twitch-pt", root=other, cache_dir=cache)
    a = root_cache_dir(cache.resolve(), shared_root.resolve()) / "Twitch" / "PT"
    b = root_cache_dir(cache.resolve(), other.resolve()) / "Twitch" / "PT"
    assert a != b and a.is_dir() and b.is_dir()
    assert os.readlink(a / "raw") == str(shared_root.resolve() / "Twitch" / "PT" / "raw")
    assert os.readlink(b / "raw") == str(other.resolve() / "Twitch" / "PT" / "raw")


def test_nonexistent_root_is_an_invalid_parameter(tmp_path, no_data_env):
    with pytest.raises(InvalidParameterError) as info:
        load_dataset("cora", root=tmp_path / "does-not-exist")
    assert "root" in str(info.value) and "--data-root" in str(info.value)
    assert "does-not-exist" in str(info.value)


def test_nonexistent_env_root_names_the_variable(tmp_path, monkeypatch):
    monkeypatch.setenv("GNNPRIVACY_DATA", str(tmp_path / "nowhere"))
    with pytest.raises(InvalidParameterError, match="GNNPRIVACY_DATA"):
        load_dataset("cora")
    assert load_dataset("csbm", num_nodes=50).num_nodes == 50  # generated: no root needed
    monkeypatch.delenv("GNNPRIVACY_DATA")
    assert resolve_root().source == "default"


@pytest.mark.skipif(importlib.util.find_spec("ogb") is not None, reason="ogb is installed")
def test_ogbn_arxiv_without_ogb_says_so(tmp_path):
    with pytest.raises(ModuleNotFoundError, match="needs the optional 'ogb' package"):
        load_dataset("ogbn-arxiv", root=tmp_path, cache_dir=tmp_path / "cache")


@pytest.mark.dataset
def test_half_written_entry_and_stale_temporaries_are_replaced(shared_root, tmp_path, no_data_env):
    root, cache = tmp_path / "root", tmp_path / "cache"
    _copy(shared_root, root, "Twitch/PT/raw/PT.npz")
    base = root_cache_dir(cache.resolve(), root.resolve())
    half = base / "Twitch" / "PT" / "processed"  # an entry without marker: a killed build
    half.mkdir(parents=True)
    (half / "data.pt").write_bytes(b"truncated")
    stale = base / ".tmp-killed"
    stale.mkdir()
    os.utime(stale, (0, 0))
    assert load_dataset("twitch-pt", root=root, cache_dir=cache).num_nodes == 1912
    assert (base / "Twitch" / "PT" / ".gnnprivacy-entry.json").is_file()
    assert not stale.exists() and not list(base.glob(".tmp-*"))
