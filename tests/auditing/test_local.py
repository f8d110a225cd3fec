"""Exact audits of local mechanisms by enumeration."""

import math

import pytest
import torch

from gnnprivacy.auditing.local import (exact_epsilon, exact_epsilon_pair, grr_audit, grr_fs_audit,
                                       multibit_audit)


def test_exact_pair():
    assert exact_epsilon_pair([0.75, 0.25], [0.25, 0.75]) == pytest.approx(math.log(3))
    # with delta the epsilon can only drop
    assert exact_epsilon_pair([0.75, 0.25], [0.25, 0.75], delta=0.1) < math.log(3)


@pytest.mark.parametrize("eps,k", [(0.5, 2), (1.5, 4), (3.0, 7)])
def test_grr_is_exactly_its_epsilon(eps, k):
    assert grr_audit(eps, k)["epsilon"] == pytest.approx(eps)


def test_grr_fs_sound_claim_is_tight_and_paper_claim_is_exceeded():
    sound = grr_fs_audit(eps_x=1.0, m=2, d=4)
    assert sound["epsilon"] == pytest.approx(sound["epsilon_claimed"]) == pytest.approx(2.0)
    assert sound["coverage"] == pytest.approx(1.0)
    paper = grr_fs_audit(eps_x=1.0, m=10, d=58, mode="paper")   # Cora, RGNN's eps_X = 8.24
    assert paper["epsilon_claimed"] == pytest.approx(8.2424, abs=1e-3)
    assert paper["epsilon"] == pytest.approx(10.0)
    assert paper["epsilon"] > paper["epsilon_claimed"]


def test_multibit_is_exactly_its_epsilon():
    assert multibit_audit(epsilon=2.0, d=3, m=2)["epsilon"] == pytest.approx(2.0)
    assert multibit_audit(epsilon=3.0, d=20, m=5)["epsilon"] == pytest.approx(3.0)


class _BrokenGRR:
    """Positive control: keeps the true value more often than its epsilon allows."""

    def probability(self, x, y):
        return torch.where(x == y, 0.9, 0.1 / 2).double()


def test_broken_mechanism_is_caught():
    cats = torch.arange(3)
    out = exact_epsilon(_BrokenGRR(), cats, cats)
    assert out["epsilon"] == pytest.approx(math.log(0.9 / 0.05))
    assert out["epsilon"] > 1.0
