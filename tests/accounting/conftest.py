"""Accounting tests use a private on-disk cache (never ~/.cache)."""

import pytest


@pytest.fixture(autouse=True)
def _private_accounting_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("GNNPRIVACY_CACHE", str(tmp_path_factory.getbasetemp() / "gp-cache"))
