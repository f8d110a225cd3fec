"""HeteroRR methods in the training harness: records, accounting, bad input, CLI registration."""

from __future__ import annotations

import math

import pytest
import torch

from gnnprivacy.datasets import load_dataset
from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.method.context import RunContext
from gnnprivacy.method.builtin.heterorr import METHODS, HeteroRRParams
from gnnprivacy.method.registry import get_method
from gnnprivacy.ldp.heterorr.pipeline import release


@pytest.fixture(scope="module")
def data():
    return load_dataset("csbm", num_nodes=120, seed=0)


def _run(name, data, **kw):
    params = HeteroRRParams(epochs=5, patience=5, hidden=8, mcmc_steps=500, **kw)
    return get_method(name).fn(RunContext(config=None, params=params, data=data, seed=1))


FAST = {"heterorr", "feat-multibit", "edge-lapgraph", "edge-rand"}


@pytest.mark.parametrize("name", [pytest.param(m, marks=() if m in FAST else pytest.mark.slow)
                                  for m in sorted(METHODS)])
def test_every_method_runs_and_accounts(name, data):
    res = _run(name, data, eps_f=2.0, eps_e=1.5)
    fm, em, _ = METHODS[name]
    pr = res.privacy
    assert pr["epsilon_features"] == (math.inf if fm == "clean" else pytest.approx(2.0))
    assert pr["epsilon_edges"] == (math.inf if em == "clean" else pytest.approx(1.5))
    both = fm != "clean" and em != "clean"
    # both parts: the total under the joint relation (issue 22 item 5); else the one part
    assert res.epsilon == pytest.approx(3.5 if both else 1.5 if em != "clean" else 2.0)
    assert pr["unit"] == ("feature+edge" if both else "edge" if em != "clean" else "feature")
    assert 0.0 <= res.metrics["test_accuracy"] <= 1.0
    assert "labels" in pr["unaccounted"] and pr["delta"] == 0.0


def test_release_is_seeded_and_keeps_public_edges(data):
    a = release(data, eps_f=1.0, eps_e=1.0, mcmc_steps=300, seed_for=lambda p: hash(p) % 97)
    b = release(data, eps_f=1.0, eps_e=1.0, mcmc_steps=300, seed_for=lambda p: hash(p) % 97)
    assert a.data.x.equal(b.data.x) and a.data.edge_index.equal(b.data.edge_index)
    n = data.num_nodes
    released = {(int(u), int(v)) for u, v in a.data.edge_index.t()}
    assert all((int(u), int(v)) in released for u, v in a.public_edges.T)
    assert a.privacy["guarantees"] == {"features": "proved", "edges": "asymptotic"}
    # FeatureRR's levels u/k in [0.1, 1] minus the public constant (k+1)/2k = 0.55 (k = 10)
    assert a.data.x.min() >= -0.45 - 1e-6 and a.data.x.max() <= 0.45 + 1e-6 and n == a.data.num_nodes
    raw = release(data, feature_method="featurerr-raw", edge_method="clean", eps_f=1.0,
                  seed_for=lambda p: hash(p) % 97)
    assert raw.data.x.min() >= 0.1 - 1e-6 and raw.data.x.max() <= 1.0
    torch.testing.assert_close(raw.data.x - 0.55, a.data.x)    # same draw, shifted


@pytest.mark.parametrize("kw", [dict(eps_f=0.0), dict(eps_e=-1.0), dict(private_edge_frac=1.5),
                                dict(private_edge_frac=-0.1), dict(levels=1),
                                dict(score_source="shap"), dict(edge_split=1.0)])
def test_bad_parameters(kw):
    with pytest.raises(InvalidParameterError):
        HeteroRRParams(**kw)


def test_no_private_edges_is_a_clear_error(data):
    with pytest.raises(InvalidParameterError, match="private edge"):
        release(data, feature_method="clean", edge_method="edgerr", eps_e=1.0,
                private_edge_frac=0.0)


def test_cli_lists_methods_and_attack():
    from click.testing import CliRunner

    from gnnprivacy.cli import main

    out = CliRunner().invoke(main, ["attack", "--help"])
    assert "linkteller" in out.output
    out = CliRunner().invoke(main, ["attack", "linkteller", "--help"])
    assert "--eps-e" in out.output and out.exit_code == 0


@pytest.mark.parametrize("have_numba", [False, True])
def test_log_line_hints_numba_when_the_mcmc_ran_in_python(have_numba, data, monkeypatch):
    # issue 25: without numba heterorr takes ~10x longer; the log line says how to fix it
    from gnnprivacy.ldp.heterorr import _kernels

    monkeypatch.setattr(_kernels, "HAVE_NUMBA", have_numba)
    lines = []
    params = HeteroRRParams(epochs=2, patience=2, hidden=8, mcmc_steps=200, eps_f=2.0, eps_e=1.5)
    get_method("heterorr").fn(RunContext(config=None, params=params, data=data, seed=1,
                                         log=lines.append))
    hinted = [line for line in lines if "gnnprivacy[heterorr]" in line]
    assert len(hinted) == (0 if have_numba else 1), lines
    # no MCMC, no hint
    lines.clear()
    get_method("edge-rand").fn(RunContext(config=None, params=params, data=data, seed=1,
                                          log=lines.append))
    assert lines and not any("numba" in line for line in lines)


def test_heterorr_record_states_the_total_and_lists_the_reference_nodes(data, tmp_path):
    """issue 22 item 5: the top-level epsilon of a heterorr record is eps_f + eps_e under the
    declared joint relation, the parts beside it; the public reference nodes whose raw
    features and labels set theta are listed as unaccounted (ids in info)."""
    from gnnprivacy.method.runner import run

    rec = run({"method": "heterorr", "dataset": "csbm", "dataset_args": "num_nodes=120",
               "eps_f": 2.0, "eps_e": 1.5, "epochs": 5, "patience": 5, "hidden": 8,
               "mcmc_steps": 500, "runs_dir": str(tmp_path)})
    p = rec.privacy
    assert rec.epsilon == pytest.approx(3.5) == p["epsilon_total"]
    assert p["epsilon_features"] == pytest.approx(2.0) and p["epsilon_edges"] == pytest.approx(1.5)
    assert p["unit"] == "feature+edge" and p["relation"] == "feature_replace+edge_add_or_remove"
    assert p["units"] == {"features": "feature", "edges": "edge"}
    ref = rec.info["public_reference_nodes"]
    assert ref == 12 and len(rec.info["public_reference_node_ids"]) == ref
    assert any("12 public reference nodes" in u for u in p["unaccounted"])
    assert "except the 12 public reference nodes" in p["scope"]
    # a score source with no data-dependent split lists no reference nodes
    uniform = release(data, eps_f=1.0, eps_e=1.0, mcmc_steps=300, score_source="uniform")
    assert not any("reference" in u for u in uniform.privacy["unaccounted"])
    private = release(data, eps_f=1.0, eps_e=1.0, mcmc_steps=300, score_source="private")
    assert any("score_source=private" in u for u in private.privacy["unaccounted"])
