"""Pins must exercise the accountants, never the on-disk accounting cache."""

import pytest


@pytest.fixture(autouse=True)
def _no_accounting_cache(monkeypatch):
    monkeypatch.setenv("GNNPRIVACY_ACCOUNTING_CACHE", "off")
