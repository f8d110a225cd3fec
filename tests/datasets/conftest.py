"""Fixtures for the dataset tests: the shared offline datasets and a session-wide PyG cache."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def shared_datasets_dir() -> Path:
    """``$GNNPRIVACY_SHARED_DATASETS``, else ``<repo>/../shared/datasets``."""
    env = os.environ.get("GNNPRIVACY_SHARED_DATASETS")
    return Path(env) if env else REPO.parent / "shared" / "datasets"


@pytest.fixture(scope="session")
def shared_root() -> Path:
    root = shared_datasets_dir()
    if not (root / "MANIFEST.md").is_file():
        pytest.skip(f"shared datasets not found at {root} (set GNNPRIVACY_SHARED_DATASETS)")
    return root


@pytest.fixture(scope="session")
def session_cache(tmp_path_factory):
    """One PyG cache for the whole session, so each dataset is processed once.

    Deleted at the end of the session: processed files weigh ~2.5 GB (Physics 1.1 GB).
    """
    cache = tmp_path_factory.mktemp("pyg-cache")
    yield cache
    shutil.rmtree(cache, ignore_errors=True)


@pytest.fixture
def no_data_env(monkeypatch):
    """Tests must not depend on the developer's $GNNPRIVACY_DATA / $GNNPRIVACY_CACHE."""
    monkeypatch.delenv("GNNPRIVACY_DATA", raising=False)
    monkeypatch.delenv("GNNPRIVACY_CACHE", raising=False)
