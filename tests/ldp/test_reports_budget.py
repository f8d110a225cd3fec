"""User side (reports) and the per-user budget (spec 004 §3, §9)."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.ldp.budget import budget_summary, feature_budget, ldp_accountant, user_budget
from gnnprivacy.ldp.reports import collect_reports


def _split(n):
    idx = torch.arange(n)
    return idx % 4 < 2, idx % 4 == 2, idx % 4 == 3


def _collect(x, y, **kw):
    train, val, test = _split(x.size(0))
    args = dict(edge_index=torch.zeros(2, 0, dtype=torch.long), train_mask=train, val_mask=val,
                test_mask=test, num_classes=3, eps_x=1.0, eps_y=1.0, m=2,
                generator=torch.Generator().manual_seed(0))
    args.update(kw)
    return collect_reports(x, y, **args)


def test_reports_shape_and_test_users_report_no_label():
    x = torch.randint(0, 2, (40, 6), generator=torch.Generator().manual_seed(1)).float()
    y = torch.arange(40) % 3
    view = _collect(x, y)
    assert view.x_reports.shape == (40, 6) and set(view.x_reports.unique().tolist()) <= {0, 1}
    assert (view.y_reports[view.test_mask] == -1).all()
    assert ((view.y_reports[view.labeled_mask] >= 0) & (view.y_reports[view.labeled_mask] < 3)).all()
    assert view.m == 2 and view.feature_epsilon == 1.0 and view.num_features == 6
    mb = _collect(x, y, feature_mechanism="multibit")
    assert set(mb.x_reports.unique().tolist()) <= {-1.0, 0.0, 1.0}
    assert ((mb.x_reports != 0).sum(1) == 2).all()   # exactly m sampled dimensions


def test_bad_input_gives_clear_errors():
    y = torch.arange(8) % 3
    with pytest.raises(InvalidParameterError, match="non-binary features given to GRR-FS without grouping"):
        _collect(torch.full((8, 4), 2.0), y)
    with pytest.raises(InvalidParameterError, match="'m'"):
        _collect(torch.ones(8, 4), y, m=5)
    with pytest.raises(InvalidParameterError, match="'eps_x'"):
        _collect(torch.ones(8, 4), y, eps_x=0.0)
    with pytest.raises(InvalidParameterError, match="'eps_y'"):
        _collect(torch.ones(8, 4), y, eps_y=-1.0)
    bad = y.clone()
    bad[0] = 3                                     # node 0 is a training node
    with pytest.raises(InvalidParameterError, match=r"labels in \[0, 3\)"):
        _collect(torch.ones(8, 4), bad)
    bad[0] = -1
    with pytest.raises(InvalidParameterError, match=r"labels in \[0, 3\)"):
        _collect(torch.ones(8, 4), bad)
    with pytest.raises(InvalidParameterError, match="feature_mechanism"):
        _collect(torch.ones(8, 4), y, feature_mechanism="laplace")


def test_test_labels_are_never_read():
    x = torch.ones(8, 4)
    y = torch.arange(8) % 3
    y_bad = y.clone()
    y_bad[_split(8)[2]] = 99                       # garbage on test users only: accepted
    assert torch.equal(_collect(x, y).y_reports, _collect(x, y_bad).y_reports)


def test_budget_modes_match_spec_tables():
    # spec 004 §9.1 (paper eps_X, m = 10) and §9.3 (sound m * eps_x)
    assert feature_budget(eps_x=1.0, m=10, d=58, mode="paper") == pytest.approx(8.2424, abs=1e-4)
    assert feature_budget(eps_x=0.1, m=10, d=48, mode="paper") == pytest.approx(0.3060, abs=1e-4)
    assert feature_budget(eps_x=1.0, m=10, d=58) == 10.0
    assert user_budget(eps_x=1.0, m=10, d=58, eps_y=2.0) == 12.0
    assert user_budget(eps_x=1.0, m=10, d=58, eps_y=2.0, labeled=False) == 10.0
    s = budget_summary(eps_x=1.0, m=10, d=58, eps_y=1.0, mode="paper")
    assert s["epsilon"] == pytest.approx(9.2424, abs=1e-4) and s["labeled_user_epsilon_sound"] == 11.0
    acc = ldp_accountant(eps_x=1.0, m=10, d=58, eps_y=1.0, num_classes=7)
    assert acc.get_epsilon(0.0) == pytest.approx(11.0)
    assert acc.unit.value == "node" and acc.relation.value == "replace"
    with pytest.raises(InvalidParameterError, match="eps_mode"):
        feature_budget(eps_x=1.0, m=10, d=58, mode="amplified")


@pytest.mark.parametrize("d,m,eps_x,c,eps_y", [(4, 2, 1.0, 3, 0.5), (3, 1, 2.0, 2, 1.0)])
def test_exact_per_user_ratio_equals_sound_budget_and_exceeds_paper(d, m, eps_x, c, eps_y):
    """Exact worst case over (features, label) inputs and outputs of the composed user report.

    The GRR-FS-only version of this check lives in tests/mechanisms/test_mech_grr_fs.py
    (``test_exact_worst_case_ratio_is_sound_epsilon_and_exceeds_paper``); here the feature and
    label reports of one user are composed, as the methods report them.
    """
    x0 = torch.zeros(1, d)
    view = _collect(torch.cat([x0] * 4), torch.zeros(4, dtype=torch.long), eps_x=eps_x,
                    eps_y=eps_y, m=m, num_classes=c)
    feat, lab = view.mechanisms["features"], view.mechanisms["labels"]
    vecs = torch.tensor(list(itertools.product([0, 1], repeat=d)), dtype=torch.float32)
    n = vecs.size(0)
    fprob = torch.stack([feat.probability(vecs[i].expand(n, d), vecs.long()) for i in range(n)])
    classes = torch.arange(c)
    lprob = torch.stack([lab.probability(classes[i].expand(c), classes) for i in range(c)])
    joint = (fprob[:, None, :, None] * lprob[None, :, None, :]).reshape(n * c, n * c)
    assert torch.allclose(joint.sum(1), torch.ones(n * c, dtype=joint.dtype))
    worst = math.log((joint.max(0).values / joint.min(0).values).max().item())
    sound = budget_summary(eps_x=eps_x, m=m, d=d, eps_y=eps_y)
    assert worst == pytest.approx(sound["epsilon"], abs=1e-9)
    assert worst > sound["labeled_user_epsilon_paper"] + 0.2   # the paper's figure is not a bound
