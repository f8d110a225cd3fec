"""mode="code": the white-box audit of the executed trainer flags a halved noise std and a
skipped clip patched into the engine, for every node-DP method and the user-model path, and
does not flag the honest code."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.nn import functional as F

import gnnprivacy as gp
from gnnprivacy.auditing.code import code_audit
from gnnprivacy.training.dp import clipping
from gnnprivacy.training.dp import engine as engine_module

SMALL = {"dataset_args": "num_nodes=400"}
FAST = {"gap": {"encoder_epochs": 3, "epochs": 3, "max_degree": 5}}
METHODS = ["heterpoisson", "dpgnn", "dpmlp", "gap"]


def _patch(monkeypatch, bug):
    if bug == "std/2":
        original = engine_module.noised_flat
        monkeypatch.setattr(engine_module, "noised_flat",
                            lambda sums, std, **kw: original(sums, std / 2, **kw))
    elif bug == "no clip":
        monkeypatch.setattr(clipping, "clip_factors", lambda norms, c: torch.ones_like(norms))


def _audit(method, seed=0):
    return gp.audit(method, "csbm", epsilon=4.0, mode="code", seed=seed,
                    params={**SMALL, **FAST.get(method, {})})


@pytest.mark.parametrize("bug", ["none", "std/2", "no clip"])
@pytest.mark.parametrize("method", METHODS)
def test_code_audit_flags_engine_bugs_and_passes_the_honest_code(method, bug, monkeypatch):
    _patch(monkeypatch, bug)
    result = _audit(method)
    assert result.mode == "code" and result.epsilon_claimed <= 4.0 + 1e-9
    assert result.violation == (bug != "none"), result.summary()
    engines = [e for e in result.details["engines"] if e["measured"]]
    assert engines
    if bug == "no clip":
        assert all(e["clip"] > 3 * e["planned_clip_norm"] for e in engines)
    if bug == "std/2":
        assert all(0.3 < e["noise_factor"] < 0.75 for e in engines)


@pytest.mark.statistical
def test_honest_code_is_not_flagged_over_repetitions():
    """Each measured parameter sits at its 99.9 % one-sided confidence end: over 12 seeds the
    honest trainer is never flagged, and the executed noise factor is centred on 1."""
    factors = []
    for seed in range(12):
        result = _audit("dpmlp", seed=seed)
        assert not result.violation, result.summary()
        factors += [e["noise_factor"] for e in result.details["engines"]]
    mean = sum(factors) / len(factors)
    assert 0.9 < mean < 1.1


class Sage(nn.Module):
    def __init__(self, f, c, h=16):
        super().__init__()
        from torch_geometric.nn import SAGEConv

        self.c1, self.norm, self.head = SAGEConv(f, h), nn.LayerNorm(h), nn.Linear(h, c)

    def forward(self, x, edge_index):
        return self.head(self.norm(torch.relu(self.c1(x, edge_index))))


@pytest.mark.parametrize("bug", ["none", "std/2", "no clip"])
def test_code_audit_of_the_user_model_path(bug, monkeypatch):
    _patch(monkeypatch, bug)
    data = gp.load_dataset("csbm", num_nodes=400)

    def train():
        torch.manual_seed(0)
        model = Sage(data.num_features, 4)
        opt = torch.optim.Adam(model.parameters(), lr=0.01)
        pt = gp.make_private(model, opt, data, sampler="heterpoisson", epsilon=4.0, seed=0,
                             steps=60)
        for batch in pt.loader:
            opt.zero_grad()
            out = model(batch.x, batch.edge_index)
            F.cross_entropy(out[batch.center], batch.y[batch.center]).backward()
            opt.step()
        return {"epsilon": pt.epsilon, "delta": pt.delta}

    result = code_audit(train, seed=0)
    assert result.violation == (bug != "none"), result.summary()


def test_code_audit_needs_an_engine():
    from gnnprivacy.errors import InvalidParameterError

    with pytest.raises(InvalidParameterError, match="no engine observed"):
        code_audit(lambda: {"epsilon": 1.0, "delta": 1e-5})
