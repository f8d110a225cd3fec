"""Registry: every required name, complete metadata, and a light import."""

from __future__ import annotations

import subprocess
import sys

import pytest

from gnnprivacy.datasets import dataset_info, list_datasets
from gnnprivacy.datasets.registry import register_dataset

REQUIRED = ["cora", "citeseer", "pubmed", "computers", "photo", "cs", "physics", "facebook",
            "twitch-de", "twitch-en", "twitch-es", "twitch-fr", "twitch-pt", "twitch-ru",
            "lastfm", "german", "ogbn-arxiv", "csbm"]


def test_every_required_dataset_is_registered():
    assert sorted(REQUIRED + ["aids", "csbm-large", "enzymes"]) == list_datasets()


@pytest.mark.parametrize("name", REQUIRED)
def test_info_is_complete(name):
    info = dataset_info(name)
    assert info.name == name and info.description and info.pyg_class
    assert info.generated == (name == "csbm")
    assert bool(info.raw_files) != info.generated
    assert all(not f.startswith("/") and "/raw/" in f or "/split/" in f for f in info.raw_files)
    assert info.default_split == ("public" if name in ("cora", "citeseer") else "random")
    d = info.to_dict()
    assert d["raw_files"] == list(info.raw_files) and d["papers"] == list(info.papers)


def test_papers_and_notes_of_key_datasets():
    assert any(p.startswith("000") for p in dataset_info("twitch-de").papers)
    assert any(p.startswith("002") for p in dataset_info("ogbn-arxiv").papers)
    assert "4,714" in dataset_info("facebook").notes and "3,170" in dataset_info("twitch-de").notes
    assert dataset_info("ogbn-arxiv").requires == ("ogb",)
    assert dataset_info("Cora") == dataset_info("cora")  # case-insensitive


def test_duplicate_registration_is_refused():
    with pytest.raises(ValueError, match="already registered"):
        register_dataset("cora", description="x", pyg_class="x")(lambda ctx: None)


def test_listing_does_not_import_torch():
    code = ("import sys; from gnnprivacy.datasets import list_datasets, dataset_status; "
            "list_datasets(); dataset_status('cora'); print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
