"""Exact audits of local mechanisms by enumeration."""

import math

import pytest
import torch

import gnnprivacy as gp
from gnnprivacy.auditing.local import (exact_epsilon, exact_epsilon_pair, grr_audit, grr_fs_audit,
                                       multibit_audit)
from gnnprivacy.errors import InvalidParameterError


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


@pytest.mark.parametrize("mechanism", ["duchi", "piecewise", "hybrid", "three-output", "pm-sub"])
@pytest.mark.parametrize("eps", [0.3, 0.65, 2.0, 8.0])
def test_one_dim_feature_baselines_are_exactly_their_budget(mechanism, eps):
    from gnnprivacy.auditing.local import one_dim_ldp_audit

    out = one_dim_ldp_audit(mechanism, epsilon=eps * 5, d=5)        # eps per coordinate
    assert out["per_coordinate"] == pytest.approx(eps, rel=1e-9)
    assert out["epsilon"] == pytest.approx(5 * eps, rel=1e-9)


def test_one_dim_audit_catches_a_wrong_probability(monkeypatch):
    """Control: Duchi with P[+] = 1/2 + x (e-1)/(2e+1) instead of /(2e+2) (still a valid
    probability, slightly too informative) is caught above its claim."""
    from gnnprivacy.auditing.local import one_dim_ldp_audit
    from gnnprivacy.mechanisms import feature_ldp

    monkeypatch.setattr(feature_ldp.Duchi, "prob_positive",
                        lambda self, x: 0.5 + x * (math.exp(self.epsilon) - 1) / (
                            2 * math.exp(self.epsilon) + 1))
    eps = one_dim_ldp_audit("duchi", epsilon=2.0, d=1)["epsilon"]
    assert math.isfinite(eps) and eps > 2.0 + 0.1


def test_edge_baselines_are_exactly_their_budget():
    from gnnprivacy.auditing.local import edge_rand_audit, lapgraph_audit

    assert edge_rand_audit(epsilon=1.5)["epsilon"] == pytest.approx(1.5)
    assert lapgraph_audit(epsilon=1.5)["epsilon"] == pytest.approx(1.5)


#: private methods without a canary law: audit() runs their code audit by default
CODE_AUDITED = {"edge-dp", "gap-edge", "link-edge-dp", "link-node-dp"}


def test_every_private_method_in_the_registry_is_auditable():
    """One interface for all: audit() accepts every registered private method, with a canary
    law (mechanism audit by default) or by its code audit (the edge-level methods)."""
    from gnnprivacy.auditing.api import audit_mode
    from gnnprivacy.auditing.plans import HETERORR_METHODS, LOCAL_METHODS, PLANNERS
    from gnnprivacy.method.registry import list_methods

    private = {spec.name for spec in list_methods() if spec.private}
    planned = set(PLANNERS) | set(LOCAL_METHODS) | set(HETERORR_METHODS)
    assert private <= planned | CODE_AUDITED, private - planned - CODE_AUDITED
    assert {audit_mode(m, None) for m in private & planned} == {"mechanism"}
    assert {audit_mode(m, None) for m in CODE_AUDITED} == {"code"}


def test_a_method_without_a_canary_law_is_code_audited_by_default():
    """gp.audit("edge-dp", ...) runs the code audit (every check made and passed); asking
    it for a mechanism audit is one clear error naming mode='code'."""
    from gnnprivacy.auditing import audit

    data = gp.load_dataset("csbm", num_nodes=300, seed=0)
    result = audit("edge-dp", "csbm", epsilon=4.0, data=data, params={"steps": 12})
    assert result.mode == "code" and not result.violation, result.summary()
    with pytest.raises(InvalidParameterError, match="'code' for 'edge-dp'"):
        audit("edge-dp", "csbm", epsilon=4.0, mode="mechanism", data=data)


@pytest.mark.parametrize("method", ["feat-duchi", "feat-pm-sub", "edge-rand", "edge-lapgraph",
                                    "edge-privhrg"])
def test_baselines_through_the_registry(method):
    from gnnprivacy.auditing import audit

    out = audit(method, "csbm", epsilon=2.0)
    assert out.mode == "exact" and not out.violation
    assert 0 < out.epsilon_lower_bound <= out.epsilon_claimed + 1e-9
