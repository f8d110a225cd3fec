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


def test_feature_rr_exact_epsilon_is_its_budget():
    from gnnprivacy.auditing.local import feature_rr_audit

    out = feature_rr_audit(epsilon=2.0, num_features=3, k=10, theta=[0.5, 0.3, 0.2])
    assert out["epsilon"] == pytest.approx(2.0)


def test_edge_rr_sound_mode_within_budget():
    from gnnprivacy.auditing.local import edge_rr_audit

    out = edge_rr_audit(4, [[0], [1]], [[1, 2], [2, 3]], eps_e1=1.0)
    assert 0 < out["epsilon"] <= 1.0 + 1e-9


def test_local_method_audit_through_the_registry():
    from gnnprivacy.auditing import audit

    ok = audit("rgnn", "csbm", epsilon=2.0, params={"m": 4})
    assert ok.mode == "exact" and ok.epsilon_lower_bound == pytest.approx(2.0)
    assert not ok.violation
    paper = audit("rgnn", "csbm", epsilon=2.0, params={"m": 4, "eps_mode": "paper"})
    assert paper.violation


def test_heterorr_methods_through_the_registry():
    from gnnprivacy.auditing import audit

    feat = audit("featurerr", "csbm", epsilon=2.0)
    assert feat.epsilon_lower_bound == pytest.approx(2.0) and not feat.violation
    edge = audit("edgerr", "csbm")
    assert 0 < edge.epsilon_lower_bound <= edge.epsilon_claimed + 1e-9
    paper = audit("edgerr", "csbm", params={"mode": "paper"})      # c_em = 1: caught
    assert paper.violation
