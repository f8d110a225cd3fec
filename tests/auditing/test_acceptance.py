"""Spec 000 §8 AU acceptance on the local datasets (slow: calibration plus 10^4 runs)."""

import os
from pathlib import Path

import pytest

from gnnprivacy.auditing import audit

ROOT = Path(os.environ.get("GNNPRIVACY_SHARED_DATASETS",
                           Path(__file__).resolve().parents[2].parent / "shared" / "datasets"))


def _root(name: str) -> str:
    if not (ROOT / name).is_dir():
        pytest.skip(f"{name} raw files not found under {ROOT}")
    return str(ROOT)


@pytest.mark.slow
def test_facebook_heterpoisson_audit_is_not_vacuous_and_catches_small_noise():
    root = _root("FacebookPagePage")
    kw = dict(epsilon=2.0, data_root=root, runs=10_000, params={"M": 1.0, "steps": 50})
    r = audit("heterpoisson", "facebook", **kw)
    assert 0.8 <= r.epsilon_lower_bound <= 2.0 and r.epsilon_lower_bound_gdp >= 1.5
    bad = audit("heterpoisson", "facebook", noise_scale=0.25, **kw)
    assert bad.epsilon_lower_bound > 2.0


@pytest.mark.slow
@pytest.mark.parametrize("method", ["heterpoisson", "dpgnn", "dpmlp", "gap", "rgnn"])
@pytest.mark.parametrize("eps", [1.0, 2.0, 4.0, 8.0])
def test_no_excess_loss_on_cora(method, eps):
    r = audit(method, "cora", epsilon=eps, data_root=_root("Cora"), runs=10_000)
    assert not r.violation, r.summary()
